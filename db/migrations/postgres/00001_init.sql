-- +goose Up

-- The PostgreSQL schema of flowlite, in the state the SQLite migrations
-- 00001 to 00010 reach. No PostgreSQL database existed before it, so the
-- SQLite history (columns added one migration at a time, the events table
-- rebuilt without AUTOINCREMENT, the move into the flowlite_ prefix) is
-- collapsed into this one migration; later changes get migrations of their
-- own.
--
-- Every object lives in the schema flowlite, the namespace that lets
-- flowlite share a database with the application's tables (RunTx steps
-- commit the application's writes with flowlite's checkpoint). Every name
-- is schema-qualified, here and in db/queries/postgres, rather than found
-- through search_path: sqlc checks qualified names against this file, the
-- transaction a RunTx step gets keeps the application's own search_path,
-- and an application table named runs or events can never be taken for
-- flowlite's. pgstore creates the schema before goose runs (goose keeps its
-- version table in it) and, for a store opened with another schema name,
-- rewrites the qualifier "flowlite." of this file and of every query.
--
-- Differences from SQLite, each for a reason:
--   - times are Unix milliseconds in BIGINT, as on SQLite (INTEGER): the
--     engine's clock is the only clock, never now();
--   - payloads (inputs, outputs, signal payloads, metrics) are BYTEA: the
--     engine hands the store bytes and expects the same bytes back, which
--     JSONB (reformatted, keys reordered) would not keep;
--   - flags are BOOLEAN, integers BIGINT (int64 in Go, like SQLite's);
--   - runs and steps have a seq column (an identity) where SQLite orders by
--     rowid: ties of the claim order, the order of steps, dead-letter
--     cursors (RunSeqMax) need a number that grows with insertion;
--   - events and signals take their IDs from identity sequences, which
--     never hand out a number twice, even after deletes.

-- This statement is for sqlc, which must know the schema; pgstore leaves
-- it out when it migrates, because it has created the schema already (its
-- version table lives there), and CREATE SCHEMA IF NOT EXISTS would need
-- the right to create schemas in the database even when the schema exists.
CREATE SCHEMA IF NOT EXISTS flowlite;

-- runs holds one row per workflow run. A run is claimable when it has no
-- lease owner, its status is pending, waiting or compensating, and run_at has
-- passed. fence increases on every claim; every write made by the executor
-- of a run is conditioned on (lease_owner, fence), so a worker that lost its
-- lease can never overwrite what the new owner recorded. wake_seq increases
-- whenever something the run may wait for happens (a signal, a child
-- finishing, a cancellation), so a worker parking the run can tell that it
-- must not sleep past it.
--
-- unique_key makes a run unique among the runs of its workflow (see
-- runs_unique); unique_states is the set of states in which the run holds
-- it for good, as a bit mask: pending 1, running 2, waiting 4, compensating
-- 8, suspended 16, completed 32, failed 64, cancelled 128 (31, the
-- unfinished states, by default). started_at is the first claim.
-- requeued_from names the failed run this run re-runs, and requeued_as, on
-- a failed run, the run that re-runs it: plain links, not foreign keys.
CREATE TABLE flowlite.runs (
    id               TEXT    NOT NULL PRIMARY KEY,
    seq              BIGINT  NOT NULL GENERATED ALWAYS AS IDENTITY UNIQUE,
    workflow         TEXT    NOT NULL,
    version          BIGINT  NOT NULL,
    queue            TEXT    NOT NULL,
    priority         BIGINT  NOT NULL DEFAULT 0,
    status           TEXT    NOT NULL CHECK (status IN
                         ('pending', 'running', 'waiting', 'compensating', 'completed', 'failed', 'suspended', 'cancelled')),
    input            BYTEA   NOT NULL,
    output           BYTEA,
    error            TEXT    NOT NULL DEFAULT '',
    reason           TEXT    NOT NULL DEFAULT '',
    cancel_requested BOOLEAN NOT NULL DEFAULT false,
    run_at           BIGINT  NOT NULL,
    deadline         BIGINT,
    parent_id        TEXT REFERENCES flowlite.runs (id) ON DELETE SET NULL,
    wake_seq         BIGINT  NOT NULL DEFAULT 0,
    fence            BIGINT  NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    finished_at      BIGINT,
    unique_key       TEXT,
    unique_states    BIGINT  NOT NULL DEFAULT 31,
    started_at       BIGINT,
    requeued_from    TEXT,
    requeued_as      TEXT
);

-- runs_ready serves the claim query; finished runs are not in it. seq ends
-- it so that ties of run_at go to the run inserted first without a sort.
CREATE INDEX runs_ready ON flowlite.runs (queue, priority DESC, run_at, seq)
    WHERE lease_owner IS NULL AND status IN ('pending', 'waiting', 'compensating');

-- runs_leased serves the rescuer.
CREATE INDEX runs_leased ON flowlite.runs (lease_expires_at)
    WHERE lease_owner IS NOT NULL;

CREATE INDEX runs_status ON flowlite.runs (status, workflow);

CREATE INDEX runs_parent ON flowlite.runs (parent_id) WHERE parent_id IS NOT NULL;

-- runs_finished serves the cleaner, which deletes finished runs oldest
-- first, one state at a time.
CREATE INDEX runs_finished ON flowlite.runs (status, finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- runs_unique allows at most one run per workflow and unique key in a state
-- its unique_states holds. A requeued dead letter holds nothing: its key
-- passed to the run that requeues it. A run only leaves the holding states,
-- never enters them, so no update can break the index, only an insert,
-- which does nothing instead (ON CONFLICT DO NOTHING). Under READ COMMITTED
-- this index is what settles two concurrent inserts of one key: the second
-- waits for the first to commit or roll back, then conflicts or proceeds.
CREATE UNIQUE INDEX runs_unique ON flowlite.runs (workflow, unique_key)
    WHERE unique_key IS NOT NULL AND requeued_as IS NULL
      AND (unique_states & (CASE status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) <> 0;

-- runs_dead holds the dead letters (failed runs not requeued) in the order
-- they failed.
CREATE INDEX runs_dead ON flowlite.runs (finished_at, seq)
    WHERE status = 'failed' AND requeued_as IS NULL;

-- steps holds one row per step occurrence of a run: its attempts, its
-- checkpointed output, and the state of its compensation. position is the
-- index of the call among the calls of its branch (NULL: not checked on
-- replay); error_code, error_permanent and error_details keep the shape of
-- the error of a step that failed for good.
CREATE TABLE flowlite.steps (
    run_id                TEXT    NOT NULL REFERENCES flowlite.runs (id) ON DELETE CASCADE,
    name                  TEXT    NOT NULL,
    occurrence            BIGINT  NOT NULL,
    seq                   BIGINT  NOT NULL GENERATED ALWAYS AS IDENTITY,
    status                TEXT    NOT NULL CHECK (status IN ('running', 'retrying', 'waiting', 'completed', 'failed')),
    attempts              BIGINT  NOT NULL DEFAULT 0,
    input                 BYTEA   NOT NULL,
    output                BYTEA,
    error                 TEXT    NOT NULL DEFAULT '',
    completed_seq         BIGINT,
    compensable           BOOLEAN NOT NULL DEFAULT false,
    compensation          TEXT    NOT NULL DEFAULT 'none' CHECK (compensation IN
                              ('none', 'pending', 'running', 'retrying', 'completed', 'failed', 'skipped')),
    compensation_attempts BIGINT  NOT NULL DEFAULT 0,
    compensation_error    TEXT    NOT NULL DEFAULT '',
    started_at            BIGINT  NOT NULL,
    finished_at           BIGINT,
    position              BIGINT,
    error_code            TEXT    NOT NULL DEFAULT '',
    error_permanent       BOOLEAN NOT NULL DEFAULT false,
    error_details         BYTEA,
    PRIMARY KEY (run_id, name, occurrence)
);

-- events is the append-only history of every state change of a run. Its
-- IDs come from a sequence and are never reused; they grow in the order
-- events were inserted, not the order their transactions committed.
CREATE TABLE flowlite.events (
    id         BIGINT NOT NULL GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id     TEXT   NOT NULL REFERENCES flowlite.runs (id) ON DELETE CASCADE,
    at         BIGINT NOT NULL,
    kind       TEXT   NOT NULL,
    step       TEXT   NOT NULL DEFAULT '',
    occurrence BIGINT NOT NULL DEFAULT 0,
    attempt    BIGINT NOT NULL DEFAULT 0,
    detail     TEXT   NOT NULL DEFAULT ''
);

CREATE INDEX events_run ON flowlite.events (run_id, id);

-- signals holds the external events sent to runs, until the run receives
-- them (consumed_by names the receiving wait). key makes sending
-- idempotent.
CREATE TABLE flowlite.signals (
    id          BIGINT NOT NULL GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      TEXT   NOT NULL REFERENCES flowlite.runs (id) ON DELETE CASCADE,
    name        TEXT   NOT NULL,
    payload     BYTEA  NOT NULL,
    key         TEXT,
    sent_at     BIGINT NOT NULL,
    consumed_by TEXT
);

CREATE UNIQUE INDEX signals_key ON flowlite.signals (run_id, key) WHERE key IS NOT NULL;
CREATE INDEX signals_pending ON flowlite.signals (run_id, name, id) WHERE consumed_by IS NULL;
-- signals_run serves the ON DELETE CASCADE of runs.
CREATE INDEX signals_run ON flowlite.signals (run_id);

-- workflows lists the workflow versions engines have registered.
CREATE TABLE flowlite.workflows (
    name          TEXT   NOT NULL,
    version       BIGINT NOT NULL,
    registered_at BIGINT NOT NULL,
    PRIMARY KEY (name, version)
);

-- schedules holds one row per cron schedule. next_at is the next slot not
-- yet started; the scheduler of any engine starts the due slots and moves
-- next_at forward in one transaction, with a compare-and-set on the old
-- next_at (ScheduleAdvance, one UPDATE, which takes the row's lock), so
-- each slot is handled once however many engines share the database.
CREATE TABLE flowlite.schedules (
    name       TEXT    NOT NULL PRIMARY KEY,
    workflow   TEXT    NOT NULL,
    version    BIGINT  NOT NULL,
    queue      TEXT    NOT NULL,
    priority   BIGINT  NOT NULL DEFAULT 0,
    input      BYTEA   NOT NULL,
    spec       TEXT    NOT NULL,
    catch_up   TEXT    NOT NULL CHECK (catch_up IN ('one', 'all', 'none')),
    paused     BOOLEAN NOT NULL DEFAULT false,
    next_at    BIGINT  NOT NULL,
    last_slot  BIGINT  NOT NULL DEFAULT 0,
    created_at BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL
);

CREATE INDEX schedules_due ON flowlite.schedules (next_at) WHERE NOT paused;

-- unique_holds keeps a unique key of a workflow taken by a run from
-- taken_at until held_until, even after the run finished, while the holder
-- is in one of states (the bits of runs.unique_states). A hold whose time is
-- up is taken over in place (INSERT … ON CONFLICT DO UPDATE … WHERE
-- held_until <= excluded.taken_at), so the primary key settles races.
CREATE TABLE flowlite.unique_holds (
    workflow   TEXT   NOT NULL,
    key        TEXT   NOT NULL,
    run_id     TEXT   NOT NULL REFERENCES flowlite.runs (id) ON DELETE CASCADE,
    taken_at   BIGINT NOT NULL,
    held_until BIGINT NOT NULL,
    states     BIGINT NOT NULL DEFAULT 255,
    PRIMARY KEY (workflow, key)
);

CREATE INDEX unique_holds_run ON flowlite.unique_holds (run_id);

-- queues holds the queues an operator paused (or resumed).
CREATE TABLE flowlite.queues (
    name       TEXT    NOT NULL PRIMARY KEY,
    paused     BOOLEAN NOT NULL DEFAULT false,
    created_at BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL
);

-- engine_reports holds one row per engine: its metrics (JSON, kept as
-- bytes), the queues it works (a JSON array), and until when it promises
-- to report again.
CREATE TABLE flowlite.engine_reports (
    owner       TEXT   NOT NULL PRIMARY KEY,
    host        TEXT   NOT NULL,
    pid         BIGINT NOT NULL,
    started_at  BIGINT NOT NULL,
    reported_at BIGINT NOT NULL,
    metrics     BYTEA  NOT NULL,
    queues      TEXT   NOT NULL DEFAULT '[]',
    live_until  BIGINT NOT NULL DEFAULT 0,
    stopped_at  BIGINT NOT NULL DEFAULT 0
);

-- checkpoints mirrors SQLite's record of the last WAL checkpoint so that
-- both dialects serve the same ReportReader; PostgreSQL checkpoints on its
-- own and no engine writes it.
CREATE TABLE flowlite.checkpoints (
    id        BIGINT  NOT NULL PRIMARY KEY CHECK (id = 1),
    at        BIGINT  NOT NULL,
    owner     TEXT    NOT NULL,
    mode      TEXT    NOT NULL,
    wal_bytes BIGINT  NOT NULL,
    busy      BOOLEAN NOT NULL,
    error     TEXT    NOT NULL DEFAULT ''
);

-- json_valid reports whether a stored value is JSON text, for
-- PayloadInvalidList. PostgreSQL 15 has no IS JSON predicate, so the cast
-- is tried and its failure caught.
-- +goose StatementBegin
CREATE FUNCTION flowlite.json_valid(value BYTEA) RETURNS BOOLEAN
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM convert_from(value, 'UTF8')::jsonb;
    RETURN true;
EXCEPTION WHEN others THEN
    RETURN false;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION flowlite.json_valid(BYTEA);
DROP TABLE flowlite.checkpoints;
DROP TABLE flowlite.engine_reports;
DROP TABLE flowlite.queues;
DROP TABLE flowlite.unique_holds;
DROP TABLE flowlite.schedules;
DROP TABLE flowlite.workflows;
DROP TABLE flowlite.signals;
DROP TABLE flowlite.events;
DROP TABLE flowlite.steps;
DROP TABLE flowlite.runs;
