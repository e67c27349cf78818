-- name: StepList :many
SELECT * FROM flowlite.steps WHERE run_id = @run_id ORDER BY started_at, seq;

-- name: StepBegin :one
-- StepBegin records that an attempt of a step starts, before its body runs,
-- so the attempt count survives a crash. A concurrent begin of the same
-- step waits on the row's lock and then re-checks the WHERE clause. A step
-- of a run that does not exist is not recorded (no foreign key checks it:
-- migration 00012_runs_cascade.sql).
INSERT INTO flowlite.steps AS s (run_id, name, occurrence, status, attempts, input, position, started_at)
SELECT sqlc.arg(run_id)::text, sqlc.arg(name)::text, sqlc.arg(occurrence)::bigint, 'running', 1,
       sqlc.arg(input)::bytea, sqlc.narg(position)::bigint, sqlc.arg(now)::bigint
WHERE EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = sqlc.arg(run_id)::text)
ON CONFLICT (run_id, name, occurrence) DO UPDATE
SET status = 'running', attempts = s.attempts + 1, error = '', error_code = '', error_permanent = false, error_details = NULL
WHERE s.status IN ('running', 'retrying')
RETURNING attempts;

-- name: StepBeginNew :execrows
-- StepBeginNew records the first attempt of a step that has no record, and
-- inserts nothing when it has one (StepBegin then does the update). A
-- plain insert costs about half of StepBegin's insert-or-update with
-- RETURNING, and a step's first attempt is by far its most common.
INSERT INTO flowlite.steps (run_id, name, occurrence, status, attempts, input, position, started_at)
SELECT sqlc.arg(run_id)::text, sqlc.arg(name)::text, sqlc.arg(occurrence)::bigint, 'running', 1,
       sqlc.arg(input)::bytea, sqlc.narg(position)::bigint, sqlc.arg(now)::bigint
WHERE EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = sqlc.arg(run_id)::text)
ON CONFLICT (run_id, name, occurrence) DO NOTHING;

-- name: StepBeginNewMany :many
-- StepBeginNewMany is StepBeginNew for the steps of @steps, a JSON array of
-- objects (run_id, name, occurrence, input in hex, position, now; absent
-- keys are null), in one statement. It returns the steps it inserted: the
-- others have a record, and StepBegin begins them.
INSERT INTO flowlite.steps (run_id, name, occurrence, status, attempts, input, position, started_at)
SELECT j.v ->> 'run_id', j.v ->> 'name', (j.v ->> 'occurrence')::bigint, 'running', 1,
       decode(j.v ->> 'input', 'hex'), (j.v ->> 'position')::bigint, (j.v ->> 'now')::bigint
FROM jsonb_array_elements(sqlc.arg(steps)::jsonb) WITH ORDINALITY AS j(v, n)
WHERE EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = j.v ->> 'run_id')
ORDER BY j.n
ON CONFLICT (run_id, name, occurrence) DO NOTHING
RETURNING run_id, name, occurrence;

-- name: StepComplete :execrows
-- StepComplete checkpoints a step's output and numbers the completion
-- within its run (compensations run in reverse completion order). The
-- number counts the run's completions this statement can see, so two
-- transactions of one run that overlap can draw the same one where SQLite
-- would have ordered them. A transaction that checked the lease first
-- holds the run's row (RunLeaseCheck) and keeps any other such transaction
-- out until it commits; the overlap left is two branches of one run (All,
-- First) completing at the same moment, whose compensations may then run
-- in either order, as their completions could have.
UPDATE flowlite.steps AS t
SET status = 'completed', output = sqlc.arg(output)::bytea, error = '',
    completed_seq = (SELECT COALESCE(MAX(s.completed_seq), 0) + 1 FROM flowlite.steps AS s WHERE s.run_id = t.run_id),
    compensable = sqlc.arg(compensable)::boolean,
    finished_at = sqlc.arg(now)::bigint
WHERE t.run_id = sqlc.arg(run_id)::text AND t.name = sqlc.arg(name)::text AND t.occurrence = sqlc.arg(occurrence)::bigint
  AND t.status IN ('running', 'waiting');

-- name: StepWait :exec
-- StepWait records a durable wait (timer, signal, child) the first time the
-- run reaches it; later executions find the record and its input.
INSERT INTO flowlite.steps (run_id, name, occurrence, status, attempts, input, position, started_at)
VALUES (@run_id, @name, @occurrence, 'waiting', 0, @input, @position, @now)
ON CONFLICT (run_id, name, occurrence) DO NOTHING;

-- name: StepSnooze :execrows
-- StepSnooze records an attempt that snoozed the step: it is retried later
-- and the attempt does not count (attempts goes back to what it was before
-- StepBegin).
UPDATE flowlite.steps
SET status = 'retrying', attempts = attempts - 1, error = sqlc.arg(error)::text, finished_at = sqlc.arg(now)::bigint
WHERE run_id = sqlc.arg(run_id)::text AND name = sqlc.arg(name)::text AND occurrence = sqlc.arg(occurrence)::bigint
  AND status = 'running';

-- name: StepFail :execrows
-- StepFail records a failed attempt: @status is 'retrying' when another
-- attempt follows and 'failed' when the step failed for good.
UPDATE flowlite.steps
SET status = sqlc.arg(status)::text, error = sqlc.arg(error)::text, error_code = sqlc.arg(error_code)::text,
    error_permanent = sqlc.arg(error_permanent)::boolean, error_details = sqlc.narg(error_details)::bytea,
    finished_at = sqlc.arg(now)::bigint
WHERE run_id = sqlc.arg(run_id)::text AND name = sqlc.arg(name)::text AND occurrence = sqlc.arg(occurrence)::bigint
  AND status = 'running';

-- name: StepCancel :execrows
-- StepCancel fails for good a call that has no outcome yet (a running or
-- retrying step, an open wait): the call's cancellation scope was
-- cancelled, and no attempt follows. The run's lease, checked first by the
-- same transaction, keeps other writers off the row.
UPDATE flowlite.steps
SET status = 'failed', error = sqlc.arg(error)::text, error_code = sqlc.arg(error_code)::text,
    error_permanent = sqlc.arg(error_permanent)::boolean, error_details = sqlc.narg(error_details)::bytea,
    finished_at = sqlc.arg(now)::bigint
WHERE run_id = sqlc.arg(run_id)::text AND name = sqlc.arg(name)::text AND occurrence = sqlc.arg(occurrence)::bigint
  AND status IN ('running', 'retrying', 'waiting');

-- name: StepCompensationArm :execrows
-- StepCompensationArm queues the compensation of every completed,
-- compensable step of a run that starts unwinding. Until then a step's
-- compensation is 'none': a completed run never shows pending undo work.
UPDATE flowlite.steps
SET compensation = 'pending'
WHERE run_id = @run_id AND status = 'completed' AND compensable AND compensation = 'none';

-- name: StepCompensationBegin :one
UPDATE flowlite.steps
SET compensation = 'running', compensation_attempts = compensation_attempts + 1
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence
  AND compensation IN ('pending', 'running', 'retrying')
RETURNING compensation_attempts;

-- name: StepCompensationEnd :execrows
UPDATE flowlite.steps
SET compensation = sqlc.arg(compensation)::text, compensation_error = sqlc.arg(error)::text
WHERE run_id = sqlc.arg(run_id)::text AND name = sqlc.arg(name)::text AND occurrence = sqlc.arg(occurrence)::bigint
  AND compensation = 'running';

-- name: StepCompensationRetryFailed :execrows
-- StepCompensationRetryFailed gives failed compensations of a run a fresh
-- set of attempts (operator resume).
UPDATE flowlite.steps
SET compensation = 'pending', compensation_attempts = 0, compensation_error = ''
WHERE run_id = @run_id AND compensation = 'failed';

-- name: StepCompensationSkipFailed :execrows
-- StepCompensationSkipFailed marks failed compensations of a run as skipped
-- (operator decided the effect needs no undo).
UPDATE flowlite.steps
SET compensation = 'skipped'
WHERE run_id = @run_id AND compensation = 'failed';

-- name: StepReopen :execrows
-- StepReopen turns a completed wait back into an open one, when its
-- recorded outcome was set aside (a received signal whose payload the run
-- cannot decode).
UPDATE flowlite.steps
SET status = 'waiting', output = NULL, completed_seq = NULL, finished_at = NULL
WHERE run_id = @run_id AND name = @name AND occurrence = @occurrence AND status = 'completed';
