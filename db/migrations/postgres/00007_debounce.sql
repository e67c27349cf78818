-- +goose Up

-- Debounce and throttle of starts (issue 21, item 5): see the SQLite
-- migration 00017_debounce.sql for what each column means. On PostgreSQL
-- the transactions debouncing one key take turns on a transaction-level
-- advisory lock of (workflow, key) (DebounceLock) before they read the
-- key's row, and the pending run's row is locked (FOR NO KEY UPDATE, which
-- a claim's FOR UPDATE SKIP LOCKED skips) before it is replaced, so a claim
-- and a replacement never both win.
CREATE TABLE flowlite.debounces (
    workflow  TEXT   NOT NULL,
    key       TEXT   NOT NULL,
    run_id    TEXT   NOT NULL REFERENCES flowlite.runs (id) ON DELETE CASCADE,
    first_at  BIGINT NOT NULL,
    max_delay BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, key)
);

-- debounces_run serves the cascade of a run's deletion.
CREATE INDEX debounces_run ON flowlite.debounces (run_id);

-- +goose Down
DROP INDEX flowlite.debounces_run;
DROP TABLE flowlite.debounces;
