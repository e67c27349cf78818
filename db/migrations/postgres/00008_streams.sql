-- +goose Up

-- Streams of a run (issue 24): see the SQLite migration 00019_streams.sql
-- for what each column means. On PostgreSQL the transactions appending to
-- one stream take turns on its streams row: StreamAdvance raises length
-- with an INSERT … ON CONFLICT DO UPDATE, which holds the row's lock until
-- the transaction ends, so a second writer reads the first one's length
-- only once it committed (or rolled back). Positions are therefore handed
-- out in commit order, dense, and never visible out of order: unlike a
-- sequence, whose values commit in any order.
CREATE TABLE flowlite.streams (
    run_id    TEXT   NOT NULL REFERENCES flowlite.runs (id) ON DELETE CASCADE,
    stream    TEXT   NOT NULL,
    length    BIGINT NOT NULL DEFAULT 0,
    closed_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stream)
);

CREATE TABLE flowlite.stream_messages (
    run_id     TEXT   NOT NULL,
    stream     TEXT   NOT NULL,
    position   BIGINT NOT NULL,
    value      BYTEA  NOT NULL,
    at         BIGINT NOT NULL,
    step       TEXT   NOT NULL DEFAULT '',
    occurrence BIGINT NOT NULL DEFAULT 0,
    attempt    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stream, position),
    FOREIGN KEY (run_id, stream) REFERENCES flowlite.streams (run_id, stream) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE flowlite.stream_messages;
DROP TABLE flowlite.streams;
