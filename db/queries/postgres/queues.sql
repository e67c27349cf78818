-- name: QueuePause :execrows
-- QueuePause pauses a queue; it changes no row when the queue is paused
-- already.
INSERT INTO flowlite.queues AS q (name, paused, created_at, updated_at)
VALUES (@name, true, @now, @now)
ON CONFLICT (name) DO UPDATE
SET paused = true, updated_at = excluded.updated_at
WHERE NOT q.paused;

-- name: QueueResume :execrows
-- QueueResume resumes a paused queue; it changes no row when the queue is
-- not paused.
UPDATE flowlite.queues SET paused = false, updated_at = @now
WHERE name = @name AND paused;

-- name: QueueList :many
SELECT * FROM flowlite.queues ORDER BY name;

-- name: QueueCounts :many
-- QueueCounts counts the runs of every queue by state, in one pass over
-- runs: how many are ready to be claimed at @now and the due time of the
-- oldest of them (0: none), how many finished since @minute_ago and
-- @hour_ago, and how many are dead letters.
SELECT queue, status, count(*) AS runs,
       count(*) FILTER (WHERE lease_owner IS NULL AND run_at <= sqlc.arg(now)::bigint
                        AND status IN ('pending', 'waiting', 'compensating')) AS ready,
       coalesce(min(run_at) FILTER (WHERE lease_owner IS NULL AND run_at <= sqlc.arg(now)::bigint
                                    AND status IN ('pending', 'waiting', 'compensating')), 0)::bigint AS oldest_ready_at,
       count(*) FILTER (WHERE finished_at >= sqlc.arg(minute_ago)::bigint) AS finished_last_minute,
       count(*) FILTER (WHERE finished_at >= sqlc.arg(hour_ago)::bigint) AS finished_last_hour,
       count(*) FILTER (WHERE status = 'failed' AND requeued_as IS NULL) AS dead
FROM flowlite.runs
GROUP BY queue, status
ORDER BY queue, status;

-- name: QueueDurations :many
-- QueueDurations returns, in milliseconds from first claim to finish, the
-- durations of the up to @max_runs runs of a queue that completed most
-- recently, since @since.
SELECT (finished_at - started_at)::bigint AS duration
FROM flowlite.runs
WHERE status IN ('completed', 'failed', 'cancelled') AND status = 'completed'
  AND finished_at >= sqlc.arg(since)::bigint AND queue = sqlc.arg(queue)::text AND started_at IS NOT NULL
ORDER BY finished_at DESC
LIMIT sqlc.arg(max_runs)::bigint;

-- name: RunGetKeyHolder :one
-- RunGetKeyHolder returns the run of a workflow holding a unique key for
-- good: the unfinished run with the key, or a finished one in a state its
-- unique_states holds. runs_unique serves it: the WHERE clause repeats the
-- index's.
SELECT * FROM flowlite.runs
WHERE workflow = @workflow AND unique_key = @unique_key AND requeued_as IS NULL
  AND (unique_states & (CASE status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) <> 0;

-- name: UniqueHoldGet :one
-- UniqueHoldGet returns the run holding a unique key of a workflow at @now:
-- the hold is current and its holder in a state the hold counts.
SELECT h.run_id FROM flowlite.unique_holds AS h JOIN flowlite.runs AS r ON r.id = h.run_id
WHERE h.workflow = @workflow AND h.key = @key AND h.held_until > @now
  AND (h.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) <> 0;

-- name: UniqueHoldDrop :exec
-- UniqueHoldDrop deletes the hold of a unique key of a workflow if it no
-- longer holds at @now: its time is up, or its holder finished in a state
-- the hold does not count (e.g. failed, when only completed runs keep the
-- key). The adapter holds the key's advisory lock (UniqueKeyLock), so the
-- holder read here cannot be replaced by a concurrent take-over.
DELETE FROM flowlite.unique_holds AS d
WHERE d.workflow = sqlc.arg(workflow)::text AND d.key = sqlc.arg(key)::text
  AND (d.held_until <= sqlc.arg(now)::bigint OR NOT EXISTS (
    SELECT 1 FROM flowlite.runs AS r
    WHERE r.id = d.run_id
      AND (d.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) <> 0
  ));

-- name: UniqueHoldTake :execrows
-- UniqueHoldTake makes @run_id hold a unique key from @now until
-- @held_until, while it is in one of @states (a bit mask, see runs_unique):
-- it creates the hold, or takes over one whose time is up. It changes
-- nothing (no row) while another run's hold is current. The primary key
-- settles a race: a concurrent take of the key waits for this one, then
-- re-checks the upsert's WHERE against the committed hold.
INSERT INTO flowlite.unique_holds AS h (workflow, key, run_id, taken_at, held_until, states)
VALUES (@workflow, @key, @run_id, @now, @held_until, @states)
ON CONFLICT (workflow, key) DO UPDATE
SET run_id = excluded.run_id, taken_at = excluded.taken_at, held_until = excluded.held_until, states = excluded.states
WHERE h.held_until <= excluded.taken_at;

-- name: UniqueHoldMove :exec
-- UniqueHoldMove hands the holds of a run over to another, the run that
-- requeues it.
UPDATE flowlite.unique_holds SET run_id = @to_run_id WHERE run_id = @from_run_id;

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
INSERT INTO flowlite.runs (id, workflow, version, queue, priority, status, input, run_at, deadline,
                  unique_key, unique_states, requeued_from, created_at, updated_at,
                  timeout, detached, context_values, concurrency_key)
SELECT sqlc.arg(id)::text, f.workflow, f.version, f.queue, f.priority, 'pending', f.input, sqlc.arg(now)::bigint,
       CASE WHEN f.deadline IS NULL OR f.timeout IS NOT NULL THEN NULL ELSE f.deadline - f.created_at + sqlc.arg(now)::bigint END,
       f.unique_key, f.unique_states, f.id, sqlc.arg(now)::bigint, sqlc.arg(now)::bigint,
       f.timeout, f.detached, f.context_values, f.concurrency_key
FROM flowlite.runs AS f
WHERE f.id = sqlc.arg(from_id)::text AND f.status = 'failed' AND f.requeued_as = sqlc.arg(id)::text
ON CONFLICT DO NOTHING;

-- name: RunMarkRequeued :execrows
-- RunMarkRequeued links a dead letter to the run that requeues it, which
-- takes it out of the dead letters. It locks the dead letter's row, so a
-- concurrent requeue of it waits and then finds it linked.
UPDATE flowlite.runs SET requeued_as = sqlc.arg(requeued_as)::text, updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND status = 'failed' AND requeued_as IS NULL;

-- name: RunUnmarkRequeued :exec
-- RunUnmarkRequeued undoes RunMarkRequeued when the requeue inserted
-- nothing.
UPDATE flowlite.runs SET requeued_as = NULL, updated_at = sqlc.arg(updated_at)::bigint
WHERE id = sqlc.arg(id)::text AND requeued_as = sqlc.arg(requeued_as)::text;

-- name: RunDeadList :many
-- RunDeadList lists dead letters (failed runs not requeued), the most
-- recently failed first, along runs_dead. Empty @workflow and @queue match
-- all.
SELECT * FROM flowlite.runs
WHERE status = 'failed' AND requeued_as IS NULL
  AND finished_at >= sqlc.arg(finished_after)::bigint AND finished_at < sqlc.arg(finished_before)::bigint
  AND (sqlc.arg(workflow)::text = '' OR workflow = sqlc.arg(workflow)::text)
  AND (sqlc.arg(queue)::text = '' OR queue = sqlc.arg(queue)::text)
ORDER BY finished_at DESC, seq DESC
LIMIT sqlc.arg(max_runs)::bigint;

-- name: RunSeqMax :one
-- RunSeqMax returns the highest seq of runs: bulk operations on dead
-- letters handle the rows up to it, not the runs inserted after they
-- started (such as the runs they requeue).
SELECT coalesce(max(seq), 0)::bigint AS seq FROM flowlite.runs;

-- name: RunDeadBatch :many
-- RunDeadBatch returns the next up to @max_runs dead letters matching the
-- filter, in the order they failed (along runs_dead), after the cursor
-- (@after_finished, @after_seq) and with a seq up to @until_seq.
-- @from_finished is the larger of @finished_after and @after_finished.
SELECT r.seq, r.id, r.finished_at FROM flowlite.runs AS r
WHERE r.status = 'failed' AND r.requeued_as IS NULL
  AND r.finished_at >= sqlc.arg(from_finished)::bigint AND r.finished_at < sqlc.arg(finished_before)::bigint
  AND NOT (r.finished_at = sqlc.arg(after_finished)::bigint AND r.seq <= sqlc.arg(after_seq)::bigint)
  AND r.seq <= sqlc.arg(until_seq)::bigint
  AND (sqlc.arg(workflow)::text = '' OR r.workflow = sqlc.arg(workflow)::text)
  AND (sqlc.arg(queue)::text = '' OR r.queue = sqlc.arg(queue)::text)
ORDER BY r.finished_at, r.seq
LIMIT sqlc.arg(max_runs)::bigint;

-- name: RunDeadDelete :execrows
-- RunDeadDelete deletes up to @max_runs dead letters matching the filter
-- with a seq up to @until_seq, oldest first, with their steps, events,
-- signals and holds. Like the cleaner, it keeps a failed child of an
-- unfinished parent, which may still read its outcome. The outer WHERE
-- repeats the dead-letter test, re-checked on a row a concurrent
-- transaction changed.
DELETE FROM flowlite.runs AS d
WHERE d.status = 'failed' AND d.requeued_as IS NULL
  AND d.id IN (
    SELECT r.id FROM flowlite.runs AS r
    WHERE r.status = 'failed' AND r.requeued_as IS NULL
      AND r.finished_at >= sqlc.arg(finished_after)::bigint AND r.finished_at < sqlc.arg(finished_before)::bigint
      AND r.seq <= sqlc.arg(until_seq)::bigint
      AND (sqlc.arg(workflow)::text = '' OR r.workflow = sqlc.arg(workflow)::text)
      AND (sqlc.arg(queue)::text = '' OR r.queue = sqlc.arg(queue)::text)
      AND (r.parent_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM flowlite.runs AS p
        WHERE p.id = r.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
      ))
    ORDER BY r.finished_at, r.seq
    LIMIT sqlc.arg(max_runs)::bigint
  );

-- name: RunDeadDeleteByID :execrows
-- RunDeadDeleteByID deletes the run @id, with its steps, events, signals and
-- holds, if it is a dead letter and not the failed child of an unfinished
-- parent (which may still read its outcome).
DELETE FROM flowlite.runs AS d
WHERE d.id = @id AND d.status = 'failed' AND d.requeued_as IS NULL
  AND (d.parent_id IS NULL OR NOT EXISTS (
    SELECT 1 FROM flowlite.runs AS p
    WHERE p.id = d.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
  ));

-- name: QueuePendingRuns :many
-- QueuePendingRuns counts the pending runs of every queue that has some,
-- with the creation time of the oldest, through the runs_status index.
SELECT queue, count(*) AS runs, min(created_at)::bigint AS oldest_created_at
FROM flowlite.runs
WHERE status = 'pending'
GROUP BY queue
ORDER BY queue;
