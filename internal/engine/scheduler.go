package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Cron schedules start runs of a workflow at the slots of a cron spec.
//
// Each slot starts at most one run, however many engines share the
// database: the run ID is derived from the schedule name and the slot
// (ScheduleRunID), and the schedule's next slot moves forward with a
// compare-and-set in the same write transaction that inserts the runs. So an
// engine that lost the race changes nothing, and even a run inserted twice
// would collide on its ID.
//
// Slots are found in UTC unless the spec starts with CRON_TZ=<zone>, so that
// every process computes the same slots whatever its local time zone.
//
// A slot is handled late by design (by up to the scheduler's tick); slots up
// to ScheduleGrace late all start, whatever the catch-up policy. When the
// oldest due slot is more than ScheduleGrace late (no engine ran, or the
// database was unreachable), or when a paused schedule resumes with due
// slots, the schedule is behind and its catch-up policy decides:
// flowtype.CatchUpOne starts one run for the most recent due slot,
// flowtype.CatchUpAll starts one for every due slot (at most
// MaxScheduleSlotsPerTick per transaction, the rest in the next ones), and
// flowtype.CatchUpNone starts none. Either way the schedule then waits for
// its first slot after now.

// ScheduleGrace is how late a slot may be handled and still count as on
// time rather than missed.
const ScheduleGrace = time.Minute

// MaxScheduleSlotsPerTick bounds how many runs the scheduler starts in one
// write transaction, e.g. when CatchUpAll catches up a long downtime.
const MaxScheduleSlotsPerTick = 1000

// scheduleBatch bounds how many due schedules one transaction handles.
const scheduleBatch = 100

// NeverMs is the next slot of a schedule whose spec has no further time.
const NeverMs = int64(math.MaxInt64)

// cronParser accepts 5-field specs (minute first), 6-field specs (second
// first), descriptors such as @hourly and @every 90s, and a CRON_TZ= prefix.
var cronParser = cron.NewParser(
	cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor,
)

// ParseSpec parses a cron spec, or returns an error wrapping
// flowtype.ErrBadSpec.
func ParseSpec(spec string) (cron.Schedule, error) {
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", flowtype.ErrBadSpec, spec, err)
	}
	return s, nil
}

// ScheduleRunID returns the ID of the run a schedule starts for the slot
// at slotMs (Unix milliseconds).
func ScheduleRunID(name string, slotMs int64) string {
	return "sched:" + name + ":" + strconv.FormatInt(slotMs, 10)
}

// ScheduleParams describes a schedule to create or update.
type ScheduleParams struct {
	Name     string
	Workflow flowtype.WorkflowKey
	Queue    string // empty: "default"
	Priority int
	Input    []byte
	Spec     string
	CatchUp  flowtype.CatchUp // empty: flowtype.CatchUpOne
}

// SaveSchedule creates a schedule, whose first slot is the first after now,
// or updates one in place. An update keeps the pause state, and keeps the
// next slot unless the spec changed, so every process may declare its
// schedules at start-up. The workflow need not be registered here: its runs
// wait for an engine that has it.
func (e *Engine) SaveSchedule(ctx context.Context, p ScheduleParams) error {
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.CatchUp == "" {
		p.CatchUp = flowtype.CatchUpOne
	}
	if err := CheckName("schedule", p.Name); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	if err := CheckName("workflow", p.Workflow.Name); err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	if err := CheckName("queue", p.Queue); err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	if err := e.CheckPayload("input", p.Input); err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	switch {
	case !p.CatchUp.Valid():
		return fmt.Errorf("schedule %s: unknown catch-up policy %q", p.Name, p.CatchUp)
	}
	sched, err := ParseSpec(p.Spec)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	now := e.nowMs()
	first := nextSlot(sched, now)
	if first == NeverMs {
		return fmt.Errorf("schedule %s: %w %q: it has no time in the next five years", p.Name, flowtype.ErrBadSpec, p.Spec)
	}
	err = e.store.Write(ctx, func(tx store.Tx) error {
		return tx.ScheduleUpsert(ctx, store.ScheduleUpsertParams{
			Name: p.Name, Workflow: p.Workflow, Queue: p.Queue, Priority: p.Priority, Input: p.Input,
			Spec: p.Spec, CatchUp: p.CatchUp, NextAt: first, Now: now,
		})
	})
	if err != nil {
		return fmt.Errorf("schedule %s: %w", p.Name, err)
	}
	return nil
}

// PauseSchedule stops a schedule from starting runs until it is resumed.
// Pausing a paused schedule does nothing.
func (e *Engine) PauseSchedule(ctx context.Context, name string) error {
	err := e.store.Write(ctx, func(tx store.Tx) error {
		return tx.ScheduleSetPaused(ctx, name, true, e.nowMs())
	})
	return scheduleErr("pause", name, err)
}

// ResumeSchedule lets a paused schedule start runs again. Slots that came
// due while it was paused count as missed: its catch-up policy decides at
// once, in the same transaction, which of them start. Resuming a schedule
// that is not paused does nothing.
func (e *Engine) ResumeSchedule(ctx context.Context, name string) error {
	var queue string
	var started int
	err := e.store.Write(ctx, func(tx store.Tx) error {
		queue, started = "", 0
		s, err := tx.ScheduleGet(ctx, name)
		if err != nil || !s.Paused {
			return err
		}
		now := e.nowMs()
		if err := tx.ScheduleSetPaused(ctx, name, false, now); err != nil {
			return err
		}
		s.Paused, queue = false, s.Queue
		started, _, err = e.fireSchedule(ctx, tx, s, now, true, MaxScheduleSlotsPerTick)
		return err
	})
	if err != nil {
		return scheduleErr("resume", name, err)
	}
	if started > 0 {
		e.Wake(queue)
	}
	return nil
}

// DeleteSchedule deletes a schedule. The runs it started are kept.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) error {
	err := e.store.Write(ctx, func(tx store.Tx) error { return tx.ScheduleDelete(ctx, name) })
	return scheduleErr("delete", name, err)
}

// Schedule returns one schedule, or flowtype.ErrScheduleNotFound.
func (e *Engine) Schedule(ctx context.Context, name string) (store.Schedule, error) {
	s, err := e.store.Reader().ScheduleGet(ctx, name)
	return s, scheduleErr("get", name, err)
}

// Schedules lists the schedules by name.
func (e *Engine) Schedules(ctx context.Context) ([]store.Schedule, error) {
	s, err := e.store.Reader().ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return s, nil
}

// scheduleErr names the schedule in err and turns the store's not-found
// into flowtype.ErrScheduleNotFound.
func scheduleErr(verb, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flowtype.ErrRunNotFound):
		return fmt.Errorf("%s schedule %s: %w", verb, name, flowtype.ErrScheduleNotFound)
	default:
		return fmt.Errorf("%s schedule %s: %w", verb, name, err)
	}
}

// FireSchedules starts the runs of every due slot of every unpaused
// schedule now, and returns how many it started and the earliest slot still
// ahead (ok false when no unpaused schedule has one). The scheduler loop
// calls it every tick; it is safe to call from many engines at once.
func (e *Engine) FireSchedules(ctx context.Context) (started int, nextAt int64, ok bool, err error) {
	for {
		nextAt, ok, err = e.store.Reader().ScheduleNextDue(ctx)
		if err != nil || !ok || nextAt > e.nowMs() {
			return started, nextAt, ok, err
		}
		n, handled, err := e.fireDue(ctx)
		started += n
		if err != nil || handled == 0 {
			// handled is 0 only when another engine raced us to every due
			// schedule; it goes on at the next tick.
			return started, nextAt, ok, err
		}
	}
}

// fireDue handles due schedules in one write transaction and returns how
// many runs it started and how many schedules it moved forward.
func (e *Engine) fireDue(ctx context.Context) (started, handled int, err error) {
	var queues map[string]bool
	err = e.store.Write(ctx, func(tx store.Tx) error {
		started, handled, queues = 0, 0, make(map[string]bool)
		now := e.nowMs()
		due, err := tx.ScheduleListDue(ctx, now, scheduleBatch)
		if err != nil {
			return err
		}
		for _, s := range due {
			budget := MaxScheduleSlotsPerTick - started
			if budget <= 0 {
				break
			}
			n, advanced, err := e.fireSchedule(ctx, tx, s, now, false, budget)
			if err != nil {
				return err
			}
			if advanced {
				handled++
			}
			if n > 0 {
				started += n
				queues[s.Queue] = true
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("start scheduled runs: %w", err)
	}
	for q := range queues {
		e.Wake(q)
	}
	return started, handled, nil
}

// fireSchedule starts the runs of the due slots of s that its catch-up
// policy keeps, at most max, and moves its next slot past them. resumed
// treats every due slot as missed. advanced is false when nothing was due,
// or another engine advanced the schedule in the meantime (it is then left
// alone).
func (e *Engine) fireSchedule(ctx context.Context, tx store.Tx, s store.Schedule, now int64, resumed bool, max int) (started int, advanced bool, err error) {
	if s.NextAt > now {
		return 0, false, nil
	}
	sched, err := ParseSpec(s.Spec)
	if err != nil {
		// Only a database edited by hand gets here: pause the schedule
		// rather than retry it on every tick.
		e.log.Error("schedule paused: its spec does not parse", "schedule", s.Name, "err", err)
		return 0, true, tx.ScheduleSetPaused(ctx, s.Name, true, now)
	}
	slots, next := planSlots(sched, s.NextAt, now, s.CatchUp, resumed, max)
	last := s.LastSlot
	if len(slots) > 0 {
		last = slots[len(slots)-1]
	}
	err = tx.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{
		Name: s.Name, ExpectedNextAt: s.NextAt, NextAt: next, LastSlot: last, Now: now,
	})
	if errors.Is(err, flowtype.ErrConflict) || errors.Is(err, flowtype.ErrRunNotFound) {
		return 0, false, nil // another engine handled these slots, or the schedule went
	}
	if err != nil {
		return 0, false, err
	}
	if len(slots) == 0 || slots[0] != s.NextAt {
		e.log.Info("schedule skipped missed slots per its catch-up policy", "schedule", s.Name,
			"catch_up", s.CatchUp, "from", time.UnixMilli(s.NextAt).UTC(), "started", len(slots))
	}
	for _, slot := range slots {
		ok, err := e.startScheduled(ctx, tx, s, slot, now)
		if err != nil {
			return 0, false, err
		}
		if ok {
			started++
		}
	}
	return started, true, nil
}

// startScheduled inserts the run of one slot, and reports false when a run
// with its ID exists already.
func (e *Engine) startScheduled(ctx context.Context, tx store.Tx, s store.Schedule, slot, now int64) (bool, error) {
	id := ScheduleRunID(s.Name, slot)
	inserted, err := tx.RunInsert(ctx, store.RunInsertParams{
		ID: id, Workflow: s.Workflow, Queue: s.Queue, Priority: s.Priority, Input: s.Input,
		RunAt: min(slot, now), Now: now,
	})
	if err != nil {
		return false, fmt.Errorf("start run %s of schedule %s: %w", id, s.Name, err)
	}
	if !inserted {
		e.log.Warn("scheduled run exists already; slot left alone", "schedule", s.Name, "run", id)
		return false, nil
	}
	err = tx.EventAppend(ctx, store.Event{
		RunID: id, At: now, Kind: flowtype.EventRunStarted,
		Detail: fmt.Sprintf("workflow %s, queue %s, priority %d, schedule %s, slot %s, worker %s",
			s.Workflow, s.Queue, s.Priority, s.Name, time.UnixMilli(slot).UTC().Format(time.RFC3339), e.cfg.WorkerID),
	})
	if err != nil {
		return false, err
	}
	err = tx.EventAppend(ctx, store.Event{
		RunID: id, At: now, Kind: flowtype.EventScheduleFired,
		Detail: fmt.Sprintf("schedule %s, slot %s", s.Name, time.UnixMilli(slot).UTC().Format(time.RFC3339)),
	})
	return err == nil, err
}

// runScheduler starts the runs of due schedule slots every tick: the poll
// interval, at most a second, or earlier when a slot is due sooner.
func (e *Engine) runScheduler(ctx context.Context) {
	interval := min(e.cfg.PollInterval, time.Second)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		wait := interval
		n, nextAt, ok, err := e.FireSchedules(ctx)
		if err == nil {
			e.loopOK("start scheduled runs")
		}
		switch {
		case err != nil && ctx.Err() == nil:
			e.loopFailed("start scheduled runs", "start scheduled runs", err)
		case n > 0:
			e.log.Debug("started scheduled runs", "runs", n)
		}
		if until := nextAt - e.nowMs(); err == nil && ok && until > 0 && until < wait.Milliseconds() {
			wait = time.Duration(until) * time.Millisecond
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// planSlots returns the slots to start among those due from nextAt (a slot)
// until now, and the next slot after them; see the comment at the top of
// this file for the policy.
func planSlots(sched cron.Schedule, nextAt, now int64, policy flowtype.CatchUp, resumed bool, max int) (slots []int64, next int64) {
	if nextAt > now || max <= 0 {
		return nil, nextAt
	}
	behind := resumed || now-nextAt > ScheduleGrace.Milliseconds()
	switch {
	case !behind || policy == flowtype.CatchUpAll:
		t := nextAt
		for t <= now && len(slots) < max {
			slots = append(slots, t)
			t = nextSlot(sched, t)
		}
		return slots, t
	case policy == flowtype.CatchUpNone:
		return nil, nextSlot(sched, latestSlot(sched, nextAt, now))
	default: // flowtype.CatchUpOne
		last := latestSlot(sched, nextAt, now)
		return []int64{last}, nextSlot(sched, last)
	}
}

// nextSlot returns the first slot of sched after ms, or NeverMs.
func nextSlot(sched cron.Schedule, ms int64) int64 {
	t := sched.Next(time.UnixMilli(ms).UTC())
	if t.IsZero() {
		return NeverMs
	}
	return t.UnixMilli()
}

// latestSlot returns the last slot of sched at or before now, given from, a
// slot at or before now. It looks back from now over doubling windows, so a
// long downtime of a frequent schedule costs a few dozen parser calls
// rather than one per missed slot.
func latestSlot(sched cron.Schedule, from, now int64) int64 {
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		// Its slots are from plus multiples of the delay.
		d := every.Delay.Milliseconds()
		return from + (now-from)/d*d
	}
	start := from
	for d := int64(1000); now-d > from; d *= 2 {
		if s := nextSlot(sched, now-d); s <= now {
			start = s
			break
		}
	}
	for {
		n := nextSlot(sched, start)
		if n > now {
			return start
		}
		start = n
	}
}
