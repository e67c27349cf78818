-- name: SignalSend :execrows
-- SignalSend stores a signal for a run; a second signal with the same
-- non-null key is ignored (signals_key; a concurrent send of the key waits
-- for this one's outcome, then does nothing if it committed).
INSERT INTO flowlite.signals (run_id, name, payload, key, sent_at)
VALUES (@run_id, @name, @payload, @key, @sent_at)
ON CONFLICT (run_id, key) WHERE key IS NOT NULL DO NOTHING;

-- name: SignalNext :one
-- SignalNext returns the oldest signal of that name the run has not
-- received. It takes no lock of its own: the engine calls it only in a
-- transaction whose RunLeaseCheck holds the run's row, so no second worker
-- reads the same signal before SignalConsume commits, and SignalConsume is
-- a compare-and-set anyway.
SELECT * FROM flowlite.signals
WHERE run_id = @run_id AND name = @name AND consumed_by IS NULL
ORDER BY id
LIMIT 1;

-- name: SignalConsume :execrows
UPDATE flowlite.signals SET consumed_by = @consumed_by WHERE id = @id AND consumed_by IS NULL;

-- name: SignalList :many
SELECT * FROM flowlite.signals WHERE run_id = @run_id ORDER BY id;

-- name: SignalReject :many
-- SignalReject marks the signal a wait received as rejected instead: its
-- payload does not decode into the type the run expects. It returns the
-- IDs of the signals it marked.
UPDATE flowlite.signals SET consumed_by = sqlc.arg(rejected_by)::text
WHERE run_id = sqlc.arg(run_id)::text AND consumed_by = sqlc.arg(consumed_by)::text
RETURNING id;
