-- name: RunInsert :execrows
-- RunInsert inserts a pending run. It inserts nothing when the ID is taken,
-- when a run of the workflow holding the same non-null @unique_key exists
-- (runs_unique: an unfinished run, or a finished one in a state its
-- unique_states holds), or when a current hold of that key exists whose
-- holder is in a state the hold counts (unique_holds). A null @unique_key
-- matches no hold. The SELECT form carries the hold test into the same
-- statement; its WHERE clause also resolves SQLite's parsing ambiguity
-- between a SELECT's join constraint and ON CONFLICT.
INSERT INTO flowlite_runs (id, workflow, version, queue, priority, status, input, run_at, deadline, parent_id, unique_key, unique_states, created_at, updated_at)
SELECT @id, @workflow, @version, @queue, @priority, 'pending', @input, @run_at, @deadline, @parent_id, @unique_key, @unique_states, @created_at, @created_at
WHERE NOT EXISTS (
    SELECT 1 FROM flowlite_unique_holds AS h JOIN flowlite_runs AS r ON r.id = h.run_id
    WHERE h.workflow = @workflow AND h.key = @unique_key AND h.held_until > @created_at
      AND (h.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) != 0
)
ON CONFLICT DO NOTHING;

-- name: RunInsertMany :many
-- RunInsertMany inserts the pending runs of @runs, a JSON array of objects
-- (id, workflow, version, queue, priority, input in hex, run_at, deadline,
-- parent_id, unique_key, unique_states, created_at; absent keys are null), in array
-- order, and returns the IDs it inserted. Each run is skipped as RunInsert
-- would skip it: a taken ID, a held unique key (runs_unique, which also
-- catches a key two runs of @runs share: the later one is skipped), or a
-- current hold of the key. One prepared statement serves any number of
-- runs: its text is parsed once, not once per call or per row.
INSERT INTO flowlite_runs (id, workflow, version, queue, priority, status, input, run_at, deadline, parent_id, unique_key, unique_states, created_at, updated_at)
SELECT j.value ->> 'id', j.value ->> 'workflow', j.value ->> 'version', j.value ->> 'queue', j.value ->> 'priority', 'pending',
       unhex(j.value ->> 'input'), j.value ->> 'run_at', j.value ->> 'deadline', j.value ->> 'parent_id',
       j.value ->> 'unique_key', j.value ->> 'unique_states', j.value ->> 'created_at', j.value ->> 'created_at'
FROM jsonb_each(@runs) AS j
WHERE j.value ->> 'unique_key' IS NULL OR NOT EXISTS (
    SELECT 1 FROM flowlite_unique_holds AS h JOIN flowlite_runs AS r ON r.id = h.run_id
    WHERE h.workflow = j.value ->> 'workflow' AND h.key = j.value ->> 'unique_key' AND h.held_until > j.value ->> 'created_at'
      AND (h.states & (CASE r.status WHEN 'pending' THEN 1 WHEN 'running' THEN 2 WHEN 'waiting' THEN 4
          WHEN 'compensating' THEN 8 WHEN 'suspended' THEN 16 WHEN 'completed' THEN 32
          WHEN 'failed' THEN 64 WHEN 'cancelled' THEN 128 ELSE 0 END)) != 0
)
ORDER BY j.key
ON CONFLICT DO NOTHING
RETURNING id;

-- name: RunGet :one
SELECT * FROM flowlite_runs WHERE id = @id;

-- name: RunGetForUpdate :one
-- RunGetForUpdate is RunGet inside a write transaction whose next writes
-- depend on what it read (Cancel). BEGIN IMMEDIATE already holds the
-- database's write lock, so nothing can change the row before the commit.
SELECT * FROM flowlite_runs WHERE id = @id;

-- name: RunReadyNextPriority :many
-- RunReadyNextPriority returns the highest priority up to @at_most among the
-- unleased runs of a queue that may become claimable (pending, waiting or
-- compensating, due or not): no row when there is none, or when the queue
-- is paused. One seek in runs_ready; the claim goes through the queue one
-- priority at a time with it (see RunClaim).
SELECT r.priority FROM flowlite_runs AS r
WHERE r.queue = @queue
  AND r.lease_owner IS NULL
  AND r.status IN ('pending', 'waiting', 'compensating')
  AND r.priority <= @at_most
  AND NOT EXISTS (SELECT 1 FROM flowlite_queues AS q WHERE q.name = @queue AND q.paused = 1)
ORDER BY r.priority DESC
LIMIT 1;

-- name: RunClaim :many
-- RunClaim leases up to @max_runs ready runs of one queue and priority
-- whose workflow version is in @known (a JSON array of "name:version"
-- strings), unless the queue is paused. With the priority fixed, runs_ready
-- gives the runs due by @now as one range, oldest first, and the inner
-- SELECT reads only those: runs waiting for a later time (sleepers, delayed
-- jobs, retry backoffs), however many, are never read. The outer WHERE
-- repeats the readiness test so the statement stays a compare-and-set; its
-- unary + keeps the planner on the primary key for the selected IDs,
-- instead of scanning every unfinished run through runs_status. Ties go to
-- the run inserted first: rowid ends every entry of runs_ready. started_at
-- keeps the first claim, and a run's timeout (how long it may take from
-- its first claim) becomes its deadline then, or the earlier deadline it
-- had. The limit is a CAST, not a bare @max_runs: SQLite plans a bare
-- parameter LIMIT with the value bound and prepares the statement again
-- whenever that value changes, which a claim of the free slots does on
-- nearly every call (about a quarter of the claim's CPU in
-- BenchmarkDrainJobs).
UPDATE flowlite_runs
SET lease_owner      = @owner,
    lease_expires_at = @lease_expires_at,
    fence            = fence + 1,
    status           = CASE status WHEN 'compensating' THEN status ELSE 'running' END,
    started_at       = COALESCE(started_at, @now),
    deadline         = CASE WHEN timeout IS NOT NULL AND started_at IS NULL
                            THEN MIN(COALESCE(deadline, @now + timeout), @now + timeout)
                            ELSE deadline END,
    updated_at       = @now
WHERE lease_owner IS NULL
  AND +status IN ('pending', 'waiting', 'compensating')
  AND id IN (
    SELECT r.id FROM flowlite_runs AS r
    WHERE r.queue = @queue
      AND r.priority = @priority
      AND r.lease_owner IS NULL
      AND r.status IN ('pending', 'waiting', 'compensating')
      AND r.run_at <= @now
      AND (r.workflow || ':' || r.version) IN (SELECT value FROM json_each(@known))
      AND NOT EXISTS (SELECT 1 FROM flowlite_queues AS q WHERE q.name = @queue AND q.paused = 1)
    ORDER BY r.run_at, rowid
    LIMIT CAST(@max_runs AS INTEGER)
  )
RETURNING *;

-- name: RunHeartbeat :one
-- RunHeartbeat extends the lease of a run and proves the caller still owns
-- it: no row means the lease was lost.
UPDATE flowlite_runs
SET lease_expires_at = @lease_expires_at, updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence
RETURNING cancel_requested;

-- name: RunLeaseCheck :one
-- RunLeaseCheck proves the caller still owns the lease of a run, without
-- writing: inside a write transaction, which holds the database's write
-- lock, the answer stays true until the commit. No row means the lease was
-- lost.
SELECT cancel_requested FROM flowlite_runs
WHERE id = @id AND lease_owner = @owner AND fence = @fence;

-- name: RunStartCompensating :execrows
UPDATE flowlite_runs
SET status = 'compensating', error = @error, updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence AND status IN ('running', 'compensating');

-- name: RunRelease :execrows
-- RunRelease gives the lease back and makes the run claimable again at
-- @run_at, e.g. while it waits for the next attempt of a step (@status
-- 'pending') or for a timer, signal or child (@status 'waiting'). If the run
-- was woken since the worker read @wake_seq, it is due at once instead.
UPDATE flowlite_runs
SET lease_owner = NULL, lease_expires_at = NULL,
    status = CASE status WHEN 'running' THEN @status ELSE status END,
    run_at = CASE WHEN wake_seq != @wake_seq THEN MIN(@run_at, @now) ELSE @run_at END,
    updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence;

-- name: RunWake :execrows
-- RunWake tells an unfinished run that something it may wait for happened:
-- an unleased run becomes due now; a leased one learns it through wake_seq
-- when it releases.
UPDATE flowlite_runs
SET wake_seq = wake_seq + 1,
    run_at = CASE WHEN lease_owner IS NULL THEN MIN(run_at, @now) ELSE run_at END,
    updated_at = @now
WHERE id = @id AND status IN ('pending', 'running', 'waiting', 'compensating');

-- name: RunCancelChildren :many
-- RunCancelChildren requests cancellation of the unfinished children of a
-- run, but for detached ones, which outlive their parent's cancellation.
UPDATE flowlite_runs
SET cancel_requested = 1, wake_seq = wake_seq + 1,
    run_at = CASE WHEN lease_owner IS NULL THEN MIN(run_at, @now) ELSE run_at END,
    updated_at = @now
WHERE parent_id = @parent_id AND cancel_requested = 0 AND detached = 0
  AND status IN ('pending', 'running', 'waiting', 'compensating')
RETURNING id;

-- name: RunFinish :execrows
-- RunFinish records the outcome of a run and releases its lease.
UPDATE flowlite_runs
SET status = @status, output = @output, error = @error, reason = @reason,
    lease_owner = NULL, lease_expires_at = NULL,
    finished_at = @finished_at, updated_at = @now
WHERE id = @id AND lease_owner = @owner AND fence = @fence;

-- name: RunListExpiredLeases :many
-- RunListExpiredLeases lists up to @max_runs runs whose lease expired, with
-- the expired deadline, which RunRescue cannot return: RETURNING sees the
-- updated row, whose lease_expires_at is NULL.
SELECT id, lease_expires_at, fence FROM flowlite_runs
WHERE lease_owner IS NOT NULL
  AND lease_expires_at < @now
  AND status IN ('running', 'compensating')
LIMIT @max_runs;

-- name: RunRescue :many
-- RunRescue re-queues the runs of @ids (a JSON array) whose lease expired.
-- The status and lease tests are in the WHERE clause, so a run completed in
-- the meantime is untouched.
UPDATE flowlite_runs
SET lease_owner = NULL, lease_expires_at = NULL,
    status = CASE status WHEN 'running' THEN 'pending' ELSE status END,
    updated_at = @now
WHERE lease_owner IS NOT NULL
  AND lease_expires_at < @now
  AND status IN ('running', 'compensating')
  AND id IN (SELECT value FROM json_each(@ids))
RETURNING id, fence;

-- name: RunRequestCancel :execrows
UPDATE flowlite_runs
SET cancel_requested = 1, wake_seq = wake_seq + 1,
    run_at = CASE WHEN lease_owner IS NULL THEN MIN(run_at, @now) ELSE run_at END,
    updated_at = @now
WHERE id = @id AND status IN ('pending', 'running', 'waiting', 'compensating');

-- name: RunCancelIdle :execrows
-- RunCancelIdle cancels at once a run that no worker executes (pending or
-- waiting, unleased) and that has nothing to undo: no completed step with a
-- compensation. It reports 0 rows for any other run.
UPDATE flowlite_runs
SET status = 'cancelled', cancel_requested = 1, error = @error, wake_seq = wake_seq + 1,
    finished_at = @now, updated_at = @now
WHERE id = @id AND lease_owner IS NULL AND status IN ('pending', 'waiting')
  AND NOT EXISTS (
    SELECT 1 FROM flowlite_steps
    WHERE flowlite_steps.run_id = @id AND flowlite_steps.status = 'completed' AND flowlite_steps.compensable = 1
  );

-- name: RunCancelToUnwind :execrows
-- RunCancelToUnwind moves a run that no worker executes (pending or
-- waiting, unleased) to compensating, due now, with its cancellation
-- requested: the next engine to claim it runs its compensations and ends it
-- cancelled. Arm the compensations (StepCompensationArm) in the same
-- transaction.
UPDATE flowlite_runs
SET status = 'compensating', cancel_requested = 1, error = @error, wake_seq = wake_seq + 1,
    run_at = MIN(run_at, @now), updated_at = @now
WHERE id = @id AND lease_owner IS NULL AND status IN ('pending', 'waiting');

-- name: RunSetStatus :execrows
-- RunSetStatus moves an unleased run from @expected to @status; operators use
-- it to resume or cancel a suspended run.
UPDATE flowlite_runs
SET status = @status, reason = @reason, run_at = @run_at, finished_at = @finished_at, updated_at = @now
WHERE id = @id AND status = @expected AND lease_owner IS NULL;

-- name: RunCountUnrunnable :many
-- RunCountUnrunnable counts ready runs whose workflow version is not in
-- @known, i.e. runs this process cannot execute and leaves alone.
SELECT workflow, version, count(*) AS runs
FROM flowlite_runs
WHERE lease_owner IS NULL
  AND status IN ('pending', 'waiting', 'compensating')
  AND (workflow || ':' || version) NOT IN (SELECT value FROM json_each(@known))
GROUP BY workflow, version
ORDER BY workflow, version;

-- name: RunList :many
-- RunList lists runs, newest first, matching every filter that is not
-- empty: @id_prefix starts the ID; @error_text is in the error or the
-- reason, ignoring ASCII case; the top-level field @input_field of the
-- input (a JSON object) has @input_value as its text (a string's own
-- text, a number's digits, true, false or null). The caller checks that
-- @input_field holds no quote or backslash, which would escape its path.
SELECT * FROM flowlite_runs
WHERE (@status = '' OR status = @status)
  AND (@workflow = '' OR workflow = @workflow)
  AND (@queue = '' OR queue = @queue)
  AND (@created_since = 0 OR created_at >= @created_since)
  AND (@created_before = 0 OR created_at < @created_before)
  AND (@id_prefix = '' OR substr(id, 1, length(@id_prefix)) = @id_prefix)
  AND (@error_text = '' OR instr(lower(error), lower(@error_text)) > 0 OR instr(lower(reason), lower(@error_text)) > 0)
  AND (@input_field = '' OR (
    CASE json_type(CAST(input AS TEXT), '$."' || @input_field || '"')
      WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' WHEN 'null' THEN 'null'
      ELSE CAST(json_extract(CAST(input AS TEXT), '$."' || @input_field || '"') AS TEXT)
    END) = CAST(@input_value AS TEXT))
ORDER BY created_at DESC, id
LIMIT @max_runs;

-- name: RunCountByStatus :many
SELECT status, count(*) AS runs FROM flowlite_runs GROUP BY status ORDER BY status;

-- name: RunDeleteOne :execrows
-- RunDeleteOne deletes the finished run @id, with its steps, events,
-- signals and holds (ON DELETE CASCADE), unless it is the child of an
-- unfinished parent, which may still read its outcome.
DELETE FROM flowlite_runs
WHERE flowlite_runs.id = @id AND flowlite_runs.status IN ('completed', 'failed', 'cancelled')
  AND (flowlite_runs.parent_id IS NULL OR NOT EXISTS (
    SELECT 1 FROM flowlite_runs AS p
    WHERE p.id = flowlite_runs.parent_id AND p.status NOT IN ('completed', 'failed', 'cancelled')
  ));

-- name: RunMakeDue :execrows
-- RunMakeDue makes the pending, unleased run @id due at @now: a delayed run,
-- or one waiting out a retry backoff. It changes nothing for any other run,
-- or one due already.
UPDATE flowlite_runs SET run_at = @now, updated_at = @now
WHERE id = @id AND status = 'pending' AND lease_owner IS NULL AND run_at > @now;
