-- +goose Up

-- Views for people who open the database with psql: pending work by queue,
-- step durations (average and p95) and failure rates. The engine never
-- reads them; they cover the rows still stored (the cleaner deletes
-- finished runs after Config.Retention). Times are Unix milliseconds, as
-- in the tables; durations are milliseconds. The SQLite migration creates
-- the same views with the same columns and figures; see it for what each
-- column means.

CREATE VIEW flowlite.pending_by_queue AS
WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms)
SELECT r.queue AS queue,
       COALESCE((SELECT q.paused FROM flowlite.queues AS q WHERE q.name = r.queue), false) AS paused,
       count(*) FILTER (WHERE r.status = 'pending') AS pending,
       count(*) FILTER (WHERE r.status = 'pending' AND r.run_at <= now.ms) AS due,
       count(*) FILTER (WHERE r.status = 'running') AS running,
       count(*) FILTER (WHERE r.status = 'waiting') AS waiting,
       count(*) FILTER (WHERE r.status = 'compensating') AS compensating,
       min(r.run_at) FILTER (WHERE r.status = 'pending' AND r.run_at <= now.ms) AS oldest_due_at,
       now.ms - min(r.run_at) FILTER (WHERE r.status = 'pending' AND r.run_at <= now.ms) AS oldest_due_age_ms
FROM flowlite.runs AS r, now
WHERE r.status IN ('pending', 'running', 'waiting', 'compensating')
GROUP BY r.queue, now.ms;

-- p95 is percentile_disc(0.95): the nearest-rank percentile, the same
-- figure as SQLite's row_number computation.
CREATE VIEW flowlite.step_durations AS
SELECT r.workflow AS workflow, s.name AS step, count(*) AS completed,
       round(avg(s.finished_at - s.started_at))::bigint AS avg_ms,
       percentile_disc(0.95) WITHIN GROUP (ORDER BY s.finished_at - s.started_at) AS p95_ms,
       max(s.finished_at - s.started_at) AS max_ms
FROM flowlite.steps AS s
JOIN flowlite.runs AS r ON r.id = s.run_id
WHERE s.status = 'completed' AND s.finished_at IS NOT NULL
  AND s.name NOT LIKE 'flow.%' AND s.name NOT LIKE '%/flow.%'
GROUP BY r.workflow, s.name;

CREATE VIEW flowlite.failure_rates AS
SELECT r.workflow AS workflow,
       count(*) FILTER (WHERE r.status IN ('completed', 'failed', 'cancelled')) AS finished,
       count(*) FILTER (WHERE r.status = 'completed') AS completed,
       count(*) FILTER (WHERE r.status = 'failed') AS failed,
       count(*) FILTER (WHERE r.status = 'cancelled') AS cancelled,
       count(*) FILTER (WHERE r.status = 'suspended') AS suspended,
       round(count(*) FILTER (WHERE r.status = 'failed')::numeric
             / nullif(count(*) FILTER (WHERE r.status IN ('completed', 'failed', 'cancelled')), 0), 4)::float8 AS failure_rate,
       coalesce(sum((SELECT count(*) FROM flowlite.steps AS s WHERE s.run_id = r.id AND s.status = 'failed')), 0)::bigint AS step_failures,
       coalesce(sum((SELECT count(*) FROM flowlite.steps AS s WHERE s.run_id = r.id AND s.attempts > 1)), 0)::bigint AS retried_steps
FROM flowlite.runs AS r
GROUP BY r.workflow;

-- +goose Down
DROP VIEW flowlite.failure_rates;
DROP VIEW flowlite.step_durations;
DROP VIEW flowlite.pending_by_queue;
