-- +goose Up

-- Continue-as-new (issue 24): a run whose body returns flow.ContinueAsNew
-- ends its current execution and starts a new one under the same run ID,
-- with a new input and a fresh history. executions numbers a run's
-- executions:
--   run_id       the run; a run without a row is in its first execution
--   execution    the number of its current execution (2 or more)
--   continued_at when its last execution continued as new (Unix ms)
-- The step records of an ended execution are deleted in the transaction
-- that ends it (its continued_as_new event lists them), so a run's replay
-- reads only the current execution's calls however long the run lives.
CREATE TABLE flowlite_executions (
    run_id       TEXT    NOT NULL PRIMARY KEY REFERENCES flowlite_runs (id) ON DELETE CASCADE,
    execution    INTEGER NOT NULL CHECK (execution >= 2),
    continued_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE flowlite_executions;
