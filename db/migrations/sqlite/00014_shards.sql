-- +goose Up

-- A shard set (flowsqlite.OpenShards) spreads runs over several SQLite
-- files, each with its own writer, by a hash of each run's placement key.
-- Which file holds which runs depends on the number of files and their
-- order, so each file records its place in the set: opening 3 of 4 files,
-- reordering them, or mixing files of two sets would put new runs where
-- lookups and unique keys do not expect them, and is refused instead.
--
-- The one row exists only in a file that belongs to a set of two or more
-- files; a plain database has none. set_id is random per set, written to
-- every file when the set is created (shard 0 last, so a set whose
-- creation was interrupted is created again).
CREATE TABLE flowlite_shard (
    id          INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    set_id      TEXT    NOT NULL,
    shard_index INTEGER NOT NULL CHECK (shard_index >= 0),
    shard_count INTEGER NOT NULL CHECK (shard_count > 1 AND shard_index < shard_count),
    created_at  INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE flowlite_shard;
