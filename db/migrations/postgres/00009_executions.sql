-- +goose Up

-- Continue-as-new (issue 24): see the SQLite migration 00020_executions.sql
-- for what each column means. The row is written only by RunContinue's
-- transaction, which holds the run's row (the fenced update of the run
-- comes first), so two writers of one run's row take turns on it.
CREATE TABLE flowlite.executions (
    run_id       TEXT   NOT NULL PRIMARY KEY REFERENCES flowlite.runs (id) ON DELETE CASCADE,
    execution    BIGINT NOT NULL CHECK (execution >= 2),
    continued_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE flowlite.executions;
