-- +goose Up

-- Start options a run keeps for its whole life (issue 27):
--   timeout        how long after its first claim the run may take, in ms
--                  (flow.StartOptions.Timeout); the first claim turns it
--                  into the deadline. NULL: none.
--   detached       true for a child that its parent's cancellation does not
--                  reach (flow.ChildOptions.Detached).
--   context_values the values propagated from the starter into every step,
--                  child and compensation of the run (flow.WithValues), as
--                  a JSON object of strings. NULL: none.
ALTER TABLE flowlite.runs
    ADD COLUMN timeout        BIGINT,
    ADD COLUMN detached       BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN context_values BYTEA;

-- +goose Down
ALTER TABLE flowlite.runs
    DROP COLUMN context_values,
    DROP COLUMN detached,
    DROP COLUMN timeout;
