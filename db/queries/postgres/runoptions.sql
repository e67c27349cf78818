-- name: RunSetStartOptions :execrows
-- RunSetStartOptions records the start options of a run RunInsert or
-- RunInsertMany has just inserted in the same transaction: its timeout
-- (ms from its first claim; NULL: none), whether it is a detached child,
-- its propagated context values (NULL: none) and its concurrency key ('':
-- none). Only runs that have one pay for the statement; it changes nothing
-- once the run was claimed.
UPDATE flowlite.runs
SET timeout = sqlc.narg(timeout)::bigint, detached = sqlc.arg(detached)::boolean,
    context_values = sqlc.narg(context_values)::bytea,
    concurrency_key = sqlc.arg(concurrency_key)::text
WHERE id = sqlc.arg(id)::text AND started_at IS NULL;

-- name: RunDeleteForReuse :execrows
-- RunDeleteForReuse deletes the finished run @id, with its steps, events,
-- signals and holds (ON DELETE CASCADE), so that a new run can take its ID
-- (flow.ReuseFinished, flow.ReuseFailed): a failed or cancelled run, or,
-- with @completed_too, a completed one. As RunDeleteOne, it keeps the child
-- of an unfinished parent, which may still read its outcome, unless that
-- parent is @parent_id, the run starting the new child itself.
DELETE FROM flowlite.runs AS r
WHERE r.id = sqlc.arg(id)::text
  AND (r.status IN ('failed', 'cancelled') OR (sqlc.arg(completed_too)::boolean AND r.status = 'completed'))
  AND (r.parent_id IS NULL OR r.parent_id = sqlc.arg(parent_id)::text OR NOT EXISTS (
    SELECT 1 FROM flowlite.runs AS p
    WHERE p.id = r.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
  ));
