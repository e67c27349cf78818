-- +goose Up

-- Debounce and throttle of starts (issue 21, item 5). debounces names, per
-- workflow and debounce key, the run the key's starts last debounced into:
--   run_id    the debounced run: while it is pending and was never claimed
--             (fence 0), a start with the key replaces its input and moves
--             its due time (Replace) or is dropped (Drop); once claimed,
--             cancelled or deleted, the next start with the key starts a
--             new run and takes the row over
--   first_at  when the run's first debounced start happened (Unix ms): its
--             due time never moves past first_at + max_delay
--   max_delay the run's bound on how long starts may postpone it (ms, 0:
--             none), fixed by the start that made the run
-- The primary key makes one row per key; SQLite's writer serializes the
-- read of the row and its update. Deleting the run (retention, DeleteRun)
-- deletes its row, so the table holds only keys whose run still exists.
CREATE TABLE flowlite_debounces (
    workflow  TEXT    NOT NULL,
    key       TEXT    NOT NULL,
    run_id    TEXT    NOT NULL REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    first_at  INTEGER NOT NULL,
    max_delay INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, key)
) STRICT, WITHOUT ROWID;

-- debounces_run serves the cascade of a run's deletion.
CREATE INDEX flowlite_debounces_run ON flowlite_debounces (run_id);

-- +goose Down
DROP INDEX flowlite_debounces_run;
DROP TABLE flowlite_debounces;
