-- Debounce and throttle of starts (internal/store/debounce.go). The
-- transactions debouncing one key take turns on DebounceLock, taken before
-- DebounceGet: under READ COMMITTED each statement after the lock sees what
-- the previous holder committed, as under SQLite's write lock.

-- name: DebounceLock :exec
-- DebounceLock serializes the transactions that debounce a key of a
-- workflow, until they commit: the advisory lock of a 64-bit hash of the
-- schema, workflow and key (@lock_key, computed by the adapter); a
-- collision of two keys only makes them wait for each other.
SELECT pg_advisory_xact_lock(sqlc.arg(lock_key)::bigint);

-- name: DebounceGet :one
-- DebounceGet returns the run a debounce key of a workflow last debounced
-- into, when its first debounced start was, and its maximum delay.
SELECT run_id, first_at, max_delay FROM flowlite.debounces
WHERE workflow = sqlc.arg(workflow)::text AND key = sqlc.arg(key)::text;

-- name: DebouncePut :exec
-- DebouncePut makes run_id the key's debounced run, first debounced at
-- first_at; the primary key settles two inserts of one key (the adapter
-- holds DebounceLock, so there are none).
INSERT INTO flowlite.debounces (workflow, key, run_id, first_at, max_delay)
VALUES (sqlc.arg(workflow)::text, sqlc.arg(key)::text, sqlc.arg(run_id)::text,
        sqlc.arg(first_at)::bigint, sqlc.arg(max_delay)::bigint)
ON CONFLICT (workflow, key) DO UPDATE SET
    run_id = excluded.run_id, first_at = excluded.first_at, max_delay = excluded.max_delay;

-- name: RunDebounceReplace :execrows
-- RunDebounceReplace gives the debounced run id a new input and due time,
-- while it is pending and was never claimed (fence 0) nor asked to cancel:
-- a compare-and-set. A claim that locked the row first commits before it,
-- and the update, re-checking its WHERE on the row it committed, changes
-- nothing (0 rows).
UPDATE flowlite.runs SET input = sqlc.arg(input)::bytea, run_at = sqlc.arg(run_at)::bigint, updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND status = 'pending' AND lease_owner IS NULL AND fence = 0 AND NOT cancel_requested;
