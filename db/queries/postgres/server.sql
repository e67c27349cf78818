-- name: ServerStarted :one
-- ServerStarted names the server that answers: its postmaster's start, in
-- microseconds. A promoted standby, or a restarted server, answers with
-- another.
SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint AS server;

-- name: ServerObserve :one
-- ServerObserve records the server that answers as the schema's, and
-- returns it with when an engine first saw it (see 00013_server_epoch.sql):
-- @now when this call is the first to see it since another server, 0 for
-- the first server the schema ever knew. It writes only on a change.
WITH cur AS (
    SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint AS server
),
changed AS (
    INSERT INTO flowlite.server_epoch AS e (id, server_started, seen_at)
    SELECT 1, cur.server, 0 FROM cur
    ON CONFLICT (id) DO UPDATE SET server_started = EXCLUDED.server_started, seen_at = sqlc.arg(now)::bigint
    WHERE e.server_started <> EXCLUDED.server_started
    RETURNING e.server_started, e.seen_at
)
SELECT cur.server AS server_started,
       coalesce((SELECT c.seen_at FROM changed AS c),
                (SELECT e.seen_at FROM flowlite.server_epoch AS e WHERE e.id = 1 AND e.server_started = cur.server),
                0)::bigint AS seen_at
FROM cur;
