-- name: EventAppend :exec
INSERT INTO flowlite_events (run_id, at, kind, step, occurrence, attempt, detail)
VALUES (@run_id, @at, @kind, @step, @occurrence, @attempt, @detail);

-- name: EventList :many
SELECT * FROM flowlite_events WHERE run_id = @run_id ORDER BY id;
