-- name: WakeRuns :exec
-- WakeRuns notifies @kind on channel @channel for each of the runs in @ids
-- (a JSON array of run IDs), reading their queue and due time as this
-- transaction sees them. pg_notify is transactional: the notification is
-- delivered when the transaction commits, never if it rolls back. The
-- payload stays far under NOTIFY's 8000-byte limit, whose excess would
-- fail the write: queue names are at most 200 bytes, and a run ID longer
-- than 1000 (the caller chooses it) is left out, the queue being enough.
SELECT pg_notify(sqlc.arg(channel)::text,
                 json_build_object('k', sqlc.arg(kind)::text, 'q', queue,
                                   'r', CASE WHEN octet_length(id) <= 1000 THEN id END,
                                   'd', run_at)::text)
FROM flowlite.runs
WHERE id IN (SELECT jsonb_array_elements_text(sqlc.arg(ids)::text::jsonb));

-- name: WakeQueue :exec
-- WakeQueue notifies on channel @channel that queue @queue may have ready
-- runs (it was resumed).
SELECT pg_notify(sqlc.arg(channel)::text, json_build_object('k', 'ready', 'q', sqlc.arg(queue)::text)::text);

-- name: WakeAsyncCommit :exec
-- WakeAsyncCommit lets the transaction that only sends wakes after their
-- writes committed (Store.Write) commit without waiting for its WAL
-- flush: a wake is a hint, and its commit holds the lock of the server's
-- notification queue, which every notifying commit waits for, so it
-- should hold it as briefly as it can.
SELECT set_config('synchronous_commit', 'off', true);

-- name: WakeFeed :exec
-- WakeFeed notifies on channel @channel (the schema's feed channel, not
-- the engines' wake channel) that events committed, for the change feed's
-- followers in other processes. The payload is empty: a follower reads
-- the feed from its own position whatever woke it.
SELECT pg_notify(sqlc.arg(channel)::text, '');
