package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Schedule errors.
var (
	// ErrScheduleNotFound is returned by PauseSchedule, ResumeSchedule,
	// DeleteSchedule and LookupSchedule for a name no schedule has.
	ErrScheduleNotFound = flowtype.ErrScheduleNotFound
	// ErrBadSpec is returned by Schedule for a cron spec that does not parse
	// or has no time in the next five years; the message names the spec.
	ErrBadSpec = flowtype.ErrBadSpec
)

// CatchUp says what a schedule does about slots it missed (slots more than
// ScheduleGrace late, or due while the schedule was paused). See
// [flowtype.CatchUp].
type CatchUp = flowtype.CatchUp

// Catch-up policies.
const (
	// CatchUpOne (the default) starts one run, for the most recent missed
	// slot, and skips the others.
	CatchUpOne = flowtype.CatchUpOne
	// CatchUpAll starts a run for every missed slot, oldest first, at most
	// MaxCatchUpPerTick per transaction (the rest follow at once in the next).
	CatchUpAll = flowtype.CatchUpAll
	// CatchUpNone skips every missed slot.
	CatchUpNone = flowtype.CatchUpNone
)

// ScheduleGrace is how late a slot may start and still count as on time
// rather than missed.
const ScheduleGrace = engine.ScheduleGrace

// MaxCatchUpPerTick bounds how many runs a schedule catching up starts in
// one transaction.
const MaxCatchUpPerTick = engine.MaxScheduleSlotsPerTick

// ScheduleOptions tune a schedule. A nil *ScheduleOptions means the
// defaults.
type ScheduleOptions struct {
	// Queue the runs wait in; default DefaultQueue.
	Queue string
	// Priority of the runs; default 0.
	Priority int
	// CatchUp is the policy for missed slots; default CatchUpOne.
	CatchUp CatchUp
}

// ScheduleInfo is a schedule as recorded.
type ScheduleInfo struct {
	Name     string
	Workflow string
	Version  int
	Queue    string
	Priority int
	Input    json.RawMessage
	Spec     string
	CatchUp  CatchUp
	Paused   bool
	// NextAt is the next slot not yet handled (it may be past while the
	// schedule is paused or catching up); zero when the spec has no further
	// time.
	NextAt time.Time
	// LastSlot is the most recent slot a run was started for; zero for none.
	LastSlot  time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Schedule makes wf start with input in at every time of the cron spec,
// under the unique name. It creates the schedule, or updates the one of
// that name in place: an update keeps it paused if it was, and keeps its
// next slot unless the spec changed, so every process may declare its
// schedules at start-up.
//
// spec is a cron expression in UTC: five fields (minute hour day-of-month
// month day-of-week, e.g. "30 2 * * *"), or six with seconds first (e.g.
// "*/10 * * * * *"), or a descriptor (@hourly, @daily, @weekly, @monthly,
// @yearly, @every 90s). Prefix "CRON_TZ=Europe/Paris " for another time
// zone. A spec that does not parse is an error wrapping ErrBadSpec and
// changes nothing.
//
// Engines that were started run the schedule: each slot starts exactly one
// run, however many engines share the database, with the run ID
// ScheduledRunID(name, slot). The workflow need not be registered with this
// engine; its runs wait for an engine that registers it.
func Schedule[In, Out any](ctx context.Context, e *Engine, name, spec string, wf Workflow[In, Out], in In, opts *ScheduleOptions) error {
	if opts == nil {
		opts = &ScheduleOptions{}
	}
	if wf.Version < 0 {
		return fmt.Errorf("schedule %s: workflow %q has negative version %d", name, wf.Name, wf.Version)
	}
	input, err := codec.Encode(in)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", name, err)
	}
	// SaveSchedule checks the names, the queue and the input's size.
	return e.route.forSchedule(name).core.SaveSchedule(ctx, engine.ScheduleParams{
		Name: name, Workflow: workflowKey(wf.Name, wf.version()), Queue: opts.Queue, Priority: opts.Priority,
		Input: input, Spec: spec, CatchUp: opts.CatchUp,
	})
}

// ScheduledRunID returns the ID of the run the schedule name starts for
// its slot at slot.
func ScheduledRunID(name string, slot time.Time) string {
	return engine.ScheduleRunID(name, slot.UnixMilli())
}

// PauseSchedule stops a schedule from starting runs until ResumeSchedule.
// Pausing a paused schedule does nothing; an unknown name is
// ErrScheduleNotFound.
func (e *Engine) PauseSchedule(ctx context.Context, name string) error {
	return e.route.forSchedule(name).core.PauseSchedule(ctx, name)
}

// ResumeSchedule lets a paused schedule start runs again. The slots that
// came due while it was paused are missed: its CatchUp policy decides at
// once which of them start (by default the most recent one). Resuming a
// schedule that is not paused does nothing; an unknown name is
// ErrScheduleNotFound.
func (e *Engine) ResumeSchedule(ctx context.Context, name string) error {
	return e.route.forSchedule(name).core.ResumeSchedule(ctx, name)
}

// DeleteSchedule deletes a schedule; the runs it started are kept. An
// unknown name is ErrScheduleNotFound.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) error {
	return e.route.forSchedule(name).core.DeleteSchedule(ctx, name)
}

// LookupSchedule returns the schedule name, or ErrScheduleNotFound.
func (e *Engine) LookupSchedule(ctx context.Context, name string) (ScheduleInfo, error) {
	s, err := e.route.forSchedule(name).core.Schedule(ctx, name)
	if err != nil {
		return ScheduleInfo{}, err
	}
	return scheduleInfo(s), nil
}

// Schedules lists the schedules by name.
func (e *Engine) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	lists, err := each(ctx, e, func(ctx context.Context, inner *Engine) ([]store.Schedule, error) {
		return inner.core.Schedules(ctx)
	})
	if err != nil {
		return nil, err
	}
	list := mergeSorted(lists, 0, func(a, b store.Schedule) int { return strings.Compare(a.Name, b.Name) })
	out := make([]ScheduleInfo, len(list))
	for i, s := range list {
		out[i] = scheduleInfo(s)
	}
	return out, nil
}

func scheduleInfo(s store.Schedule) ScheduleInfo {
	info := ScheduleInfo{
		Name: s.Name, Workflow: s.Workflow.Name, Version: s.Workflow.Version, Queue: s.Queue,
		Priority: s.Priority, Input: raw(s.Input), Spec: s.Spec, CatchUp: s.CatchUp, Paused: s.Paused,
		LastSlot: millis(s.LastSlot), CreatedAt: millis(s.CreatedAt), UpdatedAt: millis(s.UpdatedAt),
	}
	if s.NextAt != engine.NeverMs {
		info.NextAt = millis(s.NextAt)
	}
	return info
}
