-- name: EventAppend :exec
-- EventAppend appends to a run's history. The ID comes from the events
-- identity sequence: never reused, growing in insertion order, which under
-- concurrent transactions is not commit order.
INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
VALUES (@run_id, @at, @kind, @step, @occurrence, @attempt, @detail);

-- name: EventAppendMany :exec
-- EventAppendMany appends the events of @events, a JSON array of objects
-- (run_id, at, kind, step, occurrence, attempt, detail), in array order:
-- their IDs grow in that order, as RunInsertMany's runs are inserted.
INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
SELECT j.v ->> 'run_id', (j.v ->> 'at')::bigint, j.v ->> 'kind', j.v ->> 'step',
       (j.v ->> 'occurrence')::bigint, (j.v ->> 'attempt')::bigint, j.v ->> 'detail'
FROM jsonb_array_elements(sqlc.arg(events)::jsonb) WITH ORDINALITY AS j(v, n)
ORDER BY j.n;

-- name: EventList :many
SELECT * FROM flowlite.events WHERE run_id = @run_id ORDER BY id;
