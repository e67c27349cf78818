-- name: RunSetStartOptions :execrows
-- RunSetStartOptions records the start options of a run RunInsert or
-- RunInsertMany has just inserted in the same transaction: its timeout
-- (ms from its first claim; NULL: none), whether it is a detached child,
-- and its propagated context values (NULL: none). Only runs that have one
-- pay for the statement; it changes nothing once the run was claimed.
UPDATE flowlite.runs
SET timeout = sqlc.narg(timeout)::bigint, detached = sqlc.arg(detached)::boolean,
    context_values = sqlc.narg(context_values)::bytea
WHERE id = sqlc.arg(id)::text AND started_at IS NULL;
