-- +goose Up

-- Streams of a run (issue 24): ordered messages a run appends under a
-- name (an LLM's tokens, a pipeline's log lines) and clients read by
-- position. streams holds one row per (run, stream):
--   length    how many messages the stream holds: the next message's
--             position. Appending raises it in the transaction that inserts
--             the messages, so positions are dense (0, 1, 2…) and a reader
--             that sees position n sees every position below it
--   closed_at when the stream was closed (Unix ms), 0 while it is open; a
--             closed stream takes no more messages
-- stream_messages holds the messages, by position:
--   value      the message as JSON
--   at         when it was appended (Unix ms)
--   step, occurrence, attempt
--              the step attempt whose body wrote it; empty and 0 for a
--              message the workflow body wrote (recorded as a step of its
--              own, exactly once)
-- Deleting the run (retention, DeleteRun) deletes its streams, and theirs
-- their messages.
CREATE TABLE flowlite_streams (
    run_id    TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    stream    TEXT    NOT NULL,
    length    INTEGER NOT NULL DEFAULT 0,
    closed_at INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stream)
) STRICT, WITHOUT ROWID;

CREATE TABLE flowlite_stream_messages (
    run_id     TEXT    NOT NULL,
    stream     TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    value      BLOB    NOT NULL,
    at         INTEGER NOT NULL,
    step       TEXT    NOT NULL DEFAULT '',
    occurrence INTEGER NOT NULL DEFAULT 0,
    attempt    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stream, position),
    FOREIGN KEY (run_id, stream) REFERENCES flowlite_streams (run_id, stream) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE flowlite_stream_messages;
DROP TABLE flowlite_streams;
