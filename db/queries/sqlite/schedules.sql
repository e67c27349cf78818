-- name: ScheduleUpsert :exec
-- ScheduleUpsert creates a schedule or updates it in place. An update keeps
-- the pause state and the last slot; it keeps next_at too unless the spec
-- changed, so that every process may declare its schedules at start-up
-- without moving or skipping a due slot.
INSERT INTO flowlite_schedules (name, workflow, version, queue, priority, input, spec, catch_up, paused, next_at, last_slot, created_at, updated_at)
VALUES (@name, @workflow, @version, @queue, @priority, @input, @spec, @catch_up, 0, @next_at, 0, @now, @now)
ON CONFLICT (name) DO UPDATE
SET workflow   = excluded.workflow,
    version    = excluded.version,
    queue      = excluded.queue,
    priority   = excluded.priority,
    input      = excluded.input,
    catch_up   = excluded.catch_up,
    next_at    = CASE WHEN flowlite_schedules.spec = excluded.spec THEN flowlite_schedules.next_at ELSE excluded.next_at END,
    spec       = excluded.spec,
    updated_at = excluded.updated_at;

-- name: ScheduleGet :one
SELECT * FROM flowlite_schedules WHERE name = @name;

-- name: ScheduleList :many
SELECT * FROM flowlite_schedules ORDER BY name;

-- name: ScheduleListDue :many
-- ScheduleListDue lists up to @max_schedules unpaused schedules whose next
-- slot has come, the most overdue first.
SELECT * FROM flowlite_schedules
WHERE paused = 0 AND next_at <= @now
ORDER BY next_at, name
LIMIT @max_schedules;

-- name: ScheduleNextDue :many
-- ScheduleNextDue returns the earliest next slot of the unpaused schedules
-- (no row when there is none), so the scheduler can skip a write
-- transaction when nothing is due.
SELECT next_at FROM flowlite_schedules
WHERE paused = 0
ORDER BY next_at
LIMIT 1;

-- name: ScheduleAdvance :execrows
-- ScheduleAdvance moves the next slot of an unpaused schedule forward, as a
-- compare-and-set on the next slot its caller read: no row changes when
-- another engine advanced it first or the schedule was paused.
UPDATE flowlite_schedules
SET next_at = @next_at, last_slot = @last_slot, updated_at = @now
WHERE name = @name AND next_at = @expected_next_at AND paused = 0;

-- name: ScheduleSetPaused :execrows
UPDATE flowlite_schedules
SET paused = @paused, updated_at = @now
WHERE name = @name;

-- name: ScheduleDelete :execrows
DELETE FROM flowlite_schedules WHERE name = @name;
