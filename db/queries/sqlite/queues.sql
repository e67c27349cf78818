-- name: QueuePause :execrows
-- QueuePause pauses a queue; it changes no row when the queue is paused
-- already.
INSERT INTO flowlite_queues (name, paused, created_at, updated_at)
VALUES (@name, 1, @now, @now)
ON CONFLICT (name) DO UPDATE
SET paused = 1, updated_at = excluded.updated_at
WHERE flowlite_queues.paused = 0;

-- name: QueueResume :execrows
-- QueueResume resumes a paused queue; it changes no row when the queue is
-- not paused.
UPDATE flowlite_queues SET paused = 0, updated_at = @now
WHERE name = @name AND paused = 1;

-- name: QueueList :many
SELECT * FROM flowlite_queues ORDER BY name;

-- name: QueueCounts :many
-- QueueCounts counts the runs of every queue by state, in one pass over
-- runs: how many are ready to be claimed at @now and the due time of the
-- oldest of them (0: none), how many finished since @minute_ago and
-- @hour_ago, and how many are dead letters.
SELECT queue, status, count(*) AS runs,
       CAST(total(lease_owner IS NULL AND run_at <= @now
                  AND status IN ('pending', 'waiting', 'compensating')) AS INTEGER) AS ready,
       CAST(coalesce(min(CASE WHEN lease_owner IS NULL AND run_at <= @now
                                   AND status IN ('pending', 'waiting', 'compensating')
                              THEN run_at END), 0) AS INTEGER) AS oldest_ready_at,
       CAST(total(finished_at >= @minute_ago) AS INTEGER) AS finished_last_minute,
       CAST(total(finished_at >= @hour_ago) AS INTEGER) AS finished_last_hour,
       CAST(total(status = 'failed' AND requeued_as IS NULL) AS INTEGER) AS dead
FROM flowlite_runs
GROUP BY queue, status
ORDER BY queue, status;

-- name: QueueDurations :many
-- QueueDurations returns, in milliseconds from first claim to finish, the
-- durations of the up to @max_runs runs of a queue that completed most
-- recently, since @since. The IN test lets the planner use runs_finished,
-- which holds finished runs only, in the order they finished.
SELECT CAST(finished_at - started_at AS INTEGER) AS duration
FROM flowlite_runs
WHERE status IN ('completed', 'failed', 'cancelled') AND status = 'completed'
  AND finished_at >= @since AND queue = @queue AND started_at IS NOT NULL
ORDER BY finished_at DESC
LIMIT @max_runs;

-- name: RunGetKeyHolder :one
-- RunGetKeyHolder returns the run of a workflow holding a unique key for
-- good: the unfinished run with the key, or a finished one in a state its
-- unique_states holds. runs_unique serves it: the WHERE clause repeats the
-- index's.
SELECT * FROM flowlite_runs
WHERE workflow = @workflow AND unique_key = @unique_key AND requeued_as IS NULL
  AND (unique_states & (CASE status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) != 0;

-- name: UniqueHoldGet :one
-- UniqueHoldGet returns the run holding a unique key of a workflow at @now:
-- the hold is current and its holder in a state the hold counts.
SELECT h.run_id FROM flowlite_unique_holds AS h JOIN flowlite_runs AS r ON r.id = h.run_id
WHERE h.workflow = @workflow AND h.key = @key AND h.held_until > @now
  AND (h.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) != 0;

-- name: UniqueHoldDrop :exec
-- UniqueHoldDrop deletes the hold of a unique key of a workflow if it no
-- longer holds at @now: its time is up, or its holder finished in a state
-- the hold does not count (e.g. failed, when only completed runs keep the
-- key).
DELETE FROM flowlite_unique_holds
WHERE flowlite_unique_holds.workflow = @workflow AND flowlite_unique_holds.key = @key
  AND (flowlite_unique_holds.held_until <= @now OR NOT EXISTS (
    SELECT 1 FROM flowlite_runs AS r
    WHERE r.id = flowlite_unique_holds.run_id
      AND (flowlite_unique_holds.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) != 0
  ));

-- name: UniqueHoldTake :execrows
-- UniqueHoldTake makes @run_id hold a unique key from @now until
-- @held_until, while it is in one of @states (a bit mask, see runs_unique):
-- it creates the hold, or takes over one whose time is up. It changes
-- nothing (no row) while another run's hold is current. (The upsert's WHERE
-- reads @now through excluded.taken_at: sqlc leaves parameters in that
-- clause unbound.) A hold whose holder finished in a state it does not
-- count is dropped first (UniqueHoldDrop).
INSERT INTO flowlite_unique_holds (workflow, key, run_id, taken_at, held_until, states)
VALUES (@workflow, @key, @run_id, @now, @held_until, @states)
ON CONFLICT (workflow, key) DO UPDATE
SET run_id = excluded.run_id, taken_at = excluded.taken_at, held_until = excluded.held_until, states = excluded.states
WHERE flowlite_unique_holds.held_until <= excluded.taken_at;

-- name: UniqueHoldMove :exec
-- UniqueHoldMove hands the holds of a run over to another, the run that
-- requeues it.
UPDATE flowlite_unique_holds SET run_id = @to_run_id WHERE run_id = @from_run_id;

-- name: RunRequeueInsert :execrows
-- RunRequeueInsert inserts run @id as a fresh, pending copy of the dead
-- letter @from_id, which RunMarkRequeued linked to @id just before (so that
-- the dead letter no longer holds its unique key): same workflow version,
-- queue, priority, input, unique key and unique states, timeout,
-- detachment, context values and concurrency key, due at @now, with the deadline it had
-- moved by the time elapsed since it was created; a run with a timeout
-- gets no deadline (its first claim gives it the whole timeout again). It
-- inserts nothing when @from_id is not that dead letter, @id is taken, or
-- another run holds the unique key.
INSERT INTO flowlite_runs (id, workflow, version, queue, priority, status, input, run_at, deadline,
                  unique_key, unique_states, requeued_from, created_at, updated_at,
                  timeout, detached, context_values, concurrency_key)
SELECT @id, f.workflow, f.version, f.queue, f.priority, 'pending', f.input, @now,
       CASE WHEN f.deadline IS NULL OR f.timeout IS NOT NULL THEN NULL ELSE f.deadline - f.created_at + @now END,
       f.unique_key, f.unique_states, f.id, @now, @now,
       f.timeout, f.detached, f.context_values, f.concurrency_key
FROM flowlite_runs AS f
WHERE f.id = @from_id AND f.status = 'failed' AND f.requeued_as = @id
ON CONFLICT DO NOTHING;

-- name: RunMarkRequeued :execrows
-- RunMarkRequeued links a dead letter to the run that requeues it, which
-- takes it out of the dead letters.
UPDATE flowlite_runs SET requeued_as = @requeued_as, updated_at = @now
WHERE id = @id AND status = 'failed' AND requeued_as IS NULL;

-- name: RunUnmarkRequeued :exec
-- RunUnmarkRequeued undoes RunMarkRequeued when the requeue inserted
-- nothing.
UPDATE flowlite_runs SET requeued_as = NULL, updated_at = @updated_at
WHERE id = @id AND requeued_as = @requeued_as;

-- name: RunDeadList :many
-- RunDeadList lists dead letters (failed runs not requeued), the most
-- recently failed first, along runs_dead. Empty @workflow and @queue match
-- all.
SELECT * FROM flowlite_runs
WHERE status = 'failed' AND requeued_as IS NULL
  AND finished_at >= @finished_after AND finished_at < @finished_before
  AND (@workflow = '' OR workflow = @workflow)
  AND (@queue = '' OR queue = @queue)
ORDER BY finished_at DESC, rowid DESC
LIMIT @max_runs;

-- name: RunSeqMax :one
-- RunSeqMax returns the highest rowid of runs: bulk operations on dead
-- letters handle the rows up to it, not the runs inserted after they
-- started (such as the runs they requeue).
SELECT CAST(coalesce(max(rowid), 0) AS INTEGER) AS seq FROM flowlite_runs;

-- name: RunDeadBatch :many
-- RunDeadBatch returns the next up to @max_runs dead letters matching the
-- filter, in the order they failed (along runs_dead), after the cursor
-- (@after_finished, @after_seq) and with a rowid up to @until_seq.
-- @from_finished is the larger of @finished_after and @after_finished.
SELECT CAST(rowid AS INTEGER) AS seq, r.id, r.finished_at FROM flowlite_runs AS r
WHERE r.status = 'failed' AND r.requeued_as IS NULL
  AND r.finished_at >= @from_finished AND r.finished_at < @finished_before
  AND NOT (r.finished_at = @after_finished AND +rowid <= CAST(@after_seq AS INTEGER))
  AND +rowid <= CAST(@until_seq AS INTEGER)
  AND (@workflow = '' OR r.workflow = @workflow)
  AND (@queue = '' OR r.queue = @queue)
ORDER BY r.finished_at, rowid
LIMIT @max_runs;

-- name: RunDeadDelete :execrows
-- RunDeadDelete deletes up to @max_runs dead letters matching the filter
-- with a rowid up to @until_seq, oldest first, with their steps, events,
-- signals and holds. Like the cleaner, it keeps a failed child of an
-- unfinished parent, which may still read its outcome. The outer WHERE
-- repeats the dead-letter test (its unary + keeps the planner on the
-- primary key).
DELETE FROM flowlite_runs
WHERE +flowlite_runs.status = 'failed' AND flowlite_runs.requeued_as IS NULL
  AND flowlite_runs.id IN (
    SELECT r.id FROM flowlite_runs AS r
    WHERE r.status = 'failed' AND r.requeued_as IS NULL
      AND r.finished_at >= @finished_after AND r.finished_at < @finished_before
      AND +rowid <= CAST(@until_seq AS INTEGER)
      AND (@workflow = '' OR r.workflow = @workflow)
      AND (@queue = '' OR r.queue = @queue)
      AND (r.parent_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM flowlite_runs AS p
        WHERE p.id = r.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
      ))
    ORDER BY r.finished_at, rowid
    LIMIT @max_runs
  );

-- name: RunDeadDeleteByID :execrows
-- RunDeadDeleteByID deletes the run @id, with its steps, events, signals and
-- holds, if it is a dead letter and not the failed child of an unfinished
-- parent (which may still read its outcome).
DELETE FROM flowlite_runs
WHERE flowlite_runs.id = @id AND flowlite_runs.status = 'failed' AND flowlite_runs.requeued_as IS NULL
  AND (flowlite_runs.parent_id IS NULL OR NOT EXISTS (
    SELECT 1 FROM flowlite_runs AS p
    WHERE p.id = flowlite_runs.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
  ));

-- name: QueuePendingRuns :many
-- QueuePendingRuns counts the pending runs of every queue that has some,
-- with the creation time of the oldest, through the runs_status index.
SELECT queue, count(*) AS runs, CAST(min(created_at) AS INTEGER) AS oldest_created_at
FROM flowlite_runs
WHERE status = 'pending'
GROUP BY queue
ORDER BY queue;
