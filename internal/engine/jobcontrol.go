package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Step bodies that control their own run: a body may return a *SnoozeError
// to be called again later without using an attempt, or a *CancelRunError
// to end its run cancelled. stepFailed hands such errors to jobControl.

// SnoozeError, returned by a step body, releases the run and calls the body
// again after Delay (0: at once), without using an attempt: the attempt
// count, and so the retry policy, are as if this attempt had not happened.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return "snoozed for " + e.Delay.String() }

// CancelRunError, returned by a step body, ends the step's run cancelled,
// not failed: the step fails for good with Err as the reason, the completed
// steps are compensated and the run ends cancelled (no dead letter). Err
// may be nil.
type CancelRunError struct{ Err error }

func (e *CancelRunError) Error() string {
	if e.Err == nil {
		return "run cancelled by its step"
	}
	return e.Err.Error()
}

func (e *CancelRunError) Unwrap() error { return e.Err }

// jobControl handles a failed attempt whose error snoozes the step or
// cancels the run; ok is false for any other error.
func (x *execution) jobControl(rc *RunContext, key store.StepKey, attempt int, bodyErr error) (err error, ok bool) {
	var snooze *SnoozeError
	var cancel *CancelRunError
	switch {
	case errors.As(bodyErr, &snooze):
		return x.snoozeStep(rc, key, attempt, snooze.Delay), true
	case errors.As(bodyErr, &cancel):
		return x.cancelOwnRun(rc, key, attempt, cancel), true
	}
	return nil, false
}

// snoozeStep gives the attempt back and parks the run for d.
func (x *execution) snoozeStep(rc *RunContext, key store.StepKey, attempt int, d time.Duration) error {
	d = max(d, 0)
	detail := "snoozed for " + d.String()
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.StepSnooze(ctx, store.StepSnoozeParams{Key: key, Detail: detail, Now: now}); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventStepSnoozed, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt, Detail: detail})
	})
	if err != nil {
		return rc.Abort(err)
	}
	return rc.park(x.e.nowMs()+d.Milliseconds(), true)
}

// cancelOwnRun fails the step for good and cancels its run, durably (as an
// operator's Cancel does), with the step's reason.
func (x *execution) cancelOwnRun(rc *RunContext, key store.StepKey, attempt int, c *CancelRunError) error {
	reason := fmt.Sprintf("step %s cancelled it: %s", key.Name, c.Error())
	msg := "cancelled: " + c.Error()
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.StepFail(ctx, store.StepFailParams{Key: key, Error: msg, Final: true, Now: now}); err != nil {
			return err
		}
		ev := store.Event{Kind: flowtype.EventStepFailed, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt, Detail: msg}
		if err := x.event(ctx, tx, now, ev); err != nil {
			return err
		}
		if _, err := tx.RunRequestCancel(ctx, key.RunID, now); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventCancelRequested, Detail: reason})
	})
	if err != nil {
		return rc.Abort(err)
	}
	cause := fmt.Errorf("%w: %s", flowtype.ErrCancelled, reason)
	x.cancelRun(cause)
	return rc.Abort(cause)
}

// CancelReason returns why a cancelled run was cancelled, as recorded in
// its error ("run cancelled: <reason>"), or "" when no reason was given
// (an operator's Cancel) or the run is not cancelled.
func CancelReason(run store.Run) string {
	if run.Status != flowtype.StatusCancelled {
		return ""
	}
	reason, ok := strings.CutPrefix(run.Error, flowtype.ErrCancelled.Error()+": ")
	if !ok {
		return ""
	}
	return reason
}
