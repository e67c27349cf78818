-- +goose Up

-- runs_finished serves the cleaner, which deletes finished runs oldest
-- first, one state at a time; unfinished runs are not in it, so it costs
-- nothing until a run finishes.
CREATE INDEX runs_finished ON runs (status, finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- signals_run serves the ON DELETE CASCADE of runs: without it, deleting a
-- run scans every signal, because the other signal indexes are partial.
CREATE INDEX signals_run ON signals (run_id);

-- +goose Down
DROP INDEX signals_run;
DROP INDEX runs_finished;
