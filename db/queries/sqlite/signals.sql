-- name: SignalSend :execrows
-- SignalSend stores a signal for a run; a second signal with the same
-- non-null key is ignored.
INSERT INTO flowlite_signals (run_id, name, payload, key, sent_at)
VALUES (@run_id, @name, @payload, @key, @sent_at)
ON CONFLICT (run_id, key) WHERE key IS NOT NULL DO NOTHING;

-- name: SignalNext :one
-- SignalNext returns the oldest signal of that name the run has not received.
SELECT * FROM flowlite_signals
WHERE run_id = @run_id AND name = @name AND consumed_by IS NULL
ORDER BY id
LIMIT 1;

-- name: SignalConsume :execrows
UPDATE flowlite_signals SET consumed_by = @consumed_by WHERE id = @id AND consumed_by IS NULL;

-- name: SignalList :many
SELECT * FROM flowlite_signals WHERE run_id = @run_id ORDER BY id;

-- name: SignalReject :many
-- SignalReject marks the signal a wait received as rejected instead: its
-- payload does not decode into the type the run expects. It returns the
-- IDs of the signals it marked.
UPDATE flowlite_signals SET consumed_by = @rejected_by
WHERE run_id = @run_id AND consumed_by = @consumed_by
RETURNING id;
