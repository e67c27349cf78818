-- name: HistoryPartition :exec
-- HistoryPartition turns partitioned history on with a span of @span_ms,
-- or sets the span of the partitions made from now on
-- (00014_history_partitions.sql).
SELECT flowlite.history_partition(sqlc.arg(span_ms)::bigint, sqlc.arg(now_ms)::bigint);

-- name: HistorySpan :one
-- HistorySpan returns the span of partitioned history; no row: it is off.
SELECT span_ms FROM flowlite.history_partitioning WHERE id = 1;

-- name: HistoryPartitionsEnsure :one
-- HistoryPartitionsEnsure makes the partitions of the spans up to three
-- past @now_ms, and returns how many it made.
SELECT flowlite.history_partitions_ensure(sqlc.arg(now_ms)::bigint)::integer AS made;

-- name: HistoryPartitionsDrop :one
-- HistoryPartitionsDrop drops up to @max_partitions partitions of events
-- whose every run can go, with those runs.
SELECT d.partitions::integer AS partitions, d.runs::bigint AS runs
FROM flowlite.history_partitions_drop(
    sqlc.arg(completed_before)::bigint, sqlc.arg(failed_before)::bigint, sqlc.arg(cancelled_before)::bigint,
    sqlc.arg(wait_for_feed)::boolean, sqlc.arg(max_partitions)::integer) AS d;

-- name: HistoryPartitionList :many
-- HistoryPartitionList returns the range partitions of events, oldest
-- first, with their size in bytes, indexes included.
SELECT h.name, h.lo, h.hi,
       coalesce(pg_total_relation_size(to_regclass('flowlite.' || h.name)), 0)::bigint AS bytes
FROM flowlite.history_partitions AS h
ORDER BY h.hi;
