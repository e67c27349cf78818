-- name: RunContinue :execrows
-- RunContinue ends the current execution of a leased, running run and makes
-- it a pending run of @version due at @now with @input, its lease given
-- back. Fenced like RunFinish: it changes nothing when the lease is no
-- longer the caller's.
UPDATE flowlite_runs
SET input = @input, version = @version, status = 'pending',
    lease_owner = NULL, lease_expires_at = NULL,
    run_at = @now, updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence AND status = 'running';

-- name: ExecutionNext :one
-- ExecutionNext counts one more execution of a run and returns its number:
-- 2 for a run that had no row (in its first execution).
INSERT INTO flowlite_executions (run_id, execution, continued_at)
VALUES (@run_id, 2, @now)
ON CONFLICT (run_id) DO UPDATE
SET execution = flowlite_executions.execution + 1, continued_at = excluded.continued_at
RETURNING execution;

-- name: ExecutionGet :one
-- ExecutionGet returns the number of a run's current execution and when
-- the one before continued as new; no row for a run in its first.
SELECT execution, continued_at FROM flowlite_executions WHERE run_id = @run_id;

-- name: ExecutionStepsDelete :execrows
-- ExecutionStepsDelete deletes every step record of a run whose execution
-- ended: the next one starts with a fresh history.
DELETE FROM flowlite_steps WHERE run_id = @run_id;

-- name: ExecutionSignalsRetire :execrows
-- ExecutionSignalsRetire prefixes the consumed_by of the signals an ended
-- execution received (or rejected) with @prefix ('execution N: '), so that
-- no wait of a later execution, whose keys start over, takes them for its
-- own (a reset's SignalRedeliver, a receive's SignalReject). A consumed_by
-- starts with a step name, a branch scope or 'rejected by ', never with
-- 'execution ', so signals retired before are left alone.
UPDATE flowlite_signals SET consumed_by = @prefix || consumed_by
WHERE run_id = @run_id AND consumed_by IS NOT NULL AND consumed_by NOT LIKE 'execution %';

-- name: CopyExecutionList :many
-- CopyExecutionList reads the execution numbers for `flowlite copy`.
SELECT * FROM flowlite_executions ORDER BY run_id;
