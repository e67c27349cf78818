-- +goose Up

-- runs holds one row per workflow run. A run is claimable when it has no
-- lease owner, its status is pending, waiting or compensating, and run_at has
-- passed. fence increases on every claim; every write made by the executor
-- of a run is conditioned on (lease_owner, fence), so a worker that lost its
-- lease can never overwrite what the new owner recorded. wake_seq increases
-- whenever something the run may wait for happens (a signal, a child
-- finishing, a cancellation), so a worker parking the run can tell that it
-- must not sleep past it.
CREATE TABLE flowlite_runs (
    id               TEXT    NOT NULL PRIMARY KEY,
    workflow         TEXT    NOT NULL,
    version          INTEGER NOT NULL,
    queue            TEXT    NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    status           TEXT    NOT NULL CHECK (status IN
                         ('pending', 'running', 'waiting', 'compensating', 'completed', 'failed', 'suspended', 'cancelled')),
    input            BLOB    NOT NULL,
    output           BLOB,
    error            TEXT    NOT NULL DEFAULT '',
    reason           TEXT    NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL,
    deadline         INTEGER,
    parent_id        TEXT REFERENCES flowlite_runs (id) ON DELETE SET NULL,
    wake_seq         INTEGER NOT NULL DEFAULT 0,
    fence            INTEGER NOT NULL DEFAULT 0,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER
) STRICT;

-- runs_ready serves the claim query; finished runs are not in it.
CREATE INDEX flowlite_runs_ready ON flowlite_runs (queue, priority DESC, run_at)
    WHERE lease_owner IS NULL AND status IN ('pending', 'waiting', 'compensating');

-- runs_leased serves the rescuer.
CREATE INDEX flowlite_runs_leased ON flowlite_runs (lease_expires_at)
    WHERE lease_owner IS NOT NULL;

CREATE INDEX flowlite_runs_status ON flowlite_runs (status, workflow);

CREATE INDEX flowlite_runs_parent ON flowlite_runs (parent_id) WHERE parent_id IS NOT NULL;

-- steps holds one row per step occurrence of a run: its attempts, its
-- checkpointed output, and the state of its compensation.
CREATE TABLE flowlite_steps (
    run_id              TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    name                TEXT    NOT NULL,
    occurrence          INTEGER NOT NULL,
    status              TEXT    NOT NULL CHECK (status IN ('running', 'retrying', 'waiting', 'completed', 'failed')),
    attempts            INTEGER NOT NULL DEFAULT 0,
    input               BLOB    NOT NULL,
    output              BLOB,
    error               TEXT    NOT NULL DEFAULT '',
    completed_seq       INTEGER,
    compensable         INTEGER NOT NULL DEFAULT 0,
    compensation        TEXT    NOT NULL DEFAULT 'none' CHECK (compensation IN
                            ('none', 'pending', 'running', 'retrying', 'completed', 'failed', 'skipped')),
    compensation_attempts INTEGER NOT NULL DEFAULT 0,
    compensation_error  TEXT    NOT NULL DEFAULT '',
    started_at          INTEGER NOT NULL,
    finished_at         INTEGER,
    PRIMARY KEY (run_id, name, occurrence)
) STRICT;

-- events is the append-only history of every state change of a run.
CREATE TABLE flowlite_events (
    id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id     TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    at         INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    step       TEXT    NOT NULL DEFAULT '',
    occurrence INTEGER NOT NULL DEFAULT 0,
    attempt    INTEGER NOT NULL DEFAULT 0,
    detail     TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX flowlite_events_run ON flowlite_events (run_id, id);

-- signals holds the external events sent to runs. A signal waits here until
-- the run receives it (consumed_by names the receiving wait), so a signal
-- sent before the run waits for it is not lost. key makes sending
-- idempotent.
CREATE TABLE flowlite_signals (
    id          INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    payload     BLOB    NOT NULL,
    key         TEXT,
    sent_at     INTEGER NOT NULL,
    consumed_by TEXT
) STRICT;

CREATE UNIQUE INDEX flowlite_signals_key ON flowlite_signals (run_id, key) WHERE key IS NOT NULL;
CREATE INDEX flowlite_signals_pending ON flowlite_signals (run_id, name, id) WHERE consumed_by IS NULL;

-- workflows lists the workflow versions engines have registered.
CREATE TABLE flowlite_workflows (
    name          TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    registered_at INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) STRICT;

-- +goose Down
DROP TABLE flowlite_workflows;
DROP TABLE flowlite_signals;
DROP TABLE flowlite_events;
DROP TABLE flowlite_steps;
DROP TABLE flowlite_runs;
