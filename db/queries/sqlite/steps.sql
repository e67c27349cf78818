-- name: StepList :many
SELECT * FROM flowlite_steps WHERE run_id = @run_id ORDER BY started_at, rowid;

-- name: StepBegin :one
-- StepBegin records that an attempt of a step starts, before its body runs,
-- so the attempt count survives a crash.
INSERT INTO flowlite_steps (run_id, name, occurrence, status, attempts, input, position, started_at)
VALUES (@run_id, @name, @occurrence, 'running', 1, @input, @position, @now)
ON CONFLICT (run_id, name, occurrence) DO UPDATE
SET status = 'running', attempts = flowlite_steps.attempts + 1, error = '', error_code = '', error_permanent = 0, error_details = NULL
WHERE flowlite_steps.status IN ('running', 'retrying')
RETURNING attempts;

-- name: StepBeginNew :execrows
-- StepBeginNew records the first attempt of a step that has no record, and
-- inserts nothing when it has one (StepBegin then does the update). A
-- plain insert costs about half of StepBegin's insert-or-update with
-- RETURNING, and a step's first attempt is by far its most common.
INSERT INTO flowlite_steps (run_id, name, occurrence, status, attempts, input, position, started_at)
VALUES (@run_id, @name, @occurrence, 'running', 1, @input, @position, @now)
ON CONFLICT (run_id, name, occurrence) DO NOTHING;

-- name: StepComplete :execrows
UPDATE flowlite_steps
SET status = 'completed', output = @output, error = '',
    completed_seq = (SELECT COALESCE(MAX(s.completed_seq), 0) + 1 FROM flowlite_steps AS s WHERE s.run_id = flowlite_steps.run_id),
    compensable = @compensable,
    finished_at = @now
WHERE flowlite_steps.run_id = @run_id AND flowlite_steps.name = @name AND flowlite_steps.occurrence = @occurrence
  AND flowlite_steps.status IN ('running', 'waiting');

-- name: StepWait :exec
-- StepWait records a durable wait (timer, signal, child) the first time the
-- run reaches it; later executions find the record and its input.
INSERT INTO flowlite_steps (run_id, name, occurrence, status, attempts, input, position, started_at)
VALUES (@run_id, @name, @occurrence, 'waiting', 0, @input, @position, @now)
ON CONFLICT (run_id, name, occurrence) DO NOTHING;

-- name: StepSnooze :execrows
-- StepSnooze records an attempt that snoozed the step: it is retried later
-- and the attempt does not count (attempts goes back to what it was before
-- StepBegin).
UPDATE flowlite_steps
SET status = 'retrying', attempts = attempts - 1, error = @error, finished_at = @now
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence AND status = 'running';

-- name: StepFail :execrows
-- StepFail records a failed attempt: @status is 'retrying' when another
-- attempt follows and 'failed' when the step failed for good.
UPDATE flowlite_steps
SET status = @status, error = @error, error_code = @error_code, error_permanent = @error_permanent,
    error_details = @error_details, finished_at = @now
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence AND status = 'running';

-- name: StepCancel :execrows
-- StepCancel fails for good a call that has no outcome yet (a running or
-- retrying step, an open wait): the call's cancellation scope was
-- cancelled, and no attempt follows.
UPDATE flowlite_steps
SET status = 'failed', error = @error, error_code = @error_code, error_permanent = @error_permanent,
    error_details = @error_details, finished_at = @now
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence AND status IN ('running', 'retrying', 'waiting');

-- name: StepCompensationArm :execrows
-- StepCompensationArm queues the compensation of every completed,
-- compensable step of a run that starts unwinding. Until then a step's
-- compensation is 'none': a completed run never shows pending undo work.
UPDATE flowlite_steps
SET compensation = 'pending'
WHERE run_id = @run_id AND status = 'completed' AND compensable = 1 AND compensation = 'none';

-- name: StepCompensationBegin :one
UPDATE flowlite_steps
SET compensation = 'running', compensation_attempts = compensation_attempts + 1
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence
  AND compensation IN ('pending', 'running', 'retrying')
RETURNING compensation_attempts;

-- name: StepCompensationEnd :execrows
UPDATE flowlite_steps
SET compensation = @compensation, compensation_error = @error
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence AND compensation = 'running';

-- name: StepCompensationRetryFailed :execrows
-- StepCompensationRetryFailed gives failed compensations of a run a fresh
-- set of attempts (operator resume).
UPDATE flowlite_steps
SET compensation = 'pending', compensation_attempts = 0, compensation_error = ''
WHERE run_id = @run_id AND compensation = 'failed';

-- name: StepCompensationSkipFailed :execrows
-- StepCompensationSkipFailed marks failed compensations of a run as skipped
-- (operator decided the effect needs no undo).
UPDATE flowlite_steps
SET compensation = 'skipped'
WHERE run_id = @run_id AND compensation = 'failed';

-- name: StepReopen :execrows
-- StepReopen turns a completed wait back into an open one, when its
-- recorded outcome was set aside (a received signal whose payload the run
-- cannot decode).
UPDATE flowlite_steps
SET status = 'waiting', output = NULL, completed_seq = NULL, finished_at = NULL
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence AND status = 'completed';
