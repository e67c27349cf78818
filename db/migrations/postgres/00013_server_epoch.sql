-- +goose Up

-- The server the engines of this schema talk to, as they last saw it
-- (internal/store/pgstore/server.go). A standby promoted after an
-- asynchronous primary died lacks the primary's last commits, claims
-- among them: there, a run that an engine is still executing, leased on
-- the old primary, can look unleased, and another engine would run it at
-- the same time. So the first engine to see a new server (its postmaster
-- started at another moment) records when, and until a lease's length has
-- passed since then, no engine claims or rescues a run created before it:
-- by then the execution that held such a run has heard from the new
-- server that its lease is gone, as any engine whose lease expired. Runs
-- created on the new server are claimed at once.
CREATE TABLE flowlite.server_epoch (
    id             integer PRIMARY KEY CHECK (id = 1),
    -- server_started is the server's pg_postmaster_start_time(), in
    -- microseconds since the epoch.
    server_started bigint  NOT NULL,
    -- seen_at is when an engine first saw that server (Unix ms, the
    -- engine's clock); 0 for the first server the schema knew.
    seen_at        bigint  NOT NULL
);

-- +goose Down
DROP TABLE flowlite.server_epoch;
