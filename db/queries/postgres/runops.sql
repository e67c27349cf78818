-- Operator actions that move a run back in time or in the queue: a new due
-- time for a pending run (RunReschedule), a reset of a run to an earlier
-- call of its history in place (RunReset, StepDiscard, StepCompensationClear,
-- SignalRedeliver), and a fork of a run into a new one that starts from
-- such a call (RunForkInsert, StepCopy). Step calls are named by
-- name || '#' || occurrence, which is unambiguous because the occurrence,
-- after the last '#', is a number.
--
-- Under READ COMMITTED the guards of RunReschedule and RunReset are
-- compare-and-sets: an update that meets a row a concurrent claim changed
-- waits for that claim's commit, then re-checks its WHERE clause against
-- the new row (fence moved, lease taken) and updates nothing; the row lock
-- it takes otherwise holds off claims (FOR UPDATE SKIP LOCKED passes the
-- run by) until the operator's transaction commits.

-- name: RunReschedule :execrows
-- RunReschedule makes the pending, unleased run @id due at @run_at, if it
-- is still at the claim @fence the caller read: a claim in between (even
-- one that gave the run back, pending again) moves the fence, and the
-- update does nothing, so an operator never overwrites the due time an
-- engine set since.
UPDATE flowlite.runs SET run_at = sqlc.arg(run_at)::bigint, updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND status = 'pending' AND lease_owner IS NULL AND fence = sqlc.arg(fence)::bigint;

-- name: RunReset :execrows
-- RunReset puts the unleased run @id, if it is still @expected at the claim
-- @fence the caller read, back to pending, due at @now, with no outcome,
-- reason or cancellation request, and the deadline @deadline (NULL: none).
-- Its steps are reset apart (StepDiscard, StepCompensationClear). A claim
-- in between moves the fence and the update does nothing, so it never
-- races an engine for the run.
UPDATE flowlite.runs
SET status = 'pending', output = NULL, error = '', reason = '', cancel_requested = false,
    run_at = sqlc.arg(now)::bigint, deadline = sqlc.narg(deadline)::bigint, finished_at = NULL,
    wake_seq = wake_seq + 1, updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND status = sqlc.arg(expected)::text AND fence = sqlc.arg(fence)::bigint
  AND lease_owner IS NULL AND requeued_as IS NULL;

-- name: StepDiscard :execrows
-- StepDiscard deletes the step records of run @run_id named in @calls (a
-- JSON array of "name#occurrence" strings).
DELETE FROM flowlite.steps
WHERE run_id = sqlc.arg(run_id)::text
  AND (name || '#' || occurrence::text) IN (SELECT jsonb_array_elements_text(sqlc.arg(calls)::text::jsonb));

-- name: StepCompensationClear :execrows
-- StepCompensationClear sets the compensation of every step of run @run_id
-- back to none, as for a run that never unwound: a reset run goes forward
-- again, and arms its compensations anew if it fails.
UPDATE flowlite.steps
SET compensation = 'none', compensation_attempts = 0, compensation_error = ''
WHERE run_id = sqlc.arg(run_id)::text AND compensation <> 'none';

-- name: SignalRedeliver :execrows
-- SignalRedeliver makes the signals of run @run_id that the waits named in
-- @waits (a JSON array of consumed_by values) received pending again, so
-- that the run receives them again when it waits anew.
UPDATE flowlite.signals SET consumed_by = NULL
WHERE run_id = sqlc.arg(run_id)::text
  AND consumed_by IN (SELECT jsonb_array_elements_text(sqlc.arg(waits)::text::jsonb));

-- name: RunForkInsert :execrows
-- RunForkInsert inserts run @id as a pending copy of run @from_id, due at
-- @now: same workflow version, queue, priority, input, timeout and context
-- values, no parent (so not detached), no unique key, and the deadline it
-- had moved by the time elapsed since it was created, or none for a run
-- with a timeout (its first claim gives it the whole timeout, as to a
-- requeue). Its fence starts at 1, as if claimed once, so that its first
-- claim reads the step records StepCopy gives it. It inserts nothing when
-- @from_id is unknown or @id is taken.
INSERT INTO flowlite.runs (id, workflow, version, queue, priority, status, input, run_at, deadline,
                  fence, created_at, updated_at, timeout, context_values)
SELECT sqlc.arg(id)::text, f.workflow, f.version, f.queue, f.priority, 'pending', f.input, sqlc.arg(now)::bigint,
       CASE WHEN f.deadline IS NULL OR f.timeout IS NOT NULL THEN NULL ELSE f.deadline - f.created_at + sqlc.arg(now)::bigint END,
       1, sqlc.arg(now)::bigint, sqlc.arg(now)::bigint, f.timeout, f.context_values
FROM flowlite.runs AS f
WHERE f.id = sqlc.arg(from_id)::text
ON CONFLICT DO NOTHING;

-- name: StepCopy :execrows
-- StepCopy copies the step records of run @from_id named in @calls (a JSON
-- array of "name#occurrence" strings) to run @to_id as they are, but with
-- no compensation: the copy has not unwound. They are inserted in the
-- order StepList reads them, which their new seq keeps.
INSERT INTO flowlite.steps (run_id, name, occurrence, status, attempts, input, output, error, completed_seq,
                  compensable, compensation, compensation_attempts, compensation_error, started_at, finished_at,
                  position, error_code, error_permanent, error_details)
SELECT sqlc.arg(to_id)::text, s.name, s.occurrence, s.status, s.attempts, s.input, s.output, s.error, s.completed_seq,
       s.compensable, 'none', 0, '', s.started_at, s.finished_at,
       s.position, s.error_code, s.error_permanent, s.error_details
FROM flowlite.steps AS s
WHERE s.run_id = sqlc.arg(from_id)::text
  AND (s.name || '#' || s.occurrence::text) IN (SELECT jsonb_array_elements_text(sqlc.arg(calls)::text::jsonb))
ORDER BY s.started_at, s.seq;
