-- +goose Up

-- Start options a run keeps for its whole life (issue 27):
--   timeout        how long after its first claim the run may take, in ms
--                  (flow.StartOptions.Timeout); the first claim turns it
--                  into the deadline. NULL: none.
--   detached       1 for a child that its parent's cancellation does not
--                  reach (flow.ChildOptions.Detached).
--   context_values the values propagated from the starter into every step,
--                  child and compensation of the run (flow.WithValues), as
--                  a JSON object of strings. NULL: none.
ALTER TABLE flowlite_runs ADD COLUMN timeout INTEGER;
ALTER TABLE flowlite_runs ADD COLUMN detached INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowlite_runs ADD COLUMN context_values BLOB;

-- +goose Down
ALTER TABLE flowlite_runs DROP COLUMN context_values;
ALTER TABLE flowlite_runs DROP COLUMN detached;
ALTER TABLE flowlite_runs DROP COLUMN timeout;
