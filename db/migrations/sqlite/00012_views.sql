-- +goose Up

-- Views for people who open the file with sqlite3: pending work by queue,
-- step durations (average and p95) and failure rates. The engine never
-- reads them; they cover the rows still stored (the cleaner deletes
-- finished runs after Config.Retention). Times are Unix milliseconds, as
-- in the tables; durations are milliseconds. The same views, with the same
-- columns and figures, exist on PostgreSQL.

-- pending_by_queue counts the unfinished runs of each queue by state. due
-- counts the pending runs whose time has come (run_at <= now): the backlog
-- a worker would claim now; pending - due are delayed or backing off.
-- oldest_due_age_ms is how long the oldest of them has been due.
CREATE VIEW flowlite_pending_by_queue AS
WITH now AS (SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) AS ms)
SELECT r.queue AS queue,
       COALESCE((SELECT q.paused FROM flowlite_queues AS q WHERE q.name = r.queue), 0) AS paused,
       SUM(r.status = 'pending') AS pending,
       SUM(r.status = 'pending' AND r.run_at <= now.ms) AS due,
       SUM(r.status = 'running') AS running,
       SUM(r.status = 'waiting') AS waiting,
       SUM(r.status = 'compensating') AS compensating,
       MIN(CASE WHEN r.status = 'pending' AND r.run_at <= now.ms THEN r.run_at END) AS oldest_due_at,
       now.ms - MIN(CASE WHEN r.status = 'pending' AND r.run_at <= now.ms THEN r.run_at END) AS oldest_due_age_ms
FROM flowlite_runs AS r, now
WHERE r.status IN ('pending', 'running', 'waiting', 'compensating')
GROUP BY r.queue;

-- step_durations gives, per workflow and step, how long completed steps
-- took from their first attempt's start to their completion (retries and
-- backoffs included): the count, average (rounded), nearest-rank p95 and
-- maximum. SQLite has no percentile function: the p95 is the smallest
-- duration whose ordinal (row_number over the durations sorted) reaches 95%
-- of the count. A step called in a branch of flow.All or flow.First keeps
-- its branch prefix (all0.1/charge). Durable waits (flow.sleep,
-- flow.receive:…, children) are not steps and are left out.
CREATE VIEW flowlite_step_durations AS
WITH d AS (
    SELECT r.workflow AS workflow, s.name AS step, s.finished_at - s.started_at AS ms,
           ROW_NUMBER() OVER (PARTITION BY r.workflow, s.name ORDER BY s.finished_at - s.started_at) AS ordinal,
           COUNT(*) OVER (PARTITION BY r.workflow, s.name) AS n
    FROM flowlite_steps AS s
    JOIN flowlite_runs AS r ON r.id = s.run_id
    WHERE s.status = 'completed' AND s.finished_at IS NOT NULL
      AND s.name NOT LIKE 'flow.%' AND s.name NOT LIKE '%/flow.%'
)
SELECT workflow, step, n AS completed,
       CAST(ROUND(AVG(ms)) AS INTEGER) AS avg_ms,
       MIN(CASE WHEN ordinal * 100 >= n * 95 THEN ms END) AS p95_ms,
       MAX(ms) AS max_ms
FROM d
GROUP BY workflow, step, n;

-- failure_rates gives, per workflow, the finished runs by outcome and the
-- share that failed (failed / finished, 0 to 1, four decimals). A
-- suspended run has not finished and is counted apart. step_failures
-- counts the step calls that failed for good, retried_steps the calls
-- that needed more than one attempt.
CREATE VIEW flowlite_failure_rates AS
SELECT r.workflow AS workflow,
       SUM(r.status IN ('completed', 'failed', 'cancelled')) AS finished,
       SUM(r.status = 'completed') AS completed,
       SUM(r.status = 'failed') AS failed,
       SUM(r.status = 'cancelled') AS cancelled,
       SUM(r.status = 'suspended') AS suspended,
       CASE WHEN SUM(r.status IN ('completed', 'failed', 'cancelled')) = 0 THEN NULL
            ELSE ROUND(1.0 * SUM(r.status = 'failed') / SUM(r.status IN ('completed', 'failed', 'cancelled')), 4)
       END AS failure_rate,
       COALESCE(SUM((SELECT COUNT(*) FROM flowlite_steps AS s WHERE s.run_id = r.id AND s.status = 'failed')), 0) AS step_failures,
       COALESCE(SUM((SELECT COUNT(*) FROM flowlite_steps AS s WHERE s.run_id = r.id AND s.attempts > 1)), 0) AS retried_steps
FROM flowlite_runs AS r
GROUP BY r.workflow;

-- +goose Down
DROP VIEW flowlite_failure_rates;
DROP VIEW flowlite_step_durations;
DROP VIEW flowlite_pending_by_queue;
