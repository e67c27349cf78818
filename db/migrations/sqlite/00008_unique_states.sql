-- +goose Up

-- Unique keys held in chosen states (EnqueueOptions.UniqueStates).
--
-- unique_states is the set of states in which a run holds its unique key
-- for good, as a bit mask: pending 1, running 2, waiting 4, compensating 8,
-- suspended 16, completed 32, failed 64, cancelled 128. Every run with a key
-- holds it while unfinished (31, the default, which keeps what runs_unique
-- meant before); a run may hold it in some finished states too, e.g. 63
-- (all but failed and cancelled, River's default). A run that holds its key
-- in finished states only for a while (a unique period) keeps 31 here and
-- says which finished states count in its hold (unique_holds.states).
ALTER TABLE flowlite_runs ADD COLUMN unique_states INTEGER NOT NULL DEFAULT 31;

-- runs_unique allows at most one run per workflow and unique key in a state
-- its unique_states holds. A requeued dead letter holds nothing: its key
-- passed to the run that requeues it. Since every run holds its key while
-- unfinished, and a finished run never becomes unfinished again, a run only
-- leaves the holding states, never enters them: no update can break the
-- index, only an insert, which does nothing instead (ON CONFLICT DO
-- NOTHING), whichever process attempts it. (Later, Engine.Reset and Revive
-- do move a finished run back to pending: they look for another holder of
-- its key first and refuse, and an update that still meets one fails on
-- this index, changing nothing.)
DROP INDEX flowlite_runs_unique;
CREATE UNIQUE INDEX flowlite_runs_unique ON flowlite_runs (workflow, unique_key)
    WHERE unique_key IS NOT NULL AND requeued_as IS NULL
      AND (unique_states & (CASE status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) != 0;

-- states is the set of states (same bits) in which the holder of a hold
-- keeps the key while the hold is current: 255 (any state) for a hold taken
-- without UniqueStates, as before.
ALTER TABLE flowlite_unique_holds ADD COLUMN states INTEGER NOT NULL DEFAULT 255;

-- +goose Down
ALTER TABLE flowlite_unique_holds DROP COLUMN states;
DROP INDEX flowlite_runs_unique;
CREATE UNIQUE INDEX flowlite_runs_unique ON flowlite_runs (workflow, unique_key)
    WHERE unique_key IS NOT NULL
      AND status IN ('pending', 'running', 'waiting', 'compensating', 'suspended');
ALTER TABLE flowlite_runs DROP COLUMN unique_states;
