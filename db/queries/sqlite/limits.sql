-- name: QueueLimitsGet :one
-- QueueLimitsGet returns the flow control of a queue (see queue_limits).
-- Inside a write transaction it is the claim's view of the limits: on
-- SQLite, whose writers take turns, nothing else changes them or claims
-- until the transaction ends.
SELECT * FROM flowlite_queue_limits WHERE queue = @queue;

-- name: QueueLimitsList :many
SELECT * FROM flowlite_queue_limits ORDER BY queue;

-- name: QueueLimitsSet :exec
INSERT INTO flowlite_queue_limits (queue, concurrency, key_concurrency, rate, rate_period,
                                   key_rate, key_rate_period, fair, keys, updated_at)
VALUES (@queue, @concurrency, @key_concurrency, @rate, @rate_period,
        @key_rate, @key_rate_period, @fair, @keys, @updated_at)
ON CONFLICT (queue) DO UPDATE
SET concurrency = excluded.concurrency, key_concurrency = excluded.key_concurrency,
    rate = excluded.rate, rate_period = excluded.rate_period,
    key_rate = excluded.key_rate, key_rate_period = excluded.key_rate_period,
    fair = excluded.fair, keys = excluded.keys, updated_at = excluded.updated_at;

-- name: QueueLimitsDelete :execrows
DELETE FROM flowlite_queue_limits WHERE queue = @queue;

-- name: RunLeasedCounts :many
-- RunLeasedCounts counts the runs of a queue executing now (leased), by
-- concurrency key, through runs_leased: the leased runs of every queue,
-- which are as many as the engines' slots, not the backlog.
SELECT concurrency_key, count(*) AS runs FROM flowlite_runs
WHERE lease_owner IS NOT NULL AND queue = @queue
GROUP BY concurrency_key;

-- name: RateStartsCount :one
-- RateStartsCount counts the starts of a queue's runs with concurrency key
-- @key ('' for the queue's own rate) after @since, and returns the time of
-- the oldest of them (0: none), when the next start frees up.
SELECT count(*) AS starts, CAST(coalesce(min(at), 0) AS INTEGER) AS oldest
FROM flowlite_rate_starts
WHERE queue = @queue AND concurrency_key = @key AND at > @since;

-- name: RateStartAdd :exec
INSERT INTO flowlite_rate_starts (queue, concurrency_key, at, run_id) VALUES (@queue, @key, @at, @run_id);

-- name: RateStartsPrune :exec
-- RateStartsPrune deletes a queue's starts at or before @until, which no
-- period counts any longer.
DELETE FROM flowlite_rate_starts WHERE queue = @queue AND at <= @until;

-- name: RunReadyKeys :many
-- RunReadyKeys returns up to @max_keys concurrency keys after @after, in
-- order, that have runs of the queue ready at @now. The recursive CTE k is
-- a loose index scan of runs_ready_key that reads the first run of a
-- key's highest priority (one seek), then, while that run waits for a
-- later time, the first run of the key's next priority, and otherwise the
-- first run of the next key, bounded to @max_scan keys. A key is ready
-- when one of the runs read is due. Runs waiting for a later time are
-- never read past the first of each priority of a key (an EXISTS per key,
-- as this was, read every run of the key's highest priority while they
-- all waited). Each row of k is the rowid of the run read, negated when
-- it is the first of a new key, and m, the keys looked at before it.
-- CROSS JOIN keeps SQLite from reading x before c, the run it starts
-- from, which once analyzed it does, along every entry of the queue.
WITH RECURSIVE k(code, m) AS (
    SELECT -(SELECT r.rowid FROM flowlite_runs AS r
             WHERE r.queue = @queue AND r.concurrency_key > @after AND r.concurrency_key != ''
               AND r.lease_owner IS NULL AND r.status IN ('pending', 'waiting', 'compensating')
             ORDER BY r.concurrency_key, r.priority DESC, r.run_at LIMIT 1), 0
    UNION ALL
    SELECT COALESCE(
        (SELECT x.rowid FROM flowlite_runs AS c CROSS JOIN flowlite_runs AS x
         WHERE c.rowid = abs(k.code) AND c.run_at > @now
           AND x.queue = @queue AND x.concurrency_key = c.concurrency_key AND x.concurrency_key != ''
           AND x.lease_owner IS NULL AND x.status IN ('pending', 'waiting', 'compensating')
           AND x.priority < c.priority
         ORDER BY x.priority DESC, x.run_at LIMIT 1),
        -(SELECT x.rowid FROM flowlite_runs AS c CROSS JOIN flowlite_runs AS x
          WHERE c.rowid = abs(k.code) AND k.m + (k.code < 0) < CAST(@max_scan AS INTEGER)
            AND x.queue = @queue AND x.concurrency_key > c.concurrency_key AND x.concurrency_key != ''
            AND x.lease_owner IS NULL AND x.status IN ('pending', 'waiting', 'compensating')
          ORDER BY x.concurrency_key, x.priority DESC, x.run_at LIMIT 1)),
        k.m + (k.code < 0)
    FROM k WHERE k.code IS NOT NULL
)
SELECT CAST(r.concurrency_key AS TEXT) AS concurrency_key
FROM k JOIN flowlite_runs AS r ON r.rowid = abs(k.code)
WHERE r.run_at <= @now
LIMIT CAST(@max_keys AS INTEGER);

-- name: RunClaimKey :many
-- RunClaimKey is RunClaim for the runs of one concurrency key of a queue,
-- of every priority, highest first, along runs_ready_key.
UPDATE flowlite_runs
SET lease_owner      = @owner,
    lease_expires_at = @lease_expires_at,
    fence            = fence + 1,
    status           = CASE status WHEN 'compensating' THEN status ELSE 'running' END,
    started_at       = COALESCE(started_at, @now),
    deadline         = CASE WHEN timeout IS NOT NULL AND started_at IS NULL
                            THEN MIN(COALESCE(deadline, @now + timeout), @now + timeout)
                            ELSE deadline END,
    updated_at       = @now
WHERE lease_owner IS NULL
  AND +status IN ('pending', 'waiting', 'compensating')
  AND id IN (
    SELECT r.id FROM flowlite_runs AS r
    WHERE r.queue = @queue
      AND r.concurrency_key = @key AND r.concurrency_key != ''
      AND r.lease_owner IS NULL
      AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= @now
      AND (r.workflow || ':' || r.version) IN (SELECT value FROM json_each(@known))
      AND NOT EXISTS (SELECT 1 FROM flowlite_queues AS q WHERE q.name = @queue AND q.paused = 1)
    ORDER BY r.priority DESC, r.run_at, rowid
    LIMIT CAST(@max_runs AS INTEGER)
  )
RETURNING *;

-- name: RunClaimUnkeyed :many
-- RunClaimUnkeyed is RunClaim for the runs of a queue without a
-- concurrency key, of every priority, highest first, along runs_ready.
UPDATE flowlite_runs
SET lease_owner      = @owner,
    lease_expires_at = @lease_expires_at,
    fence            = fence + 1,
    status           = CASE status WHEN 'compensating' THEN status ELSE 'running' END,
    started_at       = COALESCE(started_at, @now),
    deadline         = CASE WHEN timeout IS NOT NULL AND started_at IS NULL
                            THEN MIN(COALESCE(deadline, @now + timeout), @now + timeout)
                            ELSE deadline END,
    updated_at       = @now
WHERE lease_owner IS NULL
  AND +status IN ('pending', 'waiting', 'compensating')
  AND id IN (
    SELECT r.id FROM flowlite_runs AS r
    WHERE r.queue = @queue
      AND r.concurrency_key = ''
      AND r.lease_owner IS NULL
      AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= @now
      AND (r.workflow || ':' || r.version) IN (SELECT value FROM json_each(@known))
      AND NOT EXISTS (SELECT 1 FROM flowlite_queues AS q WHERE q.name = @queue AND q.paused = 1)
    ORDER BY r.priority DESC, r.run_at, rowid
    LIMIT CAST(@max_runs AS INTEGER)
  )
RETURNING *;
