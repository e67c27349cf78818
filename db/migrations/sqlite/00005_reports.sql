-- +goose Up

-- engine_reports holds one row per engine (one per worker process): the
-- counters and histograms of what it did since it started (runs started and
-- finished, step and compensation attempt durations, claim latency), as
-- JSON. Each engine rewrites its own row every report interval when
-- something changed, so processes that run no workflows (flowlite serve,
-- the CLI) can show what every worker did. The cleaner deletes the rows of
-- engines that stopped reporting long ago.
CREATE TABLE flowlite_engine_reports (
    owner       TEXT    NOT NULL PRIMARY KEY,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    reported_at INTEGER NOT NULL,
    metrics     BLOB    NOT NULL
) STRICT;

-- checkpoints holds the last WAL checkpoint an engine ran on this file:
-- SQLite keeps no record of it, and the operator wants to see it from any
-- process. It has at most one row. The engine writes it just before it
-- checkpoints, so the checkpoint copies the record too and a truncated WAL
-- stays empty, and writes it again when the checkpoint failed or was busy.
CREATE TABLE flowlite_checkpoints (
    id        INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    at        INTEGER NOT NULL,
    owner     TEXT    NOT NULL,
    mode      TEXT    NOT NULL,
    wal_bytes INTEGER NOT NULL,
    busy      INTEGER NOT NULL,
    error     TEXT    NOT NULL DEFAULT ''
) STRICT;

-- +goose Down
DROP TABLE flowlite_checkpoints;
DROP TABLE flowlite_engine_reports;
