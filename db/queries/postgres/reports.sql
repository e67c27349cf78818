-- name: EngineReportUpsert :exec
-- EngineReportUpsert writes an engine's report, replacing its previous one.
INSERT INTO flowlite.engine_reports (owner, host, pid, started_at, reported_at, metrics, queues, live_until, stopped_at)
VALUES (@owner, @host, @pid, @started_at, @reported_at, @metrics, @queues, @live_until, @stopped_at)
ON CONFLICT (owner) DO UPDATE SET
    host        = excluded.host,
    pid         = excluded.pid,
    started_at  = excluded.started_at,
    reported_at = excluded.reported_at,
    metrics     = excluded.metrics,
    queues      = excluded.queues,
    live_until  = excluded.live_until,
    stopped_at  = excluded.stopped_at;

-- name: EngineReportList :many
-- EngineReportList returns every engine's report, oldest engine first.
SELECT owner, host, pid, started_at, reported_at, metrics, queues, live_until, stopped_at
FROM flowlite.engine_reports
ORDER BY started_at, owner;

-- name: EngineReportDeleteBefore :execrows
-- EngineReportDeleteBefore deletes the reports last written before
-- @reported_before.
DELETE FROM flowlite.engine_reports WHERE reported_at < @reported_before;

-- name: EngineReportDeleteStoppedBefore :execrows
-- EngineReportDeleteStoppedBefore deletes the reports of engines that
-- stopped before @stopped_before (a stopped engine writes no more reports).
DELETE FROM flowlite.engine_reports WHERE stopped_at > 0 AND stopped_at < @stopped_before;

-- name: CheckpointRecord :exec
-- CheckpointRecord replaces the record of the last checkpoint.
INSERT INTO flowlite.checkpoints (id, at, owner, mode, wal_bytes, busy, error)
VALUES (1, @at, @owner, @mode, @wal_bytes, @busy, @error)
ON CONFLICT (id) DO UPDATE SET
    at        = excluded.at,
    owner     = excluded.owner,
    mode      = excluded.mode,
    wal_bytes = excluded.wal_bytes,
    busy      = excluded.busy,
    error     = excluded.error;

-- name: CheckpointLast :many
-- CheckpointLast returns the record of the last checkpoint: no row when no
-- checkpoint was recorded.
SELECT at, owner, mode, wal_bytes, busy, error
FROM flowlite.checkpoints WHERE id = 1;
