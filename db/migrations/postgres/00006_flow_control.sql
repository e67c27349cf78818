-- +goose Up

-- Flow control across engines (issue 21): see the SQLite migration
-- 00016_flow_control.sql for what each column means. On PostgreSQL a claim
-- of a limited queue locks the queue's row of queue_limits (FOR UPDATE)
-- before it counts, so that two claimers of one limited queue take turns:
-- under READ COMMITTED each statement after the lock sees every claim
-- committed before it. claim_seq counts those claims: every claim of a
-- limited queue adds one to it, which is how the one-statement claim of a
-- queue with a global limit only (RunClaimAndBeginLimited) knows that no
-- other claim committed between its snapshot and its lock.
ALTER TABLE flowlite.runs ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';

CREATE INDEX runs_ready_key ON flowlite.runs (queue, concurrency_key, priority DESC, run_at, seq)
    WHERE lease_owner IS NULL AND status IN ('pending', 'waiting', 'compensating') AND concurrency_key <> '';

CREATE TABLE flowlite.queue_limits (
    queue            TEXT    NOT NULL PRIMARY KEY,
    concurrency      BIGINT  NOT NULL DEFAULT 0,
    key_concurrency  BIGINT  NOT NULL DEFAULT 0,
    rate             BIGINT  NOT NULL DEFAULT 0,
    rate_period      BIGINT  NOT NULL DEFAULT 0,
    key_rate         BIGINT  NOT NULL DEFAULT 0,
    key_rate_period  BIGINT  NOT NULL DEFAULT 0,
    fair             BOOLEAN NOT NULL DEFAULT false,
    keys             TEXT    NOT NULL DEFAULT '[]',
    updated_at       BIGINT  NOT NULL,
    claim_seq        BIGINT  NOT NULL DEFAULT 0
);

CREATE TABLE flowlite.rate_starts (
    queue  TEXT   NOT NULL,
    concurrency_key TEXT NOT NULL,
    at     BIGINT NOT NULL,
    run_id TEXT   NOT NULL
);

CREATE INDEX rate_starts_at ON flowlite.rate_starts (queue, concurrency_key, at);

-- +goose Down
DROP TABLE flowlite.rate_starts;
DROP TABLE flowlite.queue_limits;
DROP INDEX flowlite.runs_ready_key;
ALTER TABLE flowlite.runs DROP COLUMN concurrency_key;
