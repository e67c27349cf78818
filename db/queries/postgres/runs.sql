-- The queries of runs on PostgreSQL, with the names of db/queries/sqlite.
-- Every statement runs under READ COMMITTED, where each statement sees what
-- was committed when it started and no global write lock orders writers:
-- the comments say which row lock or constraint stands in for SQLite's
-- BEGIN IMMEDIATE where the engine relies on one.

-- name: RunInsert :execrows
-- RunInsert inserts a pending run. It inserts nothing when the ID is taken,
-- when a run of the workflow holding the same non-null @unique_key exists
-- (runs_unique: an unfinished run, or a finished one in a state its
-- unique_states holds), or when a current hold of that key exists whose
-- holder is in a state the hold counts (unique_holds). A null @unique_key
-- matches no hold. ON CONFLICT DO NOTHING without a target covers the
-- primary key and runs_unique: a concurrent insert of the same ID or key
-- makes this one wait for its outcome, then do nothing if it committed.
-- The hold test reads committed holds only; the adapter takes the key's
-- advisory lock first (UniqueKeyLock), so no hold can commit in between.
INSERT INTO flowlite.runs (id, workflow, version, queue, priority, status, input, run_at, deadline, parent_id, unique_key, unique_states, created_at, updated_at)
SELECT sqlc.arg(id)::text, sqlc.arg(workflow)::text, sqlc.arg(version)::bigint, sqlc.arg(queue)::text,
       sqlc.arg(priority)::bigint, 'pending', sqlc.arg(input)::bytea, sqlc.arg(run_at)::bigint,
       sqlc.narg(deadline)::bigint, sqlc.narg(parent_id)::text, sqlc.narg(unique_key)::text,
       sqlc.arg(unique_states)::bigint, sqlc.arg(created_at)::bigint, sqlc.arg(created_at)::bigint
WHERE NOT EXISTS (
    SELECT 1 FROM flowlite.unique_holds AS h JOIN flowlite.runs AS r ON r.id = h.run_id
    WHERE h.workflow = sqlc.arg(workflow)::text AND h.key = sqlc.narg(unique_key)::text
      AND h.held_until > sqlc.arg(created_at)::bigint
      AND (h.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) <> 0
)
ON CONFLICT DO NOTHING;

-- name: RunStartAlone :execrows
-- RunStartAlone is a whole start of a run with no unique key, in one
-- statement committed on its own: RunInsert and the run_started event
-- (EventAppend), which a start in Write takes four round trips for
-- (BEGIN, the run, its event, COMMIT). It inserts nothing, the event
-- included, when the ID is taken (the caller then starts the run as
-- usual, which reads the run that holds it). The event's WHERE gives the
-- transaction its ID before the event's ID is drawn, as in EventAppend.
WITH ins AS (
    INSERT INTO flowlite.runs (id, workflow, version, queue, priority, status, input, run_at, deadline, parent_id, unique_states, created_at, updated_at)
    VALUES (sqlc.arg(id)::text, sqlc.arg(workflow)::text, sqlc.arg(version)::bigint, sqlc.arg(queue)::text,
            sqlc.arg(priority)::bigint, 'pending', sqlc.arg(input)::bytea, sqlc.arg(run_at)::bigint,
            sqlc.narg(deadline)::bigint, sqlc.narg(parent_id)::text, sqlc.arg(unique_states)::bigint,
            sqlc.arg(created_at)::bigint, sqlc.arg(created_at)::bigint)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
)
INSERT INTO flowlite.events (run_id, at, kind, detail)
SELECT ins.id, sqlc.arg(at)::bigint, sqlc.arg(kind)::text, sqlc.arg(detail)::text
FROM ins
WHERE pg_current_xact_id() IS NOT NULL;

-- name: RunInsertMany :many
-- RunInsertMany inserts the pending runs of @runs, a JSON array of objects
-- (id, workflow, version, queue, priority, input in hex, run_at, deadline,
-- parent_id, unique_key, unique_states, created_at; absent keys are null), in array
-- order, and returns the IDs it inserted. Each run is skipped as RunInsert
-- would skip it: a taken ID, a held unique key (runs_unique, which also
-- catches a key two runs of @runs share: the later one is skipped), or a
-- current hold of the key. The adapter takes the advisory locks of the
-- keys first, in a fixed order, as RunInsert takes one.
INSERT INTO flowlite.runs (id, workflow, version, queue, priority, status, input, run_at, deadline, parent_id, unique_key, unique_states, created_at, updated_at)
SELECT j.v ->> 'id', j.v ->> 'workflow', (j.v ->> 'version')::bigint, j.v ->> 'queue', (j.v ->> 'priority')::bigint, 'pending',
       decode(j.v ->> 'input', 'hex'), (j.v ->> 'run_at')::bigint, (j.v ->> 'deadline')::bigint, j.v ->> 'parent_id',
       j.v ->> 'unique_key', (j.v ->> 'unique_states')::bigint, (j.v ->> 'created_at')::bigint, (j.v ->> 'created_at')::bigint
FROM jsonb_array_elements(sqlc.arg(runs)::jsonb) WITH ORDINALITY AS j(v, n)
WHERE j.v ->> 'unique_key' IS NULL OR NOT EXISTS (
    SELECT 1 FROM flowlite.unique_holds AS h JOIN flowlite.runs AS r ON r.id = h.run_id
    WHERE h.workflow = j.v ->> 'workflow' AND h.key = j.v ->> 'unique_key'
      AND h.held_until > (j.v ->> 'created_at')::bigint
      AND (h.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) <> 0
)
ORDER BY j.n
ON CONFLICT DO NOTHING
RETURNING id;

-- name: UniqueKeyLock :exec
-- UniqueKeyLock serializes the transactions that test or take a unique key
-- of a workflow, until they commit: PostgreSQL-only, it stands in for the
-- write lock under which SQLite tests a key's holds and then inserts. The
-- key is a 64-bit hash of the schema, workflow and key (@lock_key, computed
-- by the adapter); a collision of two keys only makes them wait for each
-- other.
SELECT pg_advisory_xact_lock(sqlc.arg(lock_key)::bigint);

-- name: RunGet :one
SELECT * FROM flowlite.runs WHERE id = @id;

-- name: RunGetForUpdate :one
-- RunGetForUpdate is RunGet holding the run's row until the transaction
-- ends, for a write transaction whose next writes depend on what it read
-- (Cancel: does a worker execute the run?). FOR NO KEY UPDATE conflicts
-- with the claims' FOR UPDATE SKIP LOCKED, which skip the run meanwhile; a
-- claim that locked the row first makes it wait for the claim's commit and
-- return the claimed row. It does not block the inserts of the run's steps
-- and events, whose foreign key checks take FOR KEY SHARE.
SELECT * FROM flowlite.runs WHERE id = @id FOR NO KEY UPDATE;

-- name: RunReadyPriorities :many
-- RunReadyPriorities returns the distinct priorities up to @at_most of the
-- unleased runs of a queue that may become claimable (pending, waiting or
-- compensating, due or not), highest first and at most @max_priorities of
-- them: none when the queue is paused. A loose index scan of runs_ready,
-- one seek per priority, so that a claim learns every priority it may
-- need with one statement instead of probing again after each priority
-- (see RunClaim).
WITH RECURSIVE p(priority) AS (
    (SELECT r.priority FROM flowlite.runs AS r
     WHERE r.queue = @queue AND r.lease_owner IS NULL
       AND r.status IN ('pending', 'waiting', 'compensating')
       AND r.priority <= @at_most
     ORDER BY r.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT r.priority FROM flowlite.runs AS r
            WHERE r.queue = @queue AND r.lease_owner IS NULL
              AND r.status IN ('pending', 'waiting', 'compensating')
              AND r.priority < p.priority
            ORDER BY r.priority DESC LIMIT 1)
    FROM p WHERE p.priority IS NOT NULL
)
SELECT p.priority::bigint AS priority FROM p
WHERE p.priority IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM flowlite.queues AS q WHERE q.name = @queue AND q.paused)
LIMIT @max_priorities;

-- name: RunClaim :many
-- RunClaim leases up to @max_runs ready runs of one queue and priority
-- whose workflow version is in @known (a JSON array of "name:version"
-- strings), unless the queue is paused. Like every claim and rescue, it
-- takes only runs created at or after @held_before, and nothing at all
-- unless the server that answers is @server_started: after a failover, the
-- runs that existed before it are held for a lease's length
-- (00013_server_epoch.sql, pgstore/server.go). The inner SELECT walks runs_ready
-- for the due runs, oldest first, and locks them FOR UPDATE SKIP LOCKED:
-- rows another claimer (or a lease check, a rescue) holds are skipped, not
-- waited for, so concurrent claimers split the ready runs between them and
-- never get the same one. A row changed and committed since the statement
-- began is re-read before it is locked and kept only if it still passes
-- the readiness test (PostgreSQL re-checks the WHERE clause of a locking
-- read on the newest version), and no other transaction can change a
-- locked row before this one commits, so the statement is a
-- compare-and-set. started_at keeps the first claim, and a run's timeout
-- (how long it may take from its first claim) becomes its deadline then,
-- or the earlier deadline it had. The selection is a MATERIALIZED CTE,
-- run once: as a plain IN (subquery) the planner may rescan it for each
-- row, and every rescan, skipping the rows this statement already
-- updated, would claim @max_runs more.
--
-- The statement is written so that its one good plan does not depend on
-- the table's statistics, which are missing or stale right after a bulk
-- insert (autovacuum analyzes a minute later at best), and on which a
-- generic plan of the prepared statement cannot rely anyway:
--   - the known versions are a filter of the index scan (= ANY of an array
--     computed once), not a join: a hash join would lose the order of
--     runs_ready, and the planner, believing the queue nearly empty, would
--     then read and sort every ready run of the queue to take @max_runs;
--   - the UPDATE finds its rows by primary key from the picked IDs, and
--     its WHERE clause does not repeat runs_ready's predicate, which
--     would let the planner scan runs_ready instead and compare each of
--     its entries with every picked ID.
-- With those, a claim reads about @max_runs index entries whatever the
-- backlog (EXPLAIN on 10,000 ready runs: 1 ms, against 190-210 ms for the
-- earlier form without statistics, and a scan of the whole table with a
-- generic plan).
WITH picked AS MATERIALIZED (
    SELECT r.id FROM flowlite.runs AS r
    WHERE r.queue = sqlc.arg(queue)::text
      AND r.priority = sqlc.arg(priority)::bigint
      AND r.lease_owner IS NULL
      AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= sqlc.arg(now)::bigint
      AND (r.workflow || ':' || r.version) = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(known)::text::jsonb)))
      AND r.created_at >= sqlc.arg(held_before)::bigint
      AND (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint = sqlc.arg(server_started)::bigint
      AND NOT EXISTS (SELECT 1 FROM flowlite.queues AS q WHERE q.name = sqlc.arg(queue)::text AND q.paused)
    ORDER BY r.run_at, r.seq
    LIMIT sqlc.arg(max_runs)::bigint
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE flowlite.runs AS u
SET lease_owner      = sqlc.arg(owner)::text,
    lease_expires_at = sqlc.arg(lease_expires_at)::bigint,
    fence            = u.fence + 1,
    status           = CASE u.status WHEN 'compensating' THEN u.status ELSE 'running' END,
    started_at       = COALESCE(u.started_at, sqlc.arg(now)::bigint),
    deadline         = CASE WHEN u.timeout IS NOT NULL AND u.started_at IS NULL
                            THEN LEAST(COALESCE(u.deadline, sqlc.arg(now)::bigint + u.timeout), sqlc.arg(now)::bigint + u.timeout)
                            ELSE u.deadline END,
    updated_at       = sqlc.arg(now)::bigint
FROM picked
WHERE u.id = picked.id
  AND u.lease_owner IS NULL
RETURNING u.*;

-- name: RunClaimAndBegin :many
-- RunClaimAndBegin is a whole claim in one statement, for a claim that is
-- a transaction of its own (an implicit one): RunReadyPriorities and
-- RunClaim for every priority in turn, the first attempt of the first step
-- of each run claimed for the first time (StepBeginNewMany), and the
-- events of both, which a claim in Write takes six round trips for (BEGIN,
-- priorities, claim, first attempts, events, COMMIT).
--   - prios walks the queue's ready priorities with RunReadyPriorities'
--     loose index scan. It is read lazily: picked stops pulling from it,
--     and from each priority's runs, once it holds @max_runs runs.
--   - picked takes, priority by priority, the due runs of known versions
--     oldest first, FOR UPDATE SKIP LOCKED, as RunClaim does (see there
--     why the known versions are an array filter and the set MATERIALIZED).
--     A row is locked only when picked pulls it, so no run is locked that
--     the claim does not take.
--   - claimed updates the picked runs, found by primary key through
--     = ANY of their IDs: joined with picked instead, the generic plan of
--     the prepared statement scanned the whole table, the planner taking
--     picked for larger than it is (TestClaimAndBeginReadsOnlyWhatItClaims).
--   - begun inserts the first attempt of @first_steps' step (a JSON array
--     of objects: workflow, version, step, input in hex, lean) for each run the
--     claim leased for the first time (fence 1) that is running, has no
--     cancellation requested and is not past its deadline, as the engine's
--     beginFirstSteps decides for a claim in Write. ON CONFLICT DO NOTHING
--     leaves a step that has a record (none should) to the execution.
--   - lean lists the runs begun whose workflow keeps a lean record
--     (@first_steps' lean): appended leaves out their two events, which
--     reads derive (flow.LeanRecord).
--   - appended appends run_claimed for every run claimed and then
--     step_started for every attempt begun, in claim order.
-- The claim's updated_at, its events and its first attempts are dated
-- @now, or the run's updated_at if that is later: @now is read before the
-- statement (and the look at the server, and the wait for a connection),
-- and a rescue that committed meanwhile dated the run later, so that its
-- history would have read claimed before rescued.
-- It returns the runs claimed, in claim order (priority, then run_at, then
-- seq), each with the name of the step whose first attempt it began, or ''.
WITH RECURSIVE prios(priority) AS (
    (SELECT r.priority FROM flowlite.runs AS r
     WHERE r.queue = sqlc.arg(queue)::text AND r.lease_owner IS NULL
       AND r.status IN ('pending', 'waiting', 'compensating')
     ORDER BY r.priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT r.priority FROM flowlite.runs AS r
            WHERE r.queue = sqlc.arg(queue)::text AND r.lease_owner IS NULL
              AND r.status IN ('pending', 'waiting', 'compensating')
              AND r.priority < prios.priority
            ORDER BY r.priority DESC LIMIT 1)
    FROM prios WHERE prios.priority IS NOT NULL
),
picked AS MATERIALIZED (
    SELECT l.id FROM prios CROSS JOIN LATERAL (
            SELECT r.id FROM flowlite.runs AS r
            WHERE r.queue = sqlc.arg(queue)::text
              AND r.priority = prios.priority
              AND r.lease_owner IS NULL
              AND r.status IN ('pending', 'waiting', 'compensating')
              AND r.run_at <= sqlc.arg(now)::bigint
              AND (r.workflow || ':' || r.version) = ANY (ARRAY(SELECT jsonb_array_elements_text(sqlc.arg(known)::text::jsonb)))
              AND r.created_at >= sqlc.arg(held_before)::bigint
              AND (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint = sqlc.arg(server_started)::bigint
            ORDER BY r.run_at, r.seq
            LIMIT sqlc.arg(max_runs)::bigint
            FOR UPDATE OF r SKIP LOCKED
        ) AS l
    WHERE prios.priority IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM flowlite.queues AS q WHERE q.name = sqlc.arg(queue)::text AND q.paused)
    LIMIT sqlc.arg(max_runs)::bigint
),
claimed AS (
    UPDATE flowlite.runs AS u
    SET lease_owner      = sqlc.arg(owner)::text,
        lease_expires_at = sqlc.arg(lease_expires_at)::bigint,
        fence            = u.fence + 1,
        status           = CASE u.status WHEN 'compensating' THEN u.status ELSE 'running' END,
        started_at       = COALESCE(u.started_at, sqlc.arg(now)::bigint),
        deadline         = CASE WHEN u.timeout IS NOT NULL AND u.started_at IS NULL
                                THEN LEAST(COALESCE(u.deadline, sqlc.arg(now)::bigint + u.timeout), sqlc.arg(now)::bigint + u.timeout)
                                ELSE u.deadline END,
        updated_at       = GREATEST(u.updated_at, sqlc.arg(now)::bigint)
    WHERE u.id = ANY (ARRAY(SELECT picked.id FROM picked))
      AND u.lease_owner IS NULL
    RETURNING u.*
),
begun AS (
    INSERT INTO flowlite.steps (run_id, name, occurrence, status, attempts, input, position, started_at)
    SELECT c.id, f.step, 0, 'running', 1, decode(f.input, 'hex'), 0, c.updated_at
    FROM claimed AS c
    JOIN jsonb_to_recordset(sqlc.arg(first_steps)::jsonb) AS f(workflow text, version bigint, step text, input text)
      ON f.workflow = c.workflow AND f.version = c.version
    WHERE c.fence = 1 AND c.status = 'running' AND NOT c.cancel_requested
      AND (c.deadline IS NULL OR c.deadline <= 0 OR c.deadline > sqlc.arg(now)::bigint)
    ORDER BY c.priority DESC, c.run_at, c.seq
    ON CONFLICT (run_id, name, occurrence) DO NOTHING
    RETURNING run_id, name
),
lean AS (
    -- the runs begun whose workflow keeps a lean record: their claim's two
    -- events are derived on read (the engine's derived.go)
    SELECT b.run_id AS id FROM begun AS b JOIN claimed AS c ON c.id = b.run_id
    JOIN jsonb_to_recordset(sqlc.arg(first_steps)::jsonb) AS f(workflow text, version bigint, lean boolean)
      ON f.workflow = c.workflow AND f.version = c.version
    WHERE f.lean
),
appended AS (
    INSERT INTO flowlite.events (run_id, at, kind, step, occurrence, attempt, detail)
    SELECT e.run_id, e.at, e.kind, e.step, 0, e.attempt, e.detail
    FROM (
        SELECT c.id AS run_id, 'run_claimed' AS kind, '' AS step, 0 AS attempt,
               'fence ' || c.fence || ', ' || c.lease_owner AS detail, 0 AS part, c.priority, c.run_at, c.seq,
               c.updated_at AS at
        FROM claimed AS c
        WHERE c.id <> ALL (ARRAY(SELECT lean.id FROM lean))
        UNION ALL
        SELECT b.run_id, 'step_started', b.name, 1, '', 1, c.priority, c.run_at, c.seq, c.updated_at
        FROM begun AS b JOIN claimed AS c ON c.id = b.run_id
        WHERE c.id <> ALL (ARRAY(SELECT lean.id FROM lean))
    ) AS e
    WHERE pg_current_xact_id() IS NOT NULL -- as in EventAppend: the feed's holdback
    ORDER BY e.part, e.priority DESC, e.run_at, e.seq
)
SELECT c.id, c.seq, c.workflow, c.version, c.queue, c.priority, c.status, c.input, c.output,
       c.error, c.reason, c.cancel_requested, c.run_at, c.deadline, c.parent_id, c.wake_seq,
       c.fence, c.lease_owner, c.lease_expires_at, c.created_at, c.updated_at, c.finished_at,
       c.unique_key, c.unique_states, c.started_at, c.requeued_from, c.requeued_as,
       c.timeout, c.detached, c.context_values, c.concurrency_key,
       COALESCE(b.name, '')::text AS begun
FROM claimed AS c LEFT JOIN begun AS b ON b.run_id = c.id
ORDER BY c.priority DESC, c.run_at, c.seq;

-- name: RunHeartbeat :one
-- RunHeartbeat extends the lease of a run and proves the caller still owns
-- it: no row means the lease was lost. The UPDATE holds the row's lock until
-- the commit, so the proof lasts as long as RunLeaseCheck's.
UPDATE flowlite.runs
SET lease_expires_at = @lease_expires_at, updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence
RETURNING cancel_requested;

-- name: RunLeaseCheck :one
-- RunLeaseCheck proves the caller still owns the lease of a run, without
-- writing, until the transaction commits: no row means the lease was lost.
-- SQLite keeps the answer true through its write lock; here the SELECT
-- locks the run's row FOR NO KEY UPDATE, which conflicts with the lock
-- every UPDATE of the row takes (a claim, a rescue, another fenced write),
-- so no other transaction can take the lease before this one commits; the
-- claim and the rescuer skip the row instead of waiting. It is not FOR
-- SHARE: two writes of one run that both checked the lease and then update
-- the row would each wait for the other's share lock (a deadlock). Nor FOR
-- UPDATE, which would also block the inserts of steps, events and signals
-- of the run by other transactions (their foreign key checks take FOR KEY
-- SHARE, which only FOR UPDATE conflicts with).
SELECT cancel_requested FROM flowlite.runs
WHERE id = @id AND lease_owner = @owner AND fence = @fence
FOR NO KEY UPDATE;

-- name: RunStartCompensating :execrows
UPDATE flowlite.runs
SET status = 'compensating', error = @error, updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence AND status IN ('running', 'compensating');

-- name: RunRelease :execrows
-- RunRelease gives the lease back and makes the run claimable again at
-- @run_at, e.g. while it waits for the next attempt of a step (@status
-- 'pending') or for a timer, signal or child (@status 'waiting'). If the run
-- was woken since the worker read @wake_seq, it is due at once instead.
UPDATE flowlite.runs
SET lease_owner = NULL, lease_expires_at = NULL,
    status = CASE status WHEN 'running' THEN sqlc.arg(status)::text ELSE status END,
    run_at = CASE WHEN wake_seq <> sqlc.arg(wake_seq)::bigint
                  THEN LEAST(sqlc.arg(run_at)::bigint, sqlc.arg(now)::bigint)
                  ELSE sqlc.arg(run_at)::bigint END,
    updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND lease_owner = sqlc.arg(owner)::text AND fence = sqlc.arg(fence)::bigint;

-- name: RunWake :execrows
-- RunWake tells an unfinished run that something it may wait for happened:
-- an unleased run becomes due now; a leased one learns it through wake_seq
-- when it releases. The UPDATE waits for a transaction holding the row
-- (RunLeaseCheck), so the wake is never lost between a worker's read of
-- wake_seq and its release.
UPDATE flowlite.runs
SET wake_seq = wake_seq + 1,
    run_at = CASE WHEN lease_owner IS NULL THEN LEAST(run_at, sqlc.arg(now)::bigint) ELSE run_at END,
    updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND status IN ('pending', 'running', 'waiting', 'compensating');

-- name: RunCancelChildren :many
-- RunCancelChildren requests cancellation of the unfinished children of a
-- run, but for detached ones, which outlive their parent's cancellation.
UPDATE flowlite.runs
SET cancel_requested = true, wake_seq = wake_seq + 1,
    run_at = CASE WHEN lease_owner IS NULL THEN LEAST(run_at, sqlc.arg(now)::bigint) ELSE run_at END,
    updated_at = sqlc.arg(now)::bigint
WHERE parent_id = sqlc.arg(parent_id)::text AND NOT cancel_requested AND NOT detached
  AND status IN ('pending', 'running', 'waiting', 'compensating')
RETURNING id;

-- name: RunFinish :execrows
-- RunFinish records the outcome of a run and releases its lease.
UPDATE flowlite.runs
SET status = @status, output = @output, error = @error, reason = @reason,
    lease_owner = NULL, lease_expires_at = NULL,
    finished_at = @finished_at, updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence;

-- name: SeqScanOffForTx :exec
-- SeqScanOffForTx turns sequential scans off for the rest of the
-- transaction (set_config's true makes it local to it). RunFinishMany
-- updates the steps of the runs it finishes through a join that the
-- planner, with the stale statistics of a table that grew since its last
-- analyze, may run as a sequential scan of every step: 2 ms a batch on a
-- 20,000-step table, and growing with it, against a few index probes.
SELECT set_config('enable_seqscan', 'off', true);

-- name: RunFinishMany :many
-- RunFinishMany records the outcomes of the runs of @finishes, a JSON array
-- of objects (id, owner, fence, status, output in hex, error, reason,
-- finished_at, now; absent keys are null), each with at most one step
-- checkpoint (step, occurrence, step_output in hex, compensable,
-- completed_at), in one statement: each run is finished as RunFinish
-- finishes it, under its own lease, and its step is completed as
-- StepComplete completes it only when its run was. It returns the runs it
-- finished, with the number of steps completed for each, so that the
-- adapter tells a lost lease (the run is missing) from a step that was not
-- running (its count is 0). Data-modifying CTEs share one snapshot, so
-- the steps CTE reads the finished runs from done's RETURNING.
WITH item AS (
    SELECT j.v FROM jsonb_array_elements(sqlc.arg(finishes)::jsonb) AS j(v)
), done AS (
    UPDATE flowlite.runs AS r
    SET status = item.v ->> 'status', output = decode(item.v ->> 'output', 'hex'),
        error = item.v ->> 'error', reason = item.v ->> 'reason',
        lease_owner = NULL, lease_expires_at = NULL,
        finished_at = (item.v ->> 'finished_at')::bigint, updated_at = (item.v ->> 'now')::bigint
    FROM item
    WHERE r.id = ANY (ARRAY(SELECT i.v ->> 'id' FROM item AS i))
      AND r.id = item.v ->> 'id' AND r.lease_owner = item.v ->> 'owner' AND r.fence = (item.v ->> 'fence')::bigint
    RETURNING r.id
), completed AS (
    UPDATE flowlite.steps AS t
    SET status = 'completed', output = decode(item.v ->> 'step_output', 'hex'), error = '',
        completed_seq = (SELECT COALESCE(MAX(s.completed_seq), 0) + 1 FROM flowlite.steps AS s WHERE s.run_id = t.run_id),
        compensable = (item.v ->> 'compensable')::boolean,
        finished_at = (item.v ->> 'completed_at')::bigint
    FROM item
    WHERE t.run_id = ANY (ARRAY(SELECT id FROM done))
      AND item.v ->> 'step' IS NOT NULL
      AND t.run_id = item.v ->> 'id' AND t.name = item.v ->> 'step' AND t.occurrence = (item.v ->> 'occurrence')::bigint
      AND t.status IN ('running', 'waiting')
    RETURNING t.run_id
)
SELECT done.id::text AS id, count(completed.run_id)::bigint AS steps
FROM done LEFT JOIN completed ON completed.run_id = done.id
GROUP BY done.id;

-- name: RunListExpiredLeases :many
-- RunListExpiredLeases lists up to @max_runs runs whose lease expired, with
-- the expired deadline, which RunRescue cannot return (RETURNING sees the
-- updated row). It locks them FOR NO KEY UPDATE SKIP LOCKED: a run whose
-- row a worker holds (its lease check or heartbeat is in flight) is left
-- for the next round, and the rows it returns cannot change before
-- RunRescue, in the same transaction, updates them.
SELECT id, lease_expires_at, fence FROM flowlite.runs
WHERE lease_owner IS NOT NULL
  AND lease_expires_at < @now
  AND status IN ('running', 'compensating')
  AND created_at >= sqlc.arg(held_before)::bigint
  AND (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint = sqlc.arg(server_started)::bigint
LIMIT @max_runs
FOR NO KEY UPDATE SKIP LOCKED;

-- name: RunRescue :many
-- RunRescue re-queues the runs of @ids (a JSON array) whose lease expired.
-- The status and lease tests are in the WHERE clause, so a run completed or
-- renewed in the meantime is untouched.
UPDATE flowlite.runs
SET lease_owner = NULL, lease_expires_at = NULL,
    status = CASE status WHEN 'running' THEN 'pending' ELSE status END,
    updated_at = sqlc.arg(now)::bigint
WHERE lease_owner IS NOT NULL
  AND lease_expires_at < sqlc.arg(now)::bigint
  AND status IN ('running', 'compensating')
  AND id IN (SELECT jsonb_array_elements_text(sqlc.arg(ids)::text::jsonb))
RETURNING id, fence;

-- name: RunRequestCancel :execrows
UPDATE flowlite.runs
SET cancel_requested = true, wake_seq = wake_seq + 1,
    run_at = CASE WHEN lease_owner IS NULL THEN LEAST(run_at, sqlc.arg(now)::bigint) ELSE run_at END,
    updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND status IN ('pending', 'running', 'waiting', 'compensating');

-- name: RunCancelIdle :execrows
-- RunCancelIdle cancels at once a run that no worker executes (pending or
-- waiting, unleased) and that has nothing to undo: no completed step with a
-- compensation. It reports 0 rows for any other run.
UPDATE flowlite.runs
SET status = 'cancelled', cancel_requested = true, error = sqlc.arg(error)::text, wake_seq = wake_seq + 1,
    finished_at = sqlc.arg(now)::bigint, updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND lease_owner IS NULL AND status IN ('pending', 'waiting')
  AND NOT EXISTS (
    SELECT 1 FROM flowlite.steps AS s
    WHERE s.run_id = sqlc.arg(id)::text AND s.status = 'completed' AND s.compensable
  );

-- name: RunCancelToUnwind :execrows
-- RunCancelToUnwind moves a run that no worker executes (pending or
-- waiting, unleased) to compensating, due now, with its cancellation
-- requested: the next engine to claim it runs its compensations and ends it
-- cancelled. Arm the compensations (StepCompensationArm) in the same
-- transaction.
UPDATE flowlite.runs
SET status = 'compensating', cancel_requested = true, error = sqlc.arg(error)::text, wake_seq = wake_seq + 1,
    run_at = LEAST(run_at, sqlc.arg(now)::bigint), updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND lease_owner IS NULL AND status IN ('pending', 'waiting');

-- name: RunSetStatus :execrows
-- RunSetStatus moves an unleased run from @expected to @status; operators use
-- it to resume or cancel a suspended run.
UPDATE flowlite.runs
SET status = @status, reason = @reason, run_at = @run_at, finished_at = @finished_at, updated_at = @now
WHERE id = @id AND status = sqlc.arg(expected)::text AND lease_owner IS NULL;

-- name: RunCountUnrunnable :many
-- RunCountUnrunnable counts ready runs whose workflow version is not in
-- @known, i.e. runs this process cannot execute and leaves alone.
SELECT workflow, version, count(*) AS runs
FROM flowlite.runs
WHERE lease_owner IS NULL
  AND status IN ('pending', 'waiting', 'compensating')
  AND (workflow || ':' || version) NOT IN (SELECT jsonb_array_elements_text(sqlc.arg(known)::text::jsonb))
GROUP BY workflow, version
ORDER BY workflow, version;

-- name: RunList :many
-- RunList lists runs, newest first, matching every filter that is not
-- empty: @id_prefix starts the ID; @error_text is in the error or the
-- reason, ignoring ASCII case (lower() of the database's collation); the
-- top-level field @input_field of the input (a JSON object) has
-- @input_value as its text (->>: a string's own text, a number's digits,
-- true, false; a JSON null is 'null' as on SQLite).
SELECT * FROM flowlite.runs
WHERE (sqlc.arg(status)::text = '' OR status = sqlc.arg(status)::text)
  AND (sqlc.arg(workflow)::text = '' OR workflow = sqlc.arg(workflow)::text)
  AND (sqlc.arg(queue)::text = '' OR queue = sqlc.arg(queue)::text)
  AND (sqlc.arg(created_since)::bigint = 0 OR created_at >= sqlc.arg(created_since)::bigint)
  AND (sqlc.arg(created_before)::bigint = 0 OR created_at < sqlc.arg(created_before)::bigint)
  AND (sqlc.arg(id_prefix)::text = '' OR starts_with(id, sqlc.arg(id_prefix)::text))
  AND (sqlc.arg(error_text)::text = '' OR strpos(lower(error), lower(sqlc.arg(error_text)::text)) > 0
       OR strpos(lower(reason), lower(sqlc.arg(error_text)::text)) > 0)
  AND (sqlc.arg(input_field)::text = '' OR (
    CASE WHEN jsonb_typeof(convert_from(input, 'UTF8')::jsonb) = 'object'
         THEN COALESCE(convert_from(input, 'UTF8')::jsonb ->> sqlc.arg(input_field)::text,
                       CASE WHEN convert_from(input, 'UTF8')::jsonb ? sqlc.arg(input_field)::text THEN 'null' END)
    END) = sqlc.arg(input_value)::text)
ORDER BY created_at DESC, id
LIMIT sqlc.arg(max_runs)::bigint;

-- name: RunCountByStatus :many
SELECT status, count(*) AS runs FROM flowlite.runs GROUP BY status ORDER BY status;

-- name: RunDeleteOne :execrows
-- RunDeleteOne deletes the finished run @id, with its steps, events,
-- signals and holds (ON DELETE CASCADE), unless it is the child of an
-- unfinished parent, which may still read its outcome.
DELETE FROM flowlite.runs AS d
WHERE d.id = @id AND d.status IN ('completed', 'failed', 'cancelled')
  AND (d.parent_id IS NULL OR NOT EXISTS (
    SELECT 1 FROM flowlite.runs AS p
    WHERE p.id = d.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
  ));

-- name: RunMakeDue :execrows
-- RunMakeDue makes the pending, unleased run @id due at @now: a delayed run,
-- or one waiting out a retry backoff. It changes nothing for any other run,
-- or one due already.
UPDATE flowlite.runs SET run_at = sqlc.arg(now)::bigint, updated_at = sqlc.arg(now)::bigint
WHERE id = sqlc.arg(id)::text AND status = 'pending' AND lease_owner IS NULL AND run_at > sqlc.arg(now)::bigint;

-- name: RunBulkSavepoint :exec
-- RunBulkSavepoint marks where a bulk insert by COPY (pgstore/bulk.go)
-- begins: a COPY that meets a taken ID fails as a whole, and rolling back
-- to the mark undoes it alone, leaving the rest of the transaction.
SAVEPOINT flowlite_bulk;

-- name: RunBulkRelease :exec
-- RunBulkRelease forgets the mark of a COPY that succeeded.
RELEASE SAVEPOINT flowlite_bulk;

-- name: RunBulkRollback :exec
-- RunBulkRollback undoes a COPY that failed, back to its mark.
ROLLBACK TO SAVEPOINT flowlite_bulk;
