-- name: RunSetStartOptions :execrows
-- RunSetStartOptions records the start options of a run RunInsert or
-- RunInsertMany has just inserted in the same transaction: its timeout
-- (ms from its first claim; NULL: none), whether it is a detached child,
-- its propagated context values (NULL: none) and its concurrency key ('':
-- none). Only runs that have one pay for the statement; it changes nothing
-- once the run was claimed.
UPDATE flowlite_runs
SET timeout = @timeout, detached = @detached, context_values = @context_values,
    concurrency_key = @concurrency_key
WHERE id = @id AND started_at IS NULL;

-- name: RunDeleteForReuse :execrows
-- RunDeleteForReuse deletes the finished run @id, with its steps, events,
-- signals and holds (ON DELETE CASCADE), so that a new run can take its ID
-- (flow.ReuseFinished, flow.ReuseFailed): a failed or cancelled run, or,
-- with @completed_too, a completed one. As RunDeleteOne, it keeps the child
-- of an unfinished parent, which may still read its outcome, unless that
-- parent is @parent_id, the run starting the new child itself.
DELETE FROM flowlite_runs
WHERE flowlite_runs.id = @id
  AND (flowlite_runs.status IN ('failed', 'cancelled') OR (@completed_too = 1 AND flowlite_runs.status = 'completed'))
  AND (flowlite_runs.parent_id IS NULL OR flowlite_runs.parent_id = @parent_id OR NOT EXISTS (
    SELECT 1 FROM flowlite_runs AS p
    WHERE p.id = flowlite_runs.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
  ));
