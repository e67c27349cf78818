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

-- name: WakeSend :exec
-- WakeSend sends, on channel @channel, the wakes of writes that committed
-- (Store.Write): for each element of @runs (a JSON array of objects
-- {"k": kind, "id": run ID}) a wake of that kind with the run's queue and
-- due time, and a ready wake for each queue of @queues (a JSON array of
-- names), and the change feed's wake (last column). It is one statement
-- run outside any transaction block, so its implicit transaction costs
-- one round trip, not four (BEGIN, the statement, COMMIT, and the setting
-- below). Its commit does not wait for
-- its WAL flush (synchronous_commit off for this transaction, which
-- set_config's true makes local to it): a wake is a hint, and the commit
-- holds the lock of the server's notification queue, which every
-- notifying commit waits for, so it should hold it as briefly as it can.
-- The setting applies at the commit, after the whole statement, whatever
-- order its expressions are evaluated in.
SELECT set_config('synchronous_commit', 'off', true),
       (SELECT count(pg_notify(sqlc.arg(channel)::text,
                               json_build_object('k', w.v ->> 'k', 'q', r.queue,
                                                 'r', CASE WHEN octet_length(r.id) <= 1000 THEN r.id END,
                                                 'd', r.run_at)::text))
        FROM jsonb_array_elements(sqlc.arg(runs)::text::jsonb) AS w(v)
        JOIN flowlite.runs AS r ON r.id = w.v ->> 'id'),
       (SELECT count(pg_notify(sqlc.arg(channel)::text, json_build_object('k', 'ready', 'q', q.name)::text))
        FROM jsonb_array_elements_text(sqlc.arg(queues)::text::jsonb) AS q(name)),
       -- The change feed's followers in other processes, on their own
       -- channel (@feed_channel), when @notify_feed says events committed;
       -- the payload is empty: a follower reads from its own position
       -- whatever woke it.
       (SELECT count(pg_notify(sqlc.arg(feed_channel)::text, ''))
        WHERE sqlc.arg(notify_feed)::boolean);
