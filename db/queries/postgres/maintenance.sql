-- name: RunDeleteFinished :execrows
-- RunDeleteFinished deletes up to @max_runs runs in state @status (completed,
-- failed or cancelled) that finished before @finished_before, oldest first.
-- Their steps, events and signals go with them (ON DELETE CASCADE); their
-- children, if any, lose their parent_id (ON DELETE SET NULL). A finished
-- child of an unfinished parent is kept: the parent may still read its
-- outcome. The outer WHERE repeats the state test, so the statement can
-- never delete an unfinished run whatever @status says. A run with an event
-- after @keep_after is kept: the change feed's consumers have not read it
-- yet (Config.Feed.Retention wait; the caller passes the largest int64
-- otherwise). The runs are picked FOR UPDATE SKIP LOCKED: the cleaners of
-- several engines on one database delete separate batches at once, none
-- waiting on another's row locks (nor on a run another transaction holds,
-- such as a dead letter being requeued), where they would all pick the
-- same oldest runs and wait on the first for its whole batch.
DELETE FROM flowlite.runs AS d
WHERE d.status IN ('completed', 'failed', 'cancelled')
  AND d.id IN (
    SELECT r.id FROM flowlite.runs AS r
    WHERE r.status IN ('completed', 'failed', 'cancelled')
      AND r.status = sqlc.arg(status)::text
      AND r.finished_at < sqlc.arg(finished_before)::bigint
      AND NOT EXISTS (
        SELECT 1 FROM flowlite.events AS e
        WHERE e.run_id = r.id AND e.id > sqlc.arg(keep_after)::bigint
      )
      AND (r.parent_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM flowlite.runs AS p
        WHERE p.id = r.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
      ))
    ORDER BY r.finished_at
    LIMIT sqlc.arg(max_runs)::bigint
    FOR UPDATE OF r SKIP LOCKED
  );

-- name: PayloadInvalidList :many
-- PayloadInvalidList names up to @max_rows stored values that are not JSON
-- text, which flowlite always writes: run, step and schedule inputs, run and
-- step outputs, signal payloads. (flowlite.json_valid is defined by the
-- migrations: PostgreSQL 15 has no IS JSON.)
SELECT ('run ' || id)::text AS place, 'input'::text AS field
FROM flowlite.runs WHERE NOT flowlite.json_valid(input)
UNION ALL
SELECT ('run ' || id)::text, 'output'::text
FROM flowlite.runs WHERE output IS NOT NULL AND NOT flowlite.json_valid(output)
UNION ALL
SELECT ('run ' || run_id || ' step ' || name || '#' || occurrence)::text, 'input'::text
FROM flowlite.steps WHERE NOT flowlite.json_valid(input)
UNION ALL
SELECT ('run ' || run_id || ' step ' || name || '#' || occurrence)::text, 'output'::text
FROM flowlite.steps WHERE output IS NOT NULL AND NOT flowlite.json_valid(output)
UNION ALL
SELECT ('run ' || run_id || ' signal ' || name || ' (id ' || id || ')')::text, 'payload'::text
FROM flowlite.signals WHERE NOT flowlite.json_valid(payload)
UNION ALL
SELECT ('schedule ' || name)::text, 'input'::text
FROM flowlite.schedules WHERE NOT flowlite.json_valid(input)
LIMIT sqlc.arg(max_rows)::bigint;

-- name: SessionIsolation :one
-- SessionIsolation is the isolation level a statement outside an explicit
-- transaction runs at on this session: the server's, database's or role's
-- default_transaction_isolation, unless the connection set its own.
SELECT current_setting('default_transaction_isolation')::text AS isolation;

-- name: ReplicaStatus :one
-- ReplicaStatus says whether the server is a standby in recovery (a read
-- replica), whether it has replayed all the WAL it received, and how long
-- ago the last transaction it replayed committed on the primary, in ms
-- (0 when it is no standby or has replayed none). That age is the lag
-- while the standby is behind; on a standby that caught up with an idle
-- primary it only says how long the primary has been idle.
SELECT pg_is_in_recovery() AS in_recovery,
       COALESCE(pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn(), true)::boolean AS caught_up,
       COALESCE((EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::bigint, 0)::bigint AS replay_age_ms;
