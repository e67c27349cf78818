-- +goose Up

-- The change feed (flow.Changes) reads the events table in ID order: an
-- event's ID is its feed position. Two things make a position safe to
-- keep as a cursor:
--
--   - It is never handed out twice. Plain rowids (00006) come back when
--     the newest events are deleted, so EventAppend takes its ID from
--     max(newest ID, feed.purged_through) + 1 in the same statement
--     (no extra statement, and no sqlite_sequence write as AUTOINCREMENT
--     would make on every insert).
--   - A consumer can tell it fell behind retention. Events go with their
--     runs (ON DELETE CASCADE); events_purged records the highest ID ever
--     deleted in feed.purged_through, so a consumer whose position is
--     below it may have missed events and is told so.
CREATE TABLE flowlite_feed (
    id             INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    purged_through INTEGER NOT NULL DEFAULT 0
) STRICT;

INSERT INTO flowlite_feed (id, purged_through)
SELECT 1, 0;

-- feed_consumers holds the position each named consumer acknowledged:
-- every event at or before it was handled, so the consumer resumes after
-- it. Positions only move forward.
CREATE TABLE flowlite_feed_consumers (
    name       TEXT    NOT NULL PRIMARY KEY,
    position   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    acked_at   INTEGER NOT NULL
) STRICT;

-- +goose StatementBegin
CREATE TRIGGER flowlite_events_purged AFTER DELETE ON flowlite_events
FOR EACH ROW WHEN old.id > (SELECT purged_through FROM flowlite_feed WHERE id = 1)
BEGIN
    UPDATE flowlite_feed SET purged_through = old.id WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER flowlite_events_purged;
DROP TABLE flowlite_feed_consumers;
DROP TABLE flowlite_feed;
