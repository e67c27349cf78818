-- name: StreamAdvance :one
-- StreamAdvance makes room for count messages at the end of an open
-- stream, creating its row on the first append, and returns the stream's
-- new length: the messages take the positions below it. The upsert holds
-- the stream row's lock until the transaction ends, so appends to one
-- stream take turns and positions commit in order (migration
-- 00008_streams.sql); a closed stream matches no row (ErrNoRows).
INSERT INTO flowlite.streams (run_id, stream, length)
VALUES (sqlc.arg(run_id)::text, sqlc.arg(stream)::text, sqlc.arg(count)::bigint)
ON CONFLICT (run_id, stream) DO UPDATE SET length = flowlite.streams.length + excluded.length
WHERE flowlite.streams.closed_at = 0
RETURNING length;

-- name: StreamChunkInsert :exec
-- StreamChunkInsert stores one append's messages, a JSON array of them,
-- at the positions from first_position on (migration 00011).
INSERT INTO flowlite.stream_chunks (run_id, stream, first_position, count, messages, at, step, occurrence, attempt)
VALUES (sqlc.arg(run_id)::text, sqlc.arg(stream)::text, sqlc.arg(first_position)::bigint, sqlc.arg(count)::bigint,
        sqlc.arg(messages)::bytea, sqlc.arg(at)::bigint, sqlc.arg(step)::text, sqlc.arg(occurrence)::bigint, sqlc.arg(attempt)::bigint);

-- name: StreamClose :exec
-- StreamClose closes a stream, creating it empty if it has no row; closing
-- a closed stream keeps its first closing time. It takes the row's lock as
-- StreamAdvance does, so an append and a close take turns.
INSERT INTO flowlite.streams (run_id, stream, closed_at)
VALUES (sqlc.arg(run_id)::text, sqlc.arg(stream)::text, sqlc.arg(closed_at)::bigint)
ON CONFLICT (run_id, stream) DO UPDATE SET closed_at = excluded.closed_at
WHERE flowlite.streams.closed_at = 0;

-- name: StreamRead :many
-- StreamRead returns up to max_chunks chunks of a stream in position
-- order, from the one holding position from on.
SELECT * FROM flowlite.stream_chunks
WHERE run_id = sqlc.arg(run_id)::text AND stream = sqlc.arg(stream)::text
  AND first_position >= coalesce((
      SELECT max(c.first_position) FROM flowlite.stream_chunks AS c
      WHERE c.run_id = sqlc.arg(run_id)::text AND c.stream = sqlc.arg(stream)::text
        AND c.first_position <= sqlc.arg(from_position)::bigint), 0)
ORDER BY first_position
LIMIT sqlc.arg(max_chunks)::bigint;

-- name: StreamList :many
-- StreamList returns the streams of a run, by name.
SELECT * FROM flowlite.streams WHERE run_id = sqlc.arg(run_id)::text ORDER BY stream;

-- name: CopyStreamInsert :exec
-- CopyStreamInsert writes one stream row for `flowlite copy`, its length
-- and closing time as they were: the next append goes on at length.
INSERT INTO flowlite.streams (run_id, stream, length, closed_at)
VALUES (@run_id, @stream, @length, @closed_at);

-- name: CopyStreamChunkInsert :exec
-- CopyStreamChunkInsert writes one chunk of stream messages for `flowlite
-- copy`, at its positions (after its stream's row, which its foreign key
-- needs).
INSERT INTO flowlite.stream_chunks (run_id, stream, first_position, count, messages, at, step, occurrence, attempt)
VALUES (@run_id, @stream, @first_position, @count, @messages, @at, @step, @occurrence, @attempt);
