-- Reads of `flowlite copy` (internal/store/storecopy), which copies a whole
-- database to PostgreSQL. They run in one read transaction, so the copy is
-- a consistent snapshot. Rows come in the order they were written (rowid),
-- which the target keeps in its own sequence columns.

-- name: CopyRunList :many
SELECT * FROM flowlite_runs ORDER BY rowid;

-- name: CopyStepList :many
SELECT * FROM flowlite_steps ORDER BY rowid;

-- name: CopyEventList :many
SELECT * FROM flowlite_events ORDER BY id;

-- name: CopySignalList :many
SELECT * FROM flowlite_signals ORDER BY id;

-- name: CopyScheduleList :many
SELECT * FROM flowlite_schedules ORDER BY name;

-- name: CopyUniqueHoldList :many
SELECT * FROM flowlite_unique_holds ORDER BY workflow, key;

-- name: CopyQueueList :many
SELECT * FROM flowlite_queues ORDER BY name;

-- name: CopyWorkflowList :many
SELECT * FROM flowlite_workflows ORDER BY name, version;

-- name: CopyDefinitionList :many
SELECT * FROM flowlite_definitions ORDER BY name, version;

-- name: CopyDebounceList :many
SELECT * FROM flowlite_debounces ORDER BY workflow, key;

-- name: CopyCounts :one
-- CopyCounts counts the rows of every table the copy carries.
SELECT
    (SELECT count(*) FROM flowlite_runs) AS runs,
    (SELECT count(*) FROM flowlite_steps) AS steps,
    (SELECT count(*) FROM flowlite_events) AS events,
    (SELECT count(*) FROM flowlite_signals) AS signals,
    (SELECT count(*) FROM flowlite_schedules) AS schedules,
    (SELECT count(*) FROM flowlite_unique_holds) AS unique_holds,
    (SELECT count(*) FROM flowlite_queues) AS queues,
    (SELECT count(*) FROM flowlite_workflows) AS workflows,
    (SELECT count(*) FROM flowlite_definitions) AS definitions,
    (SELECT count(*) FROM flowlite_debounces) AS debounces,
    (SELECT count(*) FROM flowlite_executions) AS executions,
    (SELECT count(*) FROM flowlite_streams) AS streams,
    (SELECT count(*) FROM flowlite_stream_chunks) AS stream_chunks;
