-- +goose Up

-- Stream messages stored by the batch: one row per append instead of one
-- per message. See the SQLite migration 00020_stream_chunks.sql for why and
-- what each column means. messages is BYTEA, not jsonb, so that each
-- message reads back exactly as written.
CREATE TABLE flowlite.stream_chunks (
    run_id         TEXT   NOT NULL,
    stream         TEXT   NOT NULL,
    first_position BIGINT NOT NULL,
    count          BIGINT NOT NULL CHECK (count >= 1),
    messages       BYTEA  NOT NULL,
    at             BIGINT NOT NULL,
    step           TEXT   NOT NULL DEFAULT '',
    occurrence     BIGINT NOT NULL DEFAULT 0,
    attempt        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, stream, first_position),
    FOREIGN KEY (run_id, stream) REFERENCES flowlite.streams (run_id, stream) ON DELETE CASCADE
);

INSERT INTO flowlite.stream_chunks (run_id, stream, first_position, count, messages, at, step, occurrence, attempt)
SELECT run_id, stream, position, 1, '['::bytea || value || ']'::bytea, at, step, occurrence, attempt
FROM flowlite.stream_messages;

DROP TABLE flowlite.stream_messages;

-- +goose Down
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

-- json (not jsonb) keeps each element's text as written.
INSERT INTO flowlite.stream_messages (run_id, stream, position, value, at, step, occurrence, attempt)
SELECT c.run_id, c.stream, c.first_position + j.n - 1, convert_to(j.v::text, 'UTF8'), c.at, c.step, c.occurrence, c.attempt
FROM flowlite.stream_chunks AS c, json_array_elements(convert_from(c.messages, 'UTF8')::json) WITH ORDINALITY AS j(v, n);

DROP TABLE flowlite.stream_chunks;
