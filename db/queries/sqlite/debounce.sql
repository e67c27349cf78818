-- Debounce and throttle of starts (internal/store/debounce.go). The
-- writer's transactions take turns, so the read of a key's row and the
-- writes it decides need no lock of their own.

-- name: DebounceGet :one
-- DebounceGet returns the run a debounce key of a workflow last debounced
-- into, when its first debounced start was, and its maximum delay.
SELECT run_id, first_at, max_delay FROM flowlite_debounces
WHERE workflow = @workflow AND key = @key;

-- name: DebouncePut :exec
-- DebouncePut makes run_id the key's debounced run, first debounced at
-- first_at: a new row, or the key's row taken over from a run that no
-- longer takes starts (claimed, cancelled or deleted).
INSERT INTO flowlite_debounces (workflow, key, run_id, first_at, max_delay)
VALUES (@workflow, @key, @run_id, @first_at, @max_delay)
ON CONFLICT (workflow, key) DO UPDATE SET
    run_id = excluded.run_id, first_at = excluded.first_at, max_delay = excluded.max_delay;

-- name: RunDebounceReplace :execrows
-- RunDebounceReplace gives the debounced run id a new input and due time,
-- while it is pending and was never claimed (fence 0) nor asked to cancel:
-- a compare-and-set, 0 rows when a claim or a cancellation came first.
UPDATE flowlite_runs SET input = @input, run_at = @run_at, updated_at = @now
WHERE id = @id AND status = 'pending' AND lease_owner IS NULL AND fence = 0 AND cancel_requested = 0;
