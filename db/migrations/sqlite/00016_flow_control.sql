-- +goose Up

-- Flow control across engines (issue 21): limits a queue's runs to a number
-- executing at once and a number started per period, in all, per
-- concurrency key, or both, and shares a queue's claims fairly between its
-- keys.
--
-- concurrency_key groups a run with the others of its queue that share the
-- key (a customer, a tenant) for per-key limits and fair claims; '' is the
-- group of runs without one. It is set at the start and never changes.
ALTER TABLE flowlite_runs ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';

-- runs_ready_key serves the claims of a queue with per-key limits or fair
-- claims: the keys with ready runs (a loose index scan, one seek per key)
-- and, for each key, its ready runs in priority order. Runs without a key
-- are not in it: a queue whose runs carry no key pays nothing for it, and
-- fair claims find those runs through runs_ready.
CREATE INDEX flowlite_runs_ready_key ON flowlite_runs (queue, concurrency_key, priority DESC, run_at)
    WHERE lease_owner IS NULL AND status IN ('pending', 'waiting', 'compensating') AND concurrency_key != '';

-- queue_limits holds the flow control of a queue, for every engine of the
-- database. A queue without a row has no limit. A claim of a limited queue
-- reads its row inside the claim's transaction, so a limit holds across
-- engines: runs executing are the runs leased (a lease is the slot, given
-- back on every exit path with the lease, a rescue included), and runs
-- started are counted in rate_starts.
--   concurrency      runs of the queue executing at once, in all (0: no limit)
--   key_concurrency  runs executing at once per key, for keys no entry of
--                    keys names (0: no limit)
--   rate, rate_period             runs first claimed per period (ms), in all
--   key_rate, key_rate_period     the same per key, for keys keys does not name
--   fair             1: claims take ready runs round-robin across keys
--   keys             per key prefix: a JSON array of {prefix, concurrency,
--                    rate, rate_period, weight}; the longest prefix wins
CREATE TABLE flowlite_queue_limits (
    queue            TEXT    NOT NULL PRIMARY KEY,
    concurrency      INTEGER NOT NULL DEFAULT 0,
    key_concurrency  INTEGER NOT NULL DEFAULT 0,
    rate             INTEGER NOT NULL DEFAULT 0,
    rate_period      INTEGER NOT NULL DEFAULT 0,
    key_rate         INTEGER NOT NULL DEFAULT 0,
    key_rate_period  INTEGER NOT NULL DEFAULT 0,
    fair             INTEGER NOT NULL DEFAULT 0,
    keys             TEXT    NOT NULL DEFAULT '[]',
    updated_at       INTEGER NOT NULL
) STRICT;

-- rate_starts logs the first claims of the runs of rate-limited queues,
-- one row per run (key '' counts toward the queue's own rate, a run's key
-- toward the key's), for as long as the longest period needs them: a claim
-- counts the rows inside the period, and deletes the older ones.
CREATE TABLE flowlite_rate_starts (
    queue  TEXT    NOT NULL,
    concurrency_key TEXT NOT NULL,
    at     INTEGER NOT NULL,
    run_id TEXT    NOT NULL
) STRICT;

CREATE INDEX flowlite_rate_starts_at ON flowlite_rate_starts (queue, concurrency_key, at);

-- +goose Down
DROP TABLE flowlite_rate_starts;
DROP TABLE flowlite_queue_limits;
DROP INDEX flowlite_runs_ready_key;
ALTER TABLE flowlite_runs DROP COLUMN concurrency_key;
