-- +goose Up

-- runs_finished serves the cleaner, which deletes finished runs oldest
-- first, one state at a time; unfinished runs are not in it, so it costs
-- nothing until a run finishes.
CREATE INDEX flowlite_runs_finished ON flowlite_runs (status, finished_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- signals_run serves the ON DELETE CASCADE of runs: without it, deleting a
-- run scans every signal, because the other signal indexes are partial.
CREATE INDEX flowlite_signals_run ON flowlite_signals (run_id);

-- +goose Down
DROP INDEX flowlite_signals_run;
DROP INDEX flowlite_runs_finished;
