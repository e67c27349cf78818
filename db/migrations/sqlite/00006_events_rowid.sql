-- +goose Up

-- events keeps its ids without AUTOINCREMENT: AUTOINCREMENT updates
-- sqlite_sequence on every insert, about 6% of the engine's write time,
-- only to keep an id from being used again after the newest event was
-- deleted. Plain rowids still grow with every insert while any newer event
-- exists, which is what the history's order (events_run) needs; an id can
-- come back only after every event newer than it was deleted with its run.
CREATE TABLE flowlite_events_rowid (
    id         INTEGER NOT NULL PRIMARY KEY,
    run_id     TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    at         INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    step       TEXT    NOT NULL DEFAULT '',
    occurrence INTEGER NOT NULL DEFAULT 0,
    attempt    INTEGER NOT NULL DEFAULT 0,
    detail     TEXT    NOT NULL DEFAULT ''
) STRICT;
INSERT INTO flowlite_events_rowid (id, run_id, at, kind, step, occurrence, attempt, detail)
SELECT id, run_id, at, kind, step, occurrence, attempt, detail FROM flowlite_events;
DROP TABLE flowlite_events;
ALTER TABLE flowlite_events_rowid RENAME TO flowlite_events;
CREATE INDEX flowlite_events_run ON flowlite_events (run_id, id);

-- +goose Down
CREATE TABLE flowlite_events_autoincrement (
    id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    at         INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    step       TEXT    NOT NULL DEFAULT '',
    occurrence INTEGER NOT NULL DEFAULT 0,
    attempt    INTEGER NOT NULL DEFAULT 0,
    detail     TEXT    NOT NULL DEFAULT ''
) STRICT;
INSERT INTO flowlite_events_autoincrement (id, run_id, at, kind, step, occurrence, attempt, detail)
SELECT id, run_id, at, kind, step, occurrence, attempt, detail FROM flowlite_events;
DROP TABLE flowlite_events;
ALTER TABLE flowlite_events_autoincrement RENAME TO flowlite_events;
CREATE INDEX flowlite_events_run ON flowlite_events (run_id, id);
