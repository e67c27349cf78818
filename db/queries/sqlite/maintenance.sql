-- name: RunDeleteFinished :execrows
-- RunDeleteFinished deletes up to @max_runs runs in state @status (completed,
-- failed or cancelled) that finished before @finished_before, oldest first.
-- Their steps, events and signals go with them (ON DELETE CASCADE); their
-- children, if any, lose their parent_id (ON DELETE SET NULL). A finished
-- child of an unfinished parent is kept: the parent may still read its
-- outcome. The outer WHERE repeats the state test, so the statement can
-- never delete an unfinished run whatever @status says; its unary + keeps
-- the planner from scanning runs_finished for it instead of looking the
-- selected IDs up by primary key.
DELETE FROM runs
WHERE +runs.status IN ('completed', 'failed', 'cancelled')
  AND runs.id IN (
    SELECT r.id FROM runs AS r
    WHERE r.status IN ('completed', 'failed', 'cancelled')
      AND r.status = @status
      AND r.finished_at < @finished_before
      AND (r.parent_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM runs AS p
        WHERE p.id = r.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
      ))
    ORDER BY r.finished_at
    LIMIT @max_runs
  );
