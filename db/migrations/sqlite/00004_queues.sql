-- +goose Up

-- Job-queue features: unique runs, dead letters, queue pauses, statistics.

-- unique_key makes a run unique among the unfinished runs of its workflow
-- (see runs_unique). started_at is when the run was first claimed (NULL
-- until then), from which queue statistics measure run durations.
-- requeued_from names the failed run this run re-runs, and requeued_as, on a
-- failed run, the run that re-runs it; both are plain links, not foreign
-- keys, so deleting either run leaves the other as it is.
ALTER TABLE flowlite_runs ADD COLUMN unique_key TEXT;
ALTER TABLE flowlite_runs ADD COLUMN started_at INTEGER;
ALTER TABLE flowlite_runs ADD COLUMN requeued_from TEXT;
ALTER TABLE flowlite_runs ADD COLUMN requeued_as TEXT;

-- runs_unique allows at most one unfinished (pending, running, waiting,
-- compensating or suspended) run per workflow and unique key. It is the
-- one place that enforces it: an insert that would break it does nothing
-- (ON CONFLICT DO NOTHING), whichever process attempts it.
CREATE UNIQUE INDEX flowlite_runs_unique ON flowlite_runs (workflow, unique_key)
    WHERE unique_key IS NOT NULL
      AND status IN ('pending', 'running', 'waiting', 'compensating', 'suspended');

-- runs_dead holds the dead letters (failed runs not requeued) in the order
-- they failed, for listing them and for bulk requeues and purges. status
-- leads so that the planner prefers it to runs_status for them.
CREATE INDEX flowlite_runs_dead ON flowlite_runs (status, finished_at)
    WHERE status = 'failed' AND requeued_as IS NULL;

-- unique_holds keeps a unique key of a workflow taken by a run from
-- taken_at until held_until (Unix ms), even after the run finished: a run
-- started with a unique period takes it. A run may be inserted with a key
-- only while no hold of the key is current, and a hold whose time is up is
-- taken over in place (INSERT … ON CONFLICT DO UPDATE … WHERE held_until <=
-- excluded.taken_at), so the primary key settles races between processes.
CREATE TABLE flowlite_unique_holds (
    workflow   TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    run_id     TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    taken_at   INTEGER NOT NULL,
    held_until INTEGER NOT NULL,
    PRIMARY KEY (workflow, key)
) STRICT;

-- unique_holds_run serves the ON DELETE CASCADE of runs and the move of a
-- hold to the run that requeues its holder.
CREATE INDEX flowlite_unique_holds_run ON flowlite_unique_holds (run_id);

-- queues holds the queues an operator paused (or resumed). A queue without a
-- row is not paused. The claim query of every process reads it, so a pause
-- is honoured everywhere from the next claim on.
CREATE TABLE flowlite_queues (
    name       TEXT    NOT NULL PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;

-- +goose Down
DROP TABLE flowlite_queues;
DROP TABLE flowlite_unique_holds;
DROP INDEX flowlite_runs_dead;
DROP INDEX flowlite_runs_unique;
ALTER TABLE flowlite_runs DROP COLUMN requeued_as;
ALTER TABLE flowlite_runs DROP COLUMN requeued_from;
ALTER TABLE flowlite_runs DROP COLUMN started_at;
ALTER TABLE flowlite_runs DROP COLUMN unique_key;
