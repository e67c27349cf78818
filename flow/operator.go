package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
)

// Event kinds of the operator and handler actions of this file.
const (
	// EventStepSnoozed: a step (a job's handler) snoozed itself; see
	// JobSnooze. Detail: "snoozed for <d>".
	EventStepSnoozed = flowtype.EventStepSnoozed
	// EventRunMadeDue: an operator ran a delayed or backing-off run now;
	// see RunNow. Detail: when it was due.
	EventRunMadeDue = flowtype.EventRunMadeDue
	// EventRunRescheduled: an operator gave a pending run a new due time;
	// see RunAt. Detail: when it is due, and when it was.
	EventRunRescheduled = flowtype.EventRunRescheduled
)

// DeleteRun deletes the finished (completed, failed or cancelled) run
// runID, with its steps, history and signals; a unique key it held is free
// again. It refuses, changing nothing, an unfinished run (ErrConflict, naming
// its state: cancel it first) and the child of an unfinished parent, which
// may still read its outcome (ErrConflict, as PurgeDead keeps it); an
// unknown run is ErrRunNotFound.
func (e *Engine) DeleteRun(ctx context.Context, runID string) error {
	return e.onRun(runID, func(c *engine.Engine) error { return c.DeleteRun(ctx, runID) })
}

// RunNow makes a pending run due now and wakes its queue: a run started or
// enqueued with a delay, or one waiting out the backoff before the next
// attempt of a step (the attempt count does not change). A pending run due
// already is left as it is. It refuses, changing nothing, a finished run
// (ErrRunFinished) and a running, waiting (for a timer, a signal or a
// child), compensating or suspended one (ErrConflict, naming its state); an
// unknown run is ErrRunNotFound.
func (e *Engine) RunNow(ctx context.Context, runID string) error {
	return e.onRun(runID, func(c *engine.Engine) error { return c.RunNow(ctx, runID) })
}

// RunAt gives the pending run runID a new due time, at, earlier or later
// than the one it has: a run started or enqueued with a delay, one waiting
// out the backoff before the next attempt of a step (the attempt count does
// not change), or one due already that no engine claimed yet, which is put
// off until at. The history records an EventRunRescheduled naming both
// times. A time at or before now is RunNow: the run is due now (recorded as
// EventRunMadeDue), and one due already is left as it is. A zero time is an
// error.
//
// It refuses, changing nothing, what RunNow refuses: a finished run
// (ErrRunFinished); a running, waiting (for a timer, a signal or a child,
// whose own records say when it wakes), compensating or suspended one
// (ErrConflict, naming its state); an unknown run is ErrRunNotFound. An
// engine claiming the run between RunAt's read and its write makes it an
// ErrConflict too, so the due time an engine set (a new backoff) is never
// overwritten: read the run again and decide.
func (e *Engine) RunAt(ctx context.Context, runID string, at time.Time) error {
	return e.onRun(runID, func(c *engine.Engine) error { return c.RunAt(ctx, runID, at) })
}

// JobSnooze returns the error a job's Handler (or any step's Run) returns to
// be called again after d without using an attempt: the run is released and
// due again in d, the attempt count (Attempt(ctx)) stays as it was, so
// MaxAttempts and the backoff are unaffected, and the history records a
// step_snoozed event ("snoozed for d"). d = 0 runs it again at once. A
// negative d is a plain error naming it, which fails the attempt as any
// error does.
//
// A job may snooze any number of times; a Deadline on the run still
// cancels it once passed.
func JobSnooze(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("job snooze: negative duration %s", d)
	}
	return &engine.SnoozeError{Delay: d}
}

// JobCancel returns the error a job's Handler (or any step's Run) returns to
// cancel its own run: the step fails for good with err as the reason, the
// run's completed steps are compensated, and the run ends cancelled, not
// failed (it is no dead letter). Result returns a *CancelledError whose
// Reason names the step and err. err may be nil.
func JobCancel(err error) error {
	return &engine.CancelRunError{Err: err}
}
