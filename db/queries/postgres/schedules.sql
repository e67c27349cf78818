-- name: ScheduleUpsert :exec
-- ScheduleUpsert creates a schedule or updates it in place. An update keeps
-- the pause state and the last slot; it keeps next_at too unless the spec
-- changed, so that every process may declare its schedules at start-up
-- without moving or skipping a due slot. Concurrent upserts of one name
-- are settled by the primary key: the second waits, then updates.
INSERT INTO flowlite.schedules AS s (name, workflow, version, queue, priority, input, spec, catch_up, paused, next_at, last_slot, created_at, updated_at)
VALUES (@name, @workflow, @version, @queue, @priority, @input, @spec, @catch_up, false, @next_at, 0, @now, @now)
ON CONFLICT (name) DO UPDATE
SET workflow   = excluded.workflow,
    version    = excluded.version,
    queue      = excluded.queue,
    priority   = excluded.priority,
    input      = excluded.input,
    catch_up   = excluded.catch_up,
    next_at    = CASE WHEN s.spec = excluded.spec THEN s.next_at ELSE excluded.next_at END,
    spec       = excluded.spec,
    updated_at = excluded.updated_at;

-- name: ScheduleGet :one
SELECT * FROM flowlite.schedules WHERE name = @name;

-- name: ScheduleList :many
SELECT * FROM flowlite.schedules ORDER BY name;

-- name: ScheduleListDue :many
-- ScheduleListDue lists up to @max_schedules unpaused schedules whose next
-- slot has come, the most overdue first. It locks nothing: several
-- engines may list the same slot, and ScheduleAdvance decides which one
-- starts it.
SELECT * FROM flowlite.schedules
WHERE NOT paused AND next_at <= sqlc.arg(now)::bigint
ORDER BY next_at, name
LIMIT sqlc.arg(max_schedules)::bigint;

-- name: ScheduleNextDue :many
-- ScheduleNextDue returns the earliest next slot of the unpaused schedules
-- (no row when there is none), so the scheduler can skip a write
-- transaction when nothing is due.
SELECT next_at FROM flowlite.schedules
WHERE NOT paused
ORDER BY next_at
LIMIT 1;

-- name: ScheduleAdvance :execrows
-- ScheduleAdvance moves the next slot of an unpaused schedule forward, as a
-- compare-and-set on the next slot its caller read: no row changes when
-- another engine advanced it first or the schedule was paused. It is one
-- UPDATE, never a read and a write: an engine advancing the same slot
-- concurrently waits for this row's lock, then re-evaluates the WHERE
-- clause against the committed row (READ COMMITTED's re-check), finds
-- next_at moved and changes nothing, so exactly one engine starts the slot.
UPDATE flowlite.schedules
SET next_at = sqlc.arg(next_at)::bigint, last_slot = sqlc.arg(last_slot)::bigint, updated_at = sqlc.arg(now)::bigint
WHERE name = sqlc.arg(name)::text AND next_at = sqlc.arg(expected_next_at)::bigint AND NOT paused;

-- name: ScheduleSetPaused :execrows
UPDATE flowlite.schedules
SET paused = @paused, updated_at = @now
WHERE name = @name;

-- name: ScheduleDelete :execrows
DELETE FROM flowlite.schedules WHERE name = @name;
