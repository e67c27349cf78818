-- name: EventAppend :exec
INSERT INTO flowlite_events (run_id, at, kind, step, occurrence, attempt, detail)
VALUES (@run_id, @at, @kind, @step, @occurrence, @attempt, @detail);

-- name: EventAppendMany :exec
-- EventAppendMany appends the events of @events, a JSON array of objects
-- (run_id, at, kind, step, occurrence, attempt, detail), in array order,
-- with one prepared statement.
INSERT INTO flowlite_events (run_id, at, kind, step, occurrence, attempt, detail)
SELECT j.value ->> 'run_id', j.value ->> 'at', j.value ->> 'kind', j.value ->> 'step',
       j.value ->> 'occurrence', j.value ->> 'attempt', j.value ->> 'detail'
FROM jsonb_each(@events) AS j
ORDER BY j.key;

-- name: EventList :many
SELECT * FROM flowlite_events WHERE run_id = @run_id ORDER BY id;
