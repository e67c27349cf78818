-- +goose Up

-- position is the index of a step call among the calls of its branch (the
-- workflow body or one branch of All/First): the n-th step, wait, child or
-- race the branch asked for. A replay compares each call with the record at
-- its position, so a body that now calls other steps, or the same steps in
-- another order, is stopped instead of taking a new path over an old
-- history. NULL for calls recorded before this migration: they are not
-- checked.
ALTER TABLE flowlite_steps ADD COLUMN position INTEGER;

-- A step that failed for good keeps the shape of its error, not only its
-- message, so that a replay hands the workflow body the same error:
-- error_code (a flow.Error's Code, empty for other errors), whether it was
-- permanent, and the flow.Error's details (JSON).
ALTER TABLE flowlite_steps ADD COLUMN error_code TEXT NOT NULL DEFAULT '';
ALTER TABLE flowlite_steps ADD COLUMN error_permanent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE flowlite_steps ADD COLUMN error_details BLOB;

-- +goose Down
ALTER TABLE flowlite_steps DROP COLUMN error_details;
ALTER TABLE flowlite_steps DROP COLUMN error_permanent;
ALTER TABLE flowlite_steps DROP COLUMN error_code;
ALTER TABLE flowlite_steps DROP COLUMN position;
