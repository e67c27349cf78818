-- name: EventAppend :exec
-- EventAppend appends to a run's history. The ID is the event's change-feed
-- position, so it must never be handed out twice: a plain rowid would come
-- back after the newest events were deleted, so the ID is one above both
-- the newest event and the highest ID ever deleted (feed.purged_through,
-- migration 00013). Both are one B-tree lookup.
INSERT INTO flowlite_events (id, run_id, at, kind, step, occurrence, attempt, detail)
VALUES (
  (SELECT max(coalesce((SELECT max(id) FROM flowlite_events), 0), f.purged_through) + 1
   FROM flowlite_feed AS f WHERE f.id = 1),
  @run_id, @at, @kind, @step, @occurrence, @attempt, @detail);

-- name: EventAppendMany :exec
-- EventAppendMany appends the events of @events, a JSON array of objects
-- (run_id, at, kind, step, occurrence, attempt, detail), in array order,
-- with one prepared statement. IDs are taken as in EventAppend: above both
-- the newest event and the highest ID ever deleted, in array order.
INSERT INTO flowlite_events (id, run_id, at, kind, step, occurrence, attempt, detail)
SELECT (SELECT max(coalesce((SELECT max(id) FROM flowlite_events), 0), f.purged_through)
        FROM flowlite_feed AS f WHERE f.id = 1) + j.key + 1,
       j.value ->> 'run_id', j.value ->> 'at', j.value ->> 'kind', j.value ->> 'step',
       j.value ->> 'occurrence', j.value ->> 'attempt', j.value ->> 'detail'
FROM jsonb_each(@events) AS j
ORDER BY j.key;

-- name: EventList :many
SELECT * FROM flowlite_events WHERE run_id = @run_id ORDER BY id;

-- name: EventListKind :many
-- EventListKind returns the events of one kind in the current execution of
-- a run's history (after its last continued_as_new), oldest first: the
-- progress readers want the step_progress events of the steps the run
-- holds. Reading from the last continue on keeps Inspect of a run that has
-- continued a thousand times as fast as of one that never did; only a run
-- in executions has such an event to look for.
SELECT e.* FROM flowlite_events AS e
WHERE e.run_id = @run_id AND e.kind = @kind
  AND e.id > CASE WHEN EXISTS (SELECT 1 FROM flowlite_executions AS x WHERE x.run_id = @run_id)
      THEN coalesce((SELECT c.id FROM flowlite_events AS c
                     WHERE c.run_id = @run_id AND c.kind = 'continued_as_new' ORDER BY c.id DESC LIMIT 1), 0)
      ELSE 0 END
ORDER BY e.id;

-- name: EventAppendLeased :execrows
-- EventAppendLeased appends to a run's history, as EventAppend does, only
-- while @owner holds the run's lease at @fence: a write batched across runs
-- (step progress) skips a run whose lease was lost, or which is gone,
-- instead of failing the others' with it. No row means it was skipped.
INSERT INTO flowlite_events (id, run_id, at, kind, step, occurrence, attempt, detail)
SELECT (SELECT max(coalesce((SELECT max(id) FROM flowlite_events), 0), f.purged_through) + 1
        FROM flowlite_feed AS f WHERE f.id = 1),
       r.id, @at, @kind, @step, @occurrence, @attempt, @detail
FROM flowlite_runs AS r
WHERE r.id = @run_id AND r.lease_owner = @owner AND r.fence = @fence;
