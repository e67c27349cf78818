-- name: EventFeed :many
-- EventFeed returns up to @max_events events after position @after, in
-- position (ID) order. The single writer commits transactions one at a
-- time and a reader sees only committed ones, so every ID below a visible
-- one is visible too, or was rolled back and never appears: nothing is
-- held back.
SELECT * FROM flowlite_events WHERE id > @after ORDER BY id LIMIT @max_events;

-- name: FeedPurgedThrough :one
-- FeedPurgedThrough returns the highest event ID ever deleted.
SELECT purged_through FROM flowlite_feed WHERE id = 1;

-- name: FeedLast :one
-- FeedLast returns the newest event's position, 0 when there is none.
SELECT CAST(coalesce(max(id), 0) AS INTEGER) AS newest FROM flowlite_events;

-- name: FeedConsumerGet :one
SELECT * FROM flowlite_feed_consumers WHERE name = @name;

-- name: FeedConsumerList :many
SELECT * FROM flowlite_feed_consumers ORDER BY name;

-- name: FeedConsumerMinPosition :one
-- FeedConsumerMinPosition returns the lowest acknowledged position, or the
-- largest int64 when no consumer is registered.
SELECT CAST(coalesce(min(position), 9223372036854775807) AS INTEGER) AS position FROM flowlite_feed_consumers;

-- name: FeedConsumerAck :exec
-- FeedConsumerAck registers the consumer @name at @position, or moves its
-- position forward to @position; it never moves a position back.
INSERT INTO flowlite_feed_consumers (name, position, created_at, acked_at)
VALUES (@name, @position, @now, @now)
ON CONFLICT (name) DO UPDATE SET
  position = max(flowlite_feed_consumers.position, excluded.position),
  acked_at = excluded.acked_at;

-- name: FeedConsumerDelete :execrows
DELETE FROM flowlite_feed_consumers WHERE name = @name;
