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

-- name: StreamMessagesInsert :exec
-- StreamMessagesInsert inserts the messages of messages, a JSON array of
-- objects (position, value: the message's JSON as a string), in array
-- order.
INSERT INTO flowlite_stream_messages (run_id, stream, position, value, at, step, occurrence, attempt)
SELECT @run_id, @stream, j.value ->> 'position', CAST(j.value ->> 'value' AS BLOB), @at, @step, @occurrence, @attempt
FROM jsonb_each(@messages) AS j
ORDER BY j.key;

-- name: StreamClose :exec
-- StreamClose closes a stream, creating it empty if it has no row; closing
-- a closed stream keeps its first closing time.
INSERT INTO flowlite_streams (run_id, stream, closed_at)
VALUES (@run_id, @stream, @closed_at)
ON CONFLICT (run_id, stream) DO UPDATE SET closed_at = excluded.closed_at
WHERE flowlite_streams.closed_at = 0;

-- name: StreamRead :many
-- StreamRead returns up to max_messages messages of a stream from
-- position from on, in position order.
SELECT * FROM flowlite_stream_messages
WHERE run_id = @run_id AND stream = @stream AND position >= @from
ORDER BY position
LIMIT @max_messages;

-- name: StreamList :many
-- StreamList returns the streams of a run, by name.
SELECT * FROM flowlite_streams WHERE run_id = @run_id ORDER BY stream;

-- name: CopyStreamList :many
-- CopyStreamList reads every stream row (length, closed_at) for `flowlite
-- copy`.
SELECT * FROM flowlite_streams ORDER BY run_id, stream;

-- name: CopyStreamMessageList :many
-- CopyStreamMessageList reads every stream message for `flowlite copy`, by
-- stream and position.
SELECT * FROM flowlite_stream_messages ORDER BY run_id, stream, position;
