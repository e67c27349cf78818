-- name: QueueLimitsGet :one
-- QueueLimitsGet returns the flow control of a queue (see queue_limits).
SELECT * FROM flowlite.queue_limits WHERE queue = sqlc.arg(queue)::text;

-- name: QueueLimitsLock :one
-- QueueLimitsLock is QueueLimitsGet inside a claim of a limited queue: it
-- locks the queue's row until the claim commits, so that the claimers of
-- one limited queue take turns, and each statement of the claim after it
-- sees every claim committed before (READ COMMITTED takes a snapshot per
-- statement). Claims of other queues are not held up.
SELECT * FROM flowlite.queue_limits WHERE queue = sqlc.arg(queue)::text FOR UPDATE;

-- name: QueueLimitsList :many
SELECT * FROM flowlite.queue_limits ORDER BY queue;

-- name: QueueLimitsSet :exec
INSERT INTO flowlite.queue_limits (queue, concurrency, key_concurrency, rate, rate_period,
                                   key_rate, key_rate_period, fair, keys, updated_at)
VALUES (sqlc.arg(queue)::text, sqlc.arg(concurrency)::bigint, sqlc.arg(key_concurrency)::bigint,
        sqlc.arg(rate)::bigint, sqlc.arg(rate_period)::bigint, sqlc.arg(key_rate)::bigint,
        sqlc.arg(key_rate_period)::bigint, sqlc.arg(fair)::boolean, sqlc.arg(keys)::text,
        sqlc.arg(updated_at)::bigint)
ON CONFLICT (queue) DO UPDATE
SET concurrency = excluded.concurrency, key_concurrency = excluded.key_concurrency,
    rate = excluded.rate, rate_period = excluded.rate_period,
    key_rate = excluded.key_rate, key_rate_period = excluded.key_rate_period,
    fair = excluded.fair, keys = excluded.keys, updated_at = excluded.updated_at;

-- name: QueueLimitsDelete :execrows
DELETE FROM flowlite.queue_limits WHERE queue = sqlc.arg(queue)::text;

-- name: RunLeasedCounts :many
-- RunLeasedCounts counts the runs of a queue executing now (leased), by
-- concurrency key, through runs_leased: the leased runs of every queue,
-- which are as many as the engines' slots, not the backlog.
SELECT concurrency_key, count(*) AS runs FROM flowlite.runs
WHERE lease_owner IS NOT NULL AND queue = sqlc.arg(queue)::text
GROUP BY concurrency_key;

-- name: RateStartsCount :one
-- RateStartsCount counts the starts of a queue's runs with concurrency key
-- @key ('' for the queue's own rate) after @since, and returns the time of
-- the oldest of them (0: none), when the next start frees up.
SELECT count(*) AS starts, coalesce(min(at), 0)::bigint AS oldest
FROM flowlite.rate_starts
WHERE queue = sqlc.arg(queue)::text AND concurrency_key = sqlc.arg(key)::text AND at > sqlc.arg(since)::bigint;

-- name: RateStartAdd :exec
INSERT INTO flowlite.rate_starts (queue, concurrency_key, at, run_id)
VALUES (sqlc.arg(queue)::text, sqlc.arg(key)::text, sqlc.arg(at)::bigint, sqlc.arg(run_id)::text);

-- name: RateStartsPrune :exec
-- RateStartsPrune deletes a queue's starts at or before @until, which no
-- period counts any longer.
DELETE FROM flowlite.rate_starts WHERE queue = sqlc.arg(queue)::text AND at <= sqlc.arg(until)::bigint;

-- name: RunReadyKeys :many
-- RunReadyKeys returns up to @max_keys concurrency keys after @after, in
-- order, that have runs of the queue ready at @now: a loose index scan of
-- runs_ready_key, one seek per key, bounded to @max_scan keys.
WITH RECURSIVE k(ckey, n) AS (
    SELECT (SELECT min(r.concurrency_key) FROM flowlite.runs AS r
            WHERE r.queue = sqlc.arg(queue)::text AND r.concurrency_key > sqlc.arg(after)::text
              AND r.concurrency_key <> ''
              AND r.lease_owner IS NULL AND r.status IN ('pending', 'waiting', 'compensating')), 1
    UNION ALL
    SELECT (SELECT min(r.concurrency_key) FROM flowlite.runs AS r
            WHERE r.queue = sqlc.arg(queue)::text AND r.concurrency_key > k.ckey AND r.concurrency_key <> ''
              AND r.lease_owner IS NULL AND r.status IN ('pending', 'waiting', 'compensating')), k.n + 1
    FROM k WHERE k.ckey IS NOT NULL AND k.n < sqlc.arg(max_scan)::bigint
)
SELECT k.ckey::text AS concurrency_key FROM k
WHERE k.ckey IS NOT NULL AND EXISTS (
    SELECT 1 FROM flowlite.runs AS r
    WHERE r.queue = sqlc.arg(queue)::text AND r.concurrency_key = k.ckey AND r.concurrency_key <> ''
      AND r.lease_owner IS NULL AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= sqlc.arg(now)::bigint)
LIMIT sqlc.arg(max_keys)::bigint;

-- name: RunClaimKey :many
-- RunClaimKey is RunClaim for the runs of one concurrency key of a queue
-- ('' for the runs without one), of every priority, highest first: along
-- runs_ready_key for a key, runs_ready for the runs without.
WITH picked AS MATERIALIZED (
    SELECT r.id FROM flowlite.runs AS r
    WHERE r.queue = sqlc.arg(queue)::text
      AND r.concurrency_key = sqlc.arg(key)::text
      AND r.lease_owner IS NULL
      AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= sqlc.arg(now)::bigint
      AND (r.workflow || ':' || r.version) = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(known)::text::jsonb)))
      AND NOT EXISTS (SELECT 1 FROM flowlite.queues AS q WHERE q.name = sqlc.arg(queue)::text AND q.paused)
    ORDER BY r.priority DESC, r.run_at, r.seq
    LIMIT sqlc.arg(max_runs)::bigint
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE flowlite.runs AS u
SET lease_owner      = sqlc.arg(owner)::text,
    lease_expires_at = sqlc.arg(lease_expires_at)::bigint,
    fence            = u.fence + 1,
    status           = CASE u.status WHEN 'compensating' THEN u.status ELSE 'running' END,
    started_at       = COALESCE(u.started_at, sqlc.arg(now)::bigint),
    deadline         = CASE WHEN u.timeout IS NOT NULL AND u.started_at IS NULL
                            THEN LEAST(COALESCE(u.deadline, sqlc.arg(now)::bigint + u.timeout), sqlc.arg(now)::bigint + u.timeout)
                            ELSE u.deadline END,
    updated_at       = sqlc.arg(now)::bigint
FROM picked
WHERE u.id = picked.id
  AND u.lease_owner IS NULL
RETURNING u.*;
