-- name: EventAppend :execrows
-- EventAppend appends to a run's history. The ID comes from the events
-- identity sequence: never reused, growing in insertion order, which under
-- concurrent transactions is not commit order. The WHERE clause gives the
-- transaction its ID before the row's ID is drawn from the sequence (a
-- scan's filter runs before its projection): the change feed's holdback
-- (pgstore/feed.go) relies on every transaction that drew an event ID
-- having a transaction ID already. It inserts nothing for a run that does
-- not exist, which the adapter reports (events have no foreign key: see
-- migration 00012).
INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
SELECT sqlc.arg(run_id)::text, sqlc.arg(at)::bigint, sqlc.arg(kind)::text, sqlc.arg(step)::text,
       sqlc.arg(occurrence)::bigint, sqlc.arg(attempt)::bigint, sqlc.arg(detail)::text
WHERE pg_current_xact_id() IS NOT NULL
  AND EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = sqlc.arg(run_id)::text);

-- name: EventAppendMany :execrows
-- EventAppendMany appends the events of @events, a JSON array of objects
-- (run_id, at, kind, step, occurrence, attempt, detail), in array order:
-- their IDs grow in that order, as RunInsertMany's runs are inserted. It
-- leaves out the events of runs that do not exist, which the adapter
-- reports, as EventAppend does.
INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
SELECT j.v ->> 'run_id', (j.v ->> 'at')::bigint, j.v ->> 'kind', j.v ->> 'step',
       (j.v ->> 'occurrence')::bigint, (j.v ->> 'attempt')::bigint, j.v ->> 'detail'
FROM jsonb_array_elements(sqlc.arg(events)::jsonb) WITH ORDINALITY AS j(v, n)
WHERE pg_current_xact_id() IS NOT NULL -- as in EventAppend: the feed's holdback
  AND EXISTS (SELECT 1 FROM flowlite.runs AS r WHERE r.id = j.v ->> 'run_id')
ORDER BY j.n;

-- name: EventList :many
SELECT * FROM flowlite.events WHERE run_id = @run_id ORDER BY id;
