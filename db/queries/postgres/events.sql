-- name: EventAppend :execrows
-- EventAppend appends to a run's history. The ID comes from the events
-- identity sequence: never reused, growing in insertion order, which under
-- concurrent transactions is not commit order. The WHERE clause gives the
-- transaction its ID before the row's ID is drawn from the sequence (a
-- scan's filter runs before its projection): the change feed's holdback
-- (pgstore/feed.go) relies on every transaction that drew an event ID
-- having a transaction ID already. It inserts nothing for a run that does
-- not exist, which the adapter reports (events have no foreign key: see
-- migration 00010).
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

-- name: EventListKind :many
-- EventListKind returns the events of one kind in the current execution of
-- a run's history (after its last continued_as_new), oldest first: see the
-- SQLite query.
SELECT e.* FROM flowlite.events AS e
WHERE e.run_id = sqlc.arg(run_id)::text AND e.kind = sqlc.arg(kind)::text
  AND e.id > CASE WHEN EXISTS (SELECT 1 FROM flowlite.executions AS x WHERE x.run_id = sqlc.arg(run_id)::text)
      THEN coalesce((SELECT c.id FROM flowlite.events AS c
                     WHERE c.run_id = sqlc.arg(run_id)::text AND c.kind = 'continued_as_new' ORDER BY c.id DESC LIMIT 1), 0)
      ELSE 0 END
ORDER BY e.id;

-- name: EventAppendLeased :execrows
-- EventAppendLeased appends to a run's history, as EventAppend does, only
-- while @owner holds the run's lease at @fence: a write batched across runs
-- (step progress) skips a run whose lease was lost, or which is gone,
-- instead of failing the others' with it. No row means it was skipped.
-- It takes no lock on the run's row (it only reads it, and events have no
-- foreign key to lock it with: migration 00010), so a batch over many runs
-- cannot deadlock with their own writes; a takeover that commits between
-- the check and the commit leaves one progress sample of the attempt the
-- old lease ran, which is still true of that attempt. The WHERE clause
-- gives the transaction its ID first, as in EventAppend.
INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
SELECT r.id, sqlc.arg(at)::bigint, sqlc.arg(kind)::text, sqlc.arg(step)::text,
       sqlc.arg(occurrence)::bigint, sqlc.arg(attempt)::bigint, sqlc.arg(detail)::text
FROM flowlite.runs AS r
WHERE r.id = sqlc.arg(run_id)::text AND r.lease_owner = sqlc.arg(owner)::text
  AND r.fence = sqlc.arg(fence)::bigint AND pg_current_xact_id() IS NOT NULL;
