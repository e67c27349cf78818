-- name: EventFeed :many
-- EventFeed returns up to @max_events events with positions in
-- (@after, @through], in position (ID) order. The caller (pgstore/feed.go)
-- passes a @through that no transaction in progress can still fill.
SELECT * FROM flowlite.events
WHERE id > sqlc.arg(after)::bigint AND id <= sqlc.arg(through)::bigint
ORDER BY id LIMIT sqlc.arg(max_events)::bigint;

-- name: FeedProbe :one
-- FeedProbe reads the last event ID the sequence handed out, to any
-- transaction, committed or not (sequences are not transactional; 0
-- before the first), and then gives its own transaction an ID: as
-- transaction IDs are handed out in order, every transaction that drew an
-- event ID at or below last has an older one (EventAppend takes its ID
-- before drawing). The CTE is materialized so that last is read before
-- the outer projection takes the ID. The transaction writes nothing but
-- its commit record, which need not wait for a flush: the feed's
-- horizon relies only on the ID having been handed out. server names the
-- server that answered (its postmaster's start, in microseconds): a
-- horizon holds on the server it was probed on only (see FeedSnapshot).
WITH drawn AS MATERIALIZED (
    SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('flowlite.events', 'id')::regclass), 0)::bigint AS last,
           set_config('synchronous_commit', 'off', true) AS synchronous_commit
)
SELECT drawn.last, pg_current_xact_id()::text::bigint AS xid,
       (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint AS server
FROM drawn;

-- name: FeedSnapshot :one
-- FeedSnapshot returns the current snapshot's xmin, as a 64-bit number
-- (xid8 counts epochs, so it never wraps): every transaction with an
-- older ID has ended. (Its xmax is one past the newest *completed*
-- transaction, not the newest handed out: a transaction in progress whose
-- ID is newer than every completed one is in no snapshot's list, so xmax
-- bounds nothing the feed can use.) server is FeedProbe's: transaction
-- IDs of another server (a promoted standby, whose counter went on from
-- what it had replayed) say nothing of the probe's.
SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
       (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint AS server;

-- name: FeedPurgedThrough :one
-- FeedPurgedThrough returns the highest event ID ever deleted.
SELECT purged_through FROM flowlite.feed WHERE id = 1;

-- name: FeedLast :one
-- FeedLast returns the newest committed event's position, 0 when there is
-- none.
SELECT coalesce(max(id), 0)::bigint AS newest FROM flowlite.events;

-- name: FeedConsumerGet :one
SELECT * FROM flowlite.feed_consumers WHERE name = sqlc.arg(name)::text;

-- name: FeedConsumerList :many
SELECT * FROM flowlite.feed_consumers ORDER BY name;

-- name: FeedConsumerMinPosition :one
-- FeedConsumerMinPosition returns the lowest acknowledged position, or the
-- largest int64 when no consumer is registered.
SELECT coalesce(min(position), 9223372036854775807)::bigint AS position FROM flowlite.feed_consumers;

-- name: FeedConsumerAck :exec
-- FeedConsumerAck registers the consumer @name at @position, or moves its
-- position forward to @position; it never moves a position back.
INSERT INTO flowlite.feed_consumers AS c (name, position, created_at, acked_at)
VALUES (sqlc.arg(name)::text, sqlc.arg(position)::bigint, sqlc.arg(now)::bigint, sqlc.arg(now)::bigint)
ON CONFLICT (name) DO UPDATE SET
  position = GREATEST(c.position, excluded.position),
  acked_at = excluded.acked_at;

-- name: FeedConsumerDelete :execrows
DELETE FROM flowlite.feed_consumers WHERE name = sqlc.arg(name)::text;
