-- name: EventAppend :exec
-- EventAppend appends to a run's history. The ID comes from the events
-- identity sequence: never reused, growing in insertion order, which under
-- concurrent transactions is not commit order.
INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
VALUES (@run_id, @at, @kind, @step, @occurrence, @attempt, @detail);

-- name: EventList :many
SELECT * FROM flowlite.events WHERE run_id = @run_id ORDER BY id;
