-- name: RunSetStartOptions :execrows
-- RunSetStartOptions records the start options of a run RunInsert or
-- RunInsertMany has just inserted in the same transaction: its timeout
-- (ms from its first claim; NULL: none), whether it is a detached child,
-- and its propagated context values (NULL: none). Only runs that have one
-- pay for the statement; it changes nothing once the run was claimed.
UPDATE flowlite_runs
SET timeout = @timeout, detached = @detached, context_values = @context_values
WHERE id = @id AND started_at IS NULL;
