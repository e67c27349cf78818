-- +goose Up

-- Stream messages stored by the batch (issue 24: a step's stream writes
-- must not slow it by more than a few percent). A step's writes are
-- buffered and flushed together, and a row per message cost a B-tree
-- insert and a foreign-key probe each: about 7 µs a message, 3.5× a no-op
-- step writing 1,000. stream_chunks holds one row per append instead:
--   first_position the position of the chunk's first message; the chunk
--                  holds positions first_position .. first_position+count-1
--   count          how many messages it holds (1 or more)
--   messages       the messages, a JSON array of them in position order,
--                  each exactly as written
--   at, step, occurrence, attempt
--                  as stream_messages had them: one append is one attempt's
--                  at one time
-- Chunks of a stream never overlap and leave no gap: each append takes the
-- positions StreamAdvance hands it. Existing messages become chunks of one.
CREATE TABLE flowlite_stream_chunks (
    run_id         TEXT    NOT NULL,
    stream         TEXT    NOT NULL,
    first_position INTEGER NOT NULL,
    count          INTEGER NOT NULL CHECK (count >= 1),
    messages       BLOB    NOT NULL,
    at             INTEGER NOT NULL,
    step           TEXT    NOT NULL DEFAULT '',
    occurrence     INTEGER NOT NULL DEFAULT 0,
    attempt        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stream, first_position),
    FOREIGN KEY (run_id, stream) REFERENCES flowlite_streams (run_id, stream) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

INSERT INTO flowlite_stream_chunks (run_id, stream, first_position, count, messages, at, step, occurrence, attempt)
SELECT run_id, stream, position, 1, CAST('[' || CAST(value AS TEXT) || ']' AS BLOB), at, step, occurrence, attempt
FROM flowlite_stream_messages;

DROP TABLE flowlite_stream_messages;

-- +goose Down
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

-- -> gives each element as JSON text (a string keeps its quotes, a number
-- its digits), without whitespace between its tokens: the engine writes
-- messages compact, so they come back as written.
INSERT INTO flowlite_stream_messages (run_id, stream, position, value, at, step, occurrence, attempt)
SELECT c.run_id, c.stream, c.first_position + j.key, CAST(CAST(c.messages AS TEXT) -> ('$[' || j.key || ']') AS BLOB),
       c.at, c.step, c.occurrence, c.attempt
FROM flowlite_stream_chunks AS c, json_each(CAST(c.messages AS TEXT)) AS j;

DROP TABLE flowlite_stream_chunks;
