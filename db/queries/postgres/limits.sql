-- name: QueueLimitsGet :one
-- QueueLimitsGet returns the flow control of a queue (see queue_limits).
SELECT * FROM flowlite.queue_limits WHERE queue = sqlc.arg(queue)::text;

-- name: QueueLimitsLock :one
-- QueueLimitsLock is QueueLimitsGet inside a claim of a limited queue: it
-- locks the queue's row until the claim commits, so that the claimers of
-- one limited queue take turns, and each statement of the claim after it
-- sees every claim committed before (READ COMMITTED takes a snapshot per
-- statement). Claims of other queues are not held up. It counts the claim
-- in claim_seq (see RunClaimAndBeginLimited).
UPDATE flowlite.queue_limits SET claim_seq = claim_seq + 1
WHERE queue = sqlc.arg(queue)::text
RETURNING *;

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
-- order, that have runs of the queue ready at @now. The recursive CTE k is
-- a loose index scan of runs_ready_key that reads the first run of a
-- key's highest priority (one seek), then, while that run waits for a
-- later time, the first run of the key's next priority, and otherwise the
-- first run of the next key, bounded to @max_scan keys (n counts them). A
-- key is ready when one of the runs read is due. Runs waiting for a later
-- time are never read past the first of each priority of a key, and a
-- ready key costs one seek: a min() per key and an EXISTS per key, as
-- this was, let the planner read every entry of the index (an aggregate
-- for the min, a hash join of every ready run of the queue for the
-- EXISTS).
WITH RECURSIVE k(ckey, priority, run_at, n) AS (
    (SELECT r.concurrency_key, r.priority, r.run_at, 1::bigint FROM flowlite.runs AS r
     WHERE r.queue = sqlc.arg(queue)::text AND r.concurrency_key > sqlc.arg(after)::text
       AND r.concurrency_key <> ''
       AND r.lease_owner IS NULL AND r.status IN ('pending', 'waiting', 'compensating')
     ORDER BY r.concurrency_key, r.priority DESC, r.run_at LIMIT 1)
    UNION ALL
    SELECT nx.concurrency_key, nx.priority, nx.run_at,
           CASE WHEN nx.concurrency_key = k.ckey THEN k.n ELSE k.n + 1 END
    FROM k CROSS JOIN LATERAL (
        (SELECT r.concurrency_key, r.priority, r.run_at FROM flowlite.runs AS r
         WHERE k.run_at > sqlc.arg(now)::bigint
           AND r.queue = sqlc.arg(queue)::text AND r.concurrency_key = k.ckey AND r.concurrency_key <> ''
           AND r.lease_owner IS NULL AND r.status IN ('pending', 'waiting', 'compensating')
           AND r.priority < k.priority
         ORDER BY r.priority DESC, r.run_at LIMIT 1)
        UNION ALL
        (SELECT r.concurrency_key, r.priority, r.run_at FROM flowlite.runs AS r
         WHERE k.n < sqlc.arg(max_scan)::bigint
           AND r.queue = sqlc.arg(queue)::text AND r.concurrency_key > k.ckey AND r.concurrency_key <> ''
           AND r.lease_owner IS NULL AND r.status IN ('pending', 'waiting', 'compensating')
         ORDER BY r.concurrency_key, r.priority DESC, r.run_at LIMIT 1)
        LIMIT 1
    ) AS nx
)
SELECT k.ckey::text AS concurrency_key FROM k
WHERE k.run_at <= sqlc.arg(now)::bigint
LIMIT sqlc.arg(max_keys)::bigint;

-- name: RunClaimKey :many
-- RunClaimKey is RunClaim for the runs of one concurrency key of a queue
-- ('' for the runs without one), of every priority, highest first: along
-- runs_ready_key for a key (picked_key), runs_ready for the runs without
-- (picked_plain). Only one of the two reads runs, by @key. They are two
-- so that the literal concurrency_key <> '' of picked_key proves
-- runs_ready_key's predicate in the generic plan of the prepared
-- statement too, which otherwise goes along runs_ready and reads every
-- ready run of the queue ahead of the key's.
WITH picked_key AS MATERIALIZED (
    SELECT r.id FROM flowlite.runs AS r
    WHERE sqlc.arg(key)::text <> ''
      AND r.queue = sqlc.arg(queue)::text
      AND r.concurrency_key = sqlc.arg(key)::text AND r.concurrency_key <> ''
      AND r.lease_owner IS NULL
      AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= sqlc.arg(now)::bigint
      AND (r.workflow || ':' || r.version) = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(known)::text::jsonb)))
      AND r.created_at >= sqlc.arg(held_before)::bigint
      AND (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint = sqlc.arg(server_started)::bigint
      AND NOT EXISTS (SELECT 1 FROM flowlite.queues AS q WHERE q.name = sqlc.arg(queue)::text AND q.paused)
    ORDER BY r.priority DESC, r.run_at, r.seq
    LIMIT sqlc.arg(max_runs)::bigint
    FOR UPDATE OF r SKIP LOCKED
),
picked_plain AS MATERIALIZED (
    SELECT r.id FROM flowlite.runs AS r
    WHERE sqlc.arg(key)::text = ''
      AND r.queue = sqlc.arg(queue)::text
      AND r.concurrency_key = ''
      AND r.lease_owner IS NULL
      AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= sqlc.arg(now)::bigint
      AND (r.workflow || ':' || r.version) = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(known)::text::jsonb)))
      AND r.created_at >= sqlc.arg(held_before)::bigint
      AND (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint = sqlc.arg(server_started)::bigint
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
FROM (SELECT id FROM picked_key UNION ALL SELECT id FROM picked_plain) AS picked
WHERE u.id = picked.id
  AND u.lease_owner IS NULL
RETURNING u.*;

-- name: RunClaimAndBeginLimited :many
-- RunClaimAndBeginLimited is RunClaimAndBegin for a queue whose only limit
-- is a global Concurrency: it claims up to @max_runs runs, and never more
-- than the queue's concurrency minus its leased runs, in one statement.
-- Counting in one statement is sound only if no other claim of the queue
-- committed between the statement's snapshot and its lock of the queue's
-- row: every claim of a limited queue adds one to claim_seq under that
-- lock (this one in bump, a claim in Write in QueueLimitsLock), so the
-- statement claims only when the claim_seq it locked is the one its
-- snapshot read. Otherwise, or when the queue's limits are no longer a
-- global concurrency alone, it claims nothing, and the engine claims
-- again the careful way (QueueLimitsLock, counts, claim, in Write). Runs
-- released meanwhile only make the count too high, never too low.
WITH RECURSIVE lim AS (
    SELECT l.claim_seq FROM flowlite.queue_limits AS l WHERE l.queue = sqlc.arg(queue)::text
),
bump AS (
    UPDATE flowlite.queue_limits AS l SET claim_seq = l.claim_seq + 1
    WHERE l.queue = sqlc.arg(queue)::text
    RETURNING l.claim_seq - 1 AS before, l.concurrency, l.key_concurrency, l.rate, l.key_rate, l.fair, l.keys
),
budget AS (
    SELECT COALESCE((
        SELECT GREATEST(LEAST(sqlc.arg(max_runs)::bigint, b.concurrency - (
                   SELECT count(*) FROM flowlite.runs AS r
                   WHERE r.lease_owner IS NOT NULL AND r.queue = sqlc.arg(queue)::text)), 0)
        FROM bump AS b JOIN lim ON lim.claim_seq = b.before
        WHERE b.concurrency > 0 AND b.key_concurrency = 0 AND b.rate = 0 AND b.key_rate = 0
          AND NOT b.fair AND b.keys = '[]'
    ), 0)::bigint AS n
),
prios(priority) AS (
    (SELECT r.priority FROM flowlite.runs AS r
     WHERE r.queue = sqlc.arg(queue)::text AND r.lease_owner IS NULL
       AND r.status IN ('pending', 'waiting', 'compensating')
     ORDER BY r.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT r.priority FROM flowlite.runs AS r
            WHERE r.queue = sqlc.arg(queue)::text AND r.lease_owner IS NULL
              AND r.status IN ('pending', 'waiting', 'compensating')
              AND r.priority < prios.priority
            ORDER BY r.priority DESC LIMIT 1)
    FROM prios WHERE prios.priority IS NOT NULL
),
picked AS MATERIALIZED (
    SELECT l.id FROM prios CROSS JOIN LATERAL (
            SELECT r.id FROM flowlite.runs AS r
            WHERE r.queue = sqlc.arg(queue)::text
              AND r.priority = prios.priority
              AND r.lease_owner IS NULL
              AND r.status IN ('pending', 'waiting', 'compensating')
              AND r.run_at <= sqlc.arg(now)::bigint
              AND (r.workflow || ':' || r.version) = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(known)::text::jsonb)))
              AND r.created_at >= sqlc.arg(held_before)::bigint
              AND (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint = sqlc.arg(server_started)::bigint
            ORDER BY r.run_at, r.seq
            LIMIT (SELECT n FROM budget)
            FOR UPDATE OF r SKIP LOCKED
        ) AS l
    WHERE prios.priority IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM flowlite.queues AS q WHERE q.name = sqlc.arg(queue)::text AND q.paused)
    LIMIT (SELECT n FROM budget)
),
claimed AS (
    UPDATE flowlite.runs AS u
    SET lease_owner      = sqlc.arg(owner)::text,
        lease_expires_at = sqlc.arg(lease_expires_at)::bigint,
        fence            = u.fence + 1,
        status           = CASE u.status WHEN 'compensating' THEN u.status ELSE 'running' END,
        started_at       = COALESCE(u.started_at, sqlc.arg(now)::bigint),
        deadline         = CASE WHEN u.timeout IS NOT NULL AND u.started_at IS NULL
                                THEN LEAST(COALESCE(u.deadline, sqlc.arg(now)::bigint + u.timeout), sqlc.arg(now)::bigint + u.timeout)
                                ELSE u.deadline END,
        updated_at       = GREATEST(u.updated_at, sqlc.arg(now)::bigint)
    WHERE u.id = ANY (ARRAY(SELECT picked.id FROM picked))
      AND u.lease_owner IS NULL
    RETURNING u.*
),
begun AS (
    INSERT INTO flowlite.steps (run_id, name, occurrence, status, attempts, input, position, started_at)
    SELECT c.id, f.step, 0, 'running', 1, decode(f.input, 'hex'), 0, c.updated_at
    FROM claimed AS c
    JOIN jsonb_to_recordset(sqlc.arg(first_steps)::jsonb) AS f(workflow text, version bigint, step text, input text)
      ON f.workflow = c.workflow AND f.version = c.version
    WHERE c.fence = 1 AND c.status = 'running' AND NOT c.cancel_requested
      AND (c.deadline IS NULL OR c.deadline <= 0 OR c.deadline > sqlc.arg(now)::bigint)
    ORDER BY c.priority DESC, c.run_at, c.seq
    ON CONFLICT (run_id, name, occurrence) DO NOTHING
    RETURNING run_id, name
),
lean AS (
    -- the runs begun whose workflow keeps a lean record: their claim's two
    -- events are derived on read (the engine's derived.go)
    SELECT b.run_id AS id FROM begun AS b JOIN claimed AS c ON c.id = b.run_id
    JOIN jsonb_to_recordset(sqlc.arg(first_steps)::jsonb) AS f(workflow text, version bigint, lean boolean)
      ON f.workflow = c.workflow AND f.version = c.version
    WHERE f.lean
),
appended AS (
    INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
    SELECT e.run_id, e.at, e.kind, e.step, 0, e.attempt, e.detail
    FROM (
        SELECT c.id AS run_id, 'run_claimed' AS kind, '' AS step, 0 AS attempt,
               'fence ' || c.fence || ', ' || c.lease_owner AS detail, 0 AS part, c.priority, c.run_at, c.seq,
               c.updated_at AS at
        FROM claimed AS c
        WHERE c.id <> ALL (ARRAY(SELECT lean.id FROM lean))
        UNION ALL
        SELECT b.run_id, 'step_started', b.name, 1, '', 1, c.priority, c.run_at, c.seq, c.updated_at
        FROM begun AS b JOIN claimed AS c ON c.id = b.run_id
        WHERE c.id <> ALL (ARRAY(SELECT lean.id FROM lean))
    ) AS e
    WHERE pg_current_xact_id() IS NOT NULL -- as in EventAppend: the feed's holdback
    ORDER BY e.part, e.priority DESC, e.run_at, e.seq
)
SELECT c.id, c.seq, c.workflow, c.version, c.queue, c.priority, c.status, c.input, c.output,
       c.error, c.reason, c.cancel_requested, c.run_at, c.deadline, c.parent_id, c.wake_seq,
       c.fence, c.lease_owner, c.lease_expires_at, c.created_at, c.updated_at, c.finished_at,
       c.unique_key, c.unique_states, c.started_at, c.requeued_from, c.requeued_as,
       c.timeout, c.detached, c.context_values, c.concurrency_key,
       COALESCE(b.name, '')::text AS begun
FROM claimed AS c LEFT JOIN begun AS b ON b.run_id = c.id
ORDER BY c.priority DESC, c.run_at, c.seq;

-- name: RateLock :exec
-- RateLock takes the transaction-level advisory lock of a rate limiter's
-- bucket (a 64-bit hash of schema and bucket), so that the transactions
-- counting and logging its starts take turns: under READ COMMITTED each
-- one's count, read after the lock, sees every start the previous holder
-- committed.
SELECT pg_advisory_xact_lock(sqlc.arg(lock_key)::bigint);
