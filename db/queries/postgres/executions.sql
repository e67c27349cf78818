-- name: RunContinue :execrows
-- RunContinue ends the current execution of a leased, running run and makes
-- it a pending run of @version due at @now with @input, its lease given
-- back. Fenced like RunFinish: the update locks the run's row, and changes
-- nothing when the lease is no longer the caller's.
UPDATE flowlite.runs
SET input = sqlc.arg(input)::bytea, version = sqlc.arg(version)::bigint, status = 'pending',
    lease_owner = NULL, lease_expires_at = NULL,
    run_at = sqlc.arg(now)::bigint, updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND lease_owner = sqlc.arg(owner)::text AND fence = sqlc.arg(fence)::bigint
  AND status = 'running';

-- name: ExecutionNext :one
-- ExecutionNext counts one more execution of a run and returns its number:
-- 2 for a run that had no row (in its first execution). Only RunContinue's
-- transaction calls it, after the update that locked the run's row.
INSERT INTO flowlite.executions (run_id, execution, continued_at)
VALUES (sqlc.arg(run_id)::text, 2, sqlc.arg(now)::bigint)
ON CONFLICT (run_id) DO UPDATE
SET execution = flowlite.executions.execution + 1, continued_at = excluded.continued_at
RETURNING execution;

-- name: ExecutionGet :one
-- ExecutionGet returns the number of a run's current execution and when
-- the one before continued as new; no row for a run in its first.
SELECT execution, continued_at FROM flowlite.executions WHERE run_id = @run_id;

-- name: ExecutionStepsDelete :execrows
-- ExecutionStepsDelete deletes every step record of a run whose execution
-- ended: the next one starts with a fresh history.
DELETE FROM flowlite.steps WHERE run_id = @run_id;

-- name: ExecutionSignalsRetire :execrows
-- ExecutionSignalsRetire prefixes the consumed_by of the signals an ended
-- execution received (or rejected) with @prefix ('execution N: '), so that
-- no wait of a later execution, whose keys start over, takes them for its
-- own (a reset's SignalRedeliver, a receive's SignalReject). A consumed_by
-- starts with a step name, a branch scope or 'rejected by ', never with
-- 'execution ', so signals retired before are left alone.
UPDATE flowlite.signals SET consumed_by = sqlc.arg(prefix)::text || consumed_by
WHERE run_id = sqlc.arg(run_id)::text AND consumed_by IS NOT NULL AND consumed_by NOT LIKE 'execution %';

-- name: CopyExecutionInsert :exec
-- CopyExecutionInsert writes one execution number for `flowlite copy`.
INSERT INTO flowlite.executions (run_id, execution, continued_at)
VALUES (@run_id, @execution, @continued_at);
