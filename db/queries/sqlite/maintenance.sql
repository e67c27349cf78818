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
DELETE FROM flowlite_runs
WHERE +flowlite_runs.status IN ('completed', 'failed', 'cancelled')
  AND flowlite_runs.id IN (
    SELECT r.id FROM flowlite_runs AS r
    WHERE r.status IN ('completed', 'failed', 'cancelled')
      AND r.status = @status
      AND r.finished_at < @finished_before
      AND NOT EXISTS (
        SELECT 1 FROM flowlite_events AS e WHERE e.run_id = r.id AND e.id > @keep_after
      )
      AND (r.parent_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM flowlite_runs AS p
        WHERE p.id = r.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
      ))
    ORDER BY r.finished_at
    LIMIT @max_runs
  );

-- name: PayloadInvalidList :many
-- PayloadInvalidList names up to @max_rows stored values that are not JSON
-- text, which flowlite always writes: run, step and schedule inputs, run and
-- step outputs, signal payloads. A damaged value that still parses (a
-- flipped digit) goes unnoticed: SQLite keeps no checksum of a value.
SELECT CAST('run ' || id AS TEXT) AS place, CAST('input' AS TEXT) AS field
FROM flowlite_runs WHERE NOT json_valid(CAST(input AS TEXT))
UNION ALL
SELECT CAST('run ' || id AS TEXT), CAST('output' AS TEXT)
FROM flowlite_runs WHERE output IS NOT NULL AND NOT json_valid(CAST(output AS TEXT))
UNION ALL
SELECT CAST('run ' || run_id || ' step ' || name || '#' || occurrence AS TEXT), CAST('input' AS TEXT)
FROM flowlite_steps WHERE NOT json_valid(CAST(input AS TEXT))
UNION ALL
SELECT CAST('run ' || run_id || ' step ' || name || '#' || occurrence AS TEXT), CAST('output' AS TEXT)
FROM flowlite_steps WHERE output IS NOT NULL AND NOT json_valid(CAST(output AS TEXT))
UNION ALL
SELECT CAST('run ' || run_id || ' signal ' || name || ' (id ' || id || ')' AS TEXT), CAST('payload' AS TEXT)
FROM flowlite_signals WHERE NOT json_valid(CAST(payload AS TEXT))
UNION ALL
SELECT CAST('schedule ' || name AS TEXT), CAST('input' AS TEXT)
FROM flowlite_schedules WHERE NOT json_valid(CAST(input AS TEXT))
LIMIT @max_rows;
