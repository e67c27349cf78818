-- +goose Up

-- The change feed (flow.Changes) reads the events table in ID order: an
-- event's ID is its feed position. IDs come from the events identity
-- sequence, so they are never handed out twice; but they are taken in
-- insertion order, not commit order, so the feed holds back IDs a
-- transaction still in progress could fill (pgstore/feed.go explains how).
--
-- feed.purged_through is the highest event ID ever deleted (events go with
-- their runs, ON DELETE CASCADE): a consumer whose position is below it
-- may have missed events and is told so. events_purged keeps it, once per
-- deleting statement, from the statement's transition table.
CREATE TABLE flowlite.feed (
    id             BIGINT NOT NULL PRIMARY KEY CHECK (id = 1),
    purged_through BIGINT NOT NULL DEFAULT 0
);

INSERT INTO flowlite.feed (id, purged_through) VALUES (1, 0);

-- feed_consumers holds the position each named consumer acknowledged:
-- every event at or before it was handled, so the consumer resumes after
-- it. Positions only move forward.
CREATE TABLE flowlite.feed_consumers (
    name       TEXT   NOT NULL PRIMARY KEY,
    position   BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    acked_at   BIGINT NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION flowlite.events_note_purge() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE flowlite.feed AS f SET purged_through = g.id
    FROM (SELECT max(id) AS id FROM gone) AS g
    WHERE f.id = 1 AND g.id > f.purged_through;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER events_purged AFTER DELETE ON flowlite.events
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION flowlite.events_note_purge();

-- +goose Down
DROP TRIGGER events_purged ON flowlite.events;
DROP FUNCTION flowlite.events_note_purge();
DROP TABLE flowlite.feed_consumers;
DROP TABLE flowlite.feed;
