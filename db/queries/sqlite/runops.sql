-- Operator actions that move a run back in time or in the queue: a new due
-- time for a pending run (RunReschedule), a reset of a run to an earlier
-- call of its history in place (RunReset, StepDiscard, StepCompensationClear,
-- SignalRedeliver), and a fork of a run into a new one that starts from
-- such a call (RunForkInsert, StepCopy). Step calls are named by
-- name || '#' || occurrence, which is unambiguous because the occurrence,
-- after the last '#', is a number.

-- name: RunReschedule :execrows
-- RunReschedule makes the pending, unleased run @id due at @run_at, if it
-- is still at the claim @fence the caller read: a claim in between (even
-- one that gave the run back, pending again) moves the fence, and the
-- update does nothing, so an operator never overwrites the due time an
-- engine set since.
UPDATE flowlite_runs SET run_at = @run_at, updated_at = @now
WHERE id = @id AND status = 'pending' AND lease_owner IS NULL AND fence = @fence;

-- name: RunReset :execrows
-- RunReset puts the unleased run @id, if it is still @expected at the claim
-- @fence the caller read, back to pending, due at @now, with no outcome,
-- reason or cancellation request, and the deadline @deadline (NULL: none).
-- Its steps are reset apart (StepDiscard, StepCompensationClear). A claim
-- in between moves the fence and the update does nothing, so it never
-- races an engine for the run.
UPDATE flowlite_runs
SET status = 'pending', output = NULL, error = '', reason = '', cancel_requested = 0,
    run_at = @now, deadline = @deadline, finished_at = NULL, wake_seq = wake_seq + 1, updated_at = @now
WHERE id = @id AND status = @expected AND fence = @fence AND lease_owner IS NULL AND requeued_as IS NULL;

-- name: StepDiscard :execrows
-- StepDiscard deletes the step records of run @run_id named in @calls (a
-- JSON array of "name#occurrence" strings).
DELETE FROM flowlite_steps
WHERE run_id = @run_id
  AND (name || '#' || occurrence) IN (SELECT value FROM json_each(@calls));

-- name: StepCompensationClear :execrows
-- StepCompensationClear sets the compensation of every step of run @run_id
-- back to none, as for a run that never unwound: a reset run goes forward
-- again, and arms its compensations anew if it fails.
UPDATE flowlite_steps
SET compensation = 'none', compensation_attempts = 0, compensation_error = ''
WHERE run_id = @run_id AND compensation != 'none';

-- name: SignalRedeliver :execrows
-- SignalRedeliver makes the signals of run @run_id that the waits named in
-- @waits (a JSON array of consumed_by values) received pending again, so
-- that the run receives them again when it waits anew.
UPDATE flowlite_signals SET consumed_by = NULL
WHERE run_id = @run_id AND consumed_by IN (SELECT value FROM json_each(@waits));

-- name: RunForkInsert :execrows
-- RunForkInsert inserts run @id as a pending copy of run @from_id, due at
-- @now: same workflow version, queue, priority, input, timeout and context
-- values, no parent (so not detached), no unique key, and the deadline it
-- had moved by the time elapsed since it was created, or none for a run
-- with a timeout (its first claim gives it the whole timeout, as to a
-- requeue). Its fence starts at 1, as if claimed once, so that its first
-- claim reads the step records StepCopy gives it. It inserts nothing when
-- @from_id is unknown or @id is taken.
INSERT INTO flowlite_runs (id, workflow, version, queue, priority, status, input, run_at, deadline,
                  fence, created_at, updated_at, timeout, context_values)
SELECT @id, f.workflow, f.version, f.queue, f.priority, 'pending', f.input, @now,
       CASE WHEN f.deadline IS NULL OR f.timeout IS NOT NULL THEN NULL ELSE f.deadline - f.created_at + @now END,
       1, @now, @now, f.timeout, f.context_values
FROM flowlite_runs AS f
WHERE f.id = @from_id
ON CONFLICT DO NOTHING;

-- name: StepCopy :execrows
-- StepCopy copies the step records of run @from_id named in @calls (a JSON
-- array of "name#occurrence" strings) to run @to_id as they are, but with
-- no compensation: the copy has not unwound.
INSERT INTO flowlite_steps (run_id, name, occurrence, status, attempts, input, output, error, completed_seq,
                  compensable, compensation, compensation_attempts, compensation_error, started_at, finished_at,
                  position, error_code, error_permanent, error_details)
SELECT @to_id, s.name, s.occurrence, s.status, s.attempts, s.input, s.output, s.error, s.completed_seq,
       s.compensable, 'none', 0, '', s.started_at, s.finished_at,
       s.position, s.error_code, s.error_permanent, s.error_details
FROM flowlite_steps AS s
WHERE s.run_id = @from_id
  AND (s.name || '#' || s.occurrence) IN (SELECT value FROM json_each(@calls))
ORDER BY s.started_at, s.rowid;
