-- name: StreamAdvance :one
-- StreamAdvance makes room for count messages at the end of an open
-- stream, creating its row on the first append, and returns the stream's
-- new length: the messages take the positions below it. SQLite's one
-- writer serializes appends; a closed stream matches no row (ErrNoRows).
INSERT INTO flowlite_streams (run_id, stream, length)
VALUES (@run_id, @stream, @count)
ON CONFLICT (run_id, stream) DO UPDATE SET length = flowlite_streams.length + excluded.length
WHERE flowlite_streams.closed_at = 0
RETURNING length;

-- name: StreamChunkInsert :exec
-- StreamChunkInsert stores one append's messages, a JSON array of them,
-- at the positions from first_position on (migration 00020).
INSERT INTO flowlite_stream_chunks (run_id, stream, first_position, count, messages, at, step, occurrence, attempt)
VALUES (@run_id, @stream, @first_position, @count, @messages, @at, @step, @occurrence, @attempt);

-- name: StreamClose :exec
-- StreamClose closes a stream, creating it empty if it has no row; closing
-- a closed stream keeps its first closing time.
INSERT INTO flowlite_streams (run_id, stream, closed_at)
VALUES (@run_id, @stream, @closed_at)
ON CONFLICT (run_id, stream) DO UPDATE SET closed_at = excluded.closed_at
WHERE flowlite_streams.closed_at = 0;

-- name: StreamRead :many
-- StreamRead returns up to max_chunks chunks of a stream in position
-- order, from the one holding position from on.
SELECT s.* FROM flowlite_stream_chunks AS s
WHERE s.run_id = @run_id AND s.stream = @stream
  AND s.first_position >= coalesce((
      SELECT max(c.first_position) FROM flowlite_stream_chunks AS c
      WHERE c.run_id = @run_id AND c.stream = @stream AND c.first_position <= @from), 0)
ORDER BY s.first_position
LIMIT @max_chunks;

-- name: StreamList :many
-- StreamList returns the streams of a run, by name.
SELECT * FROM flowlite_streams WHERE run_id = @run_id ORDER BY stream;

-- name: CopyStreamList :many
-- CopyStreamList reads every stream row (length, closed_at) for `flowlite
-- copy`.
SELECT * FROM flowlite_streams ORDER BY run_id, stream;

-- name: CopyStreamChunkList :many
-- CopyStreamChunkList reads every chunk of stream messages for `flowlite
-- copy`, by stream and position.
SELECT * FROM flowlite_stream_chunks ORDER BY run_id, stream, first_position;
