-- +goose Up

-- schedules holds one row per cron schedule: a workflow version, its input
-- and the cron spec that starts it. next_at is the next slot (Unix ms) not
-- yet started; the scheduler of any engine starts the due slots and moves
-- next_at forward in one write transaction, with a compare-and-set on the
-- old next_at, so each slot is handled once however many engines share the
-- database. last_slot is the most recent slot a run was started for (0:
-- none yet). catch_up says what to do with slots missed while no engine ran
-- or the schedule was paused.
CREATE TABLE flowlite_schedules (
    name       TEXT    NOT NULL PRIMARY KEY,
    workflow   TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    queue      TEXT    NOT NULL,
    priority   INTEGER NOT NULL DEFAULT 0,
    input      BLOB    NOT NULL,
    spec       TEXT    NOT NULL,
    catch_up   TEXT    NOT NULL CHECK (catch_up IN ('one', 'all', 'none')),
    paused     INTEGER NOT NULL DEFAULT 0,
    next_at    INTEGER NOT NULL,
    last_slot  INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- schedules_due serves the scheduler's search for due slots.
CREATE INDEX flowlite_schedules_due ON flowlite_schedules (next_at) WHERE paused = 0;

-- +goose Down
DROP TABLE flowlite_schedules;
