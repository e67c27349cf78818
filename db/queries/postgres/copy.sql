-- Writes of `flowlite copy` (internal/store/storecopy), which copies a
-- SQLite database into this schema in one transaction. Rows are inserted in
-- the order they were written on SQLite, so the identity columns (runs.seq,
-- steps.seq, events.id, signals.id) keep their order; the values themselves
-- are new.

-- name: CopyCounts :one
-- CopyCounts counts the rows of every table the copy carries.
SELECT
    (SELECT count(*) FROM flowlite.runs)::bigint AS runs,
    (SELECT count(*) FROM flowlite.steps)::bigint AS steps,
    (SELECT count(*) FROM flowlite.events)::bigint AS events,
    (SELECT count(*) FROM flowlite.signals)::bigint AS signals,
    (SELECT count(*) FROM flowlite.schedules)::bigint AS schedules,
    (SELECT count(*) FROM flowlite.unique_holds)::bigint AS unique_holds,
    (SELECT count(*) FROM flowlite.queues)::bigint AS queues,
    (SELECT count(*) FROM flowlite.workflows)::bigint AS workflows,
    (SELECT count(*) FROM flowlite.definitions)::bigint AS definitions,
    (SELECT count(*) FROM flowlite.debounces)::bigint AS debounces,
    (SELECT count(*) FROM flowlite.executions)::bigint AS executions,
    (SELECT count(*) FROM flowlite.streams)::bigint AS streams,
    (SELECT count(*) FROM flowlite.stream_chunks)::bigint AS stream_chunks;

-- name: CopyRunInsert :exec
-- CopyRunInsert inserts a run without its parent (CopyRunSetParent links it
-- once every run is in).
INSERT INTO flowlite.runs (id, workflow, version, queue, priority, status, input, output, error, reason,
    cancel_requested, run_at, deadline, wake_seq, fence, lease_owner, lease_expires_at,
    created_at, updated_at, finished_at, unique_key, unique_states, started_at, requeued_from, requeued_as,
    timeout, detached, context_values, concurrency_key)
VALUES (@id, @workflow, @version, @queue, @priority, @status, @input, @output, @error, @reason,
    @cancel_requested, @run_at, @deadline, @wake_seq, @fence, @lease_owner, @lease_expires_at,
    @created_at, @updated_at, @finished_at, @unique_key, @unique_states, @started_at, @requeued_from, @requeued_as,
    @timeout, @detached, @context_values, @concurrency_key);

-- name: CopyRunSetParent :execrows
UPDATE flowlite.runs SET parent_id = sqlc.arg(parent_id)::text WHERE id = sqlc.arg(id)::text;

-- name: CopyStepInsert :exec
INSERT INTO flowlite.steps (run_id, name, occurrence, status, attempts, input, output, error, completed_seq,
    compensable, compensation, compensation_attempts, compensation_error, started_at, finished_at,
    position, error_code, error_permanent, error_details)
VALUES (@run_id, @name, @occurrence, @status, @attempts, @input, @output, @error, @completed_seq,
    @compensable, @compensation, @compensation_attempts, @compensation_error, @started_at, @finished_at,
    @position, @error_code, @error_permanent, @error_details);

-- name: CopyEventInsert :exec
INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
VALUES (@run_id, @at, @kind, @step, @occurrence, @attempt, @detail);

-- name: CopySignalInsert :exec
INSERT INTO flowlite.signals (run_id, name, payload, key, sent_at, consumed_by)
VALUES (@run_id, @name, @payload, @key, @sent_at, @consumed_by);

-- name: CopyScheduleInsert :exec
INSERT INTO flowlite.schedules (name, workflow, version, queue, priority, input, spec, catch_up, paused,
    next_at, last_slot, created_at, updated_at)
VALUES (@name, @workflow, @version, @queue, @priority, @input, @spec, @catch_up, @paused,
    @next_at, @last_slot, @created_at, @updated_at);

-- name: CopyUniqueHoldInsert :exec
INSERT INTO flowlite.unique_holds (workflow, key, run_id, taken_at, held_until, states)
VALUES (@workflow, @key, @run_id, @taken_at, @held_until, @states);

-- name: CopyQueueInsert :exec
INSERT INTO flowlite.queues (name, paused, created_at, updated_at)
VALUES (@name, @paused, @created_at, @updated_at);

-- name: CopyWorkflowInsert :exec
INSERT INTO flowlite.workflows (name, version, registered_at)
VALUES (@name, @version, @registered_at);

-- name: CopyDefinitionInsert :exec
INSERT INTO flowlite.definitions (name, version, hash, body, file, created_at, updated_at)
VALUES (@name, @version, @hash, @body, @file, @created_at, @updated_at);

-- name: CopyDebounceInsert :exec
INSERT INTO flowlite.debounces (workflow, key, run_id, first_at, max_delay)
VALUES (@workflow, @key, @run_id, @first_at, @max_delay);
