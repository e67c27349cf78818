package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// unwind runs the compensations of the run's completed steps in reverse
// completion order, each as a durable, retried unit: its start and outcome
// are recorded, so a crash mid-unwind resumes at the step it interrupted.
// replayed says whether the body already ran in this execution, which
// collected the step definitions; otherwise the body is replayed with no
// step allowed to execute.
func (x *execution) unwind(rc *RunContext, replayed bool) {
	st := rc.st
	if !replayed {
		st.mu.Lock()
		st.replayOnly = true
		st.mu.Unlock()
		_, _ = rc.callWorkflow() // only the step definitions it registers matter
		var divergence *flowtype.NonDeterminismError
		if errors.As(rc.cause(), &divergence) {
			// The code that would name the compensations is not the code
			// that made the history: leave the run to an operator.
			x.suspend(divergence.Error())
			return
		}
	}
	steps, err := x.e.store.Reader().StepList(x.leaseCtx, x.run.ID)
	if err != nil {
		x.e.log.Error("load steps to compensate", "run", x.run.ID, "err", err)
		x.release(x.e.cfg.PollInterval, "could not load steps: "+err.Error())
		return
	}
	var pending []store.Step
	for _, s := range steps {
		switch s.Compensation {
		case store.CompensationPending, store.CompensationRunning, store.CompensationRetrying:
			pending = append(pending, s)
		}
	}
	slices.SortFunc(pending, func(a, b store.Step) int { return cmp.Compare(b.CompletedSeq, a.CompletedSeq) })
	for _, s := range pending {
		st.mu.Lock()
		def, ok := st.defs[s.Key()]
		st.mu.Unlock()
		if !ok || def.Compensate == nil {
			x.suspend(fmt.Sprintf("compensation of step %s: the workflow no longer calls this step with a compensation on replay; was its code changed?", s.Key()))
			return
		}
		if !x.compensate(s, def) {
			return
		}
	}
	final := flowtype.StatusFailed
	if x.run.CancelRequested || errors.Is(context.Cause(x.runCtx), flowtype.ErrCancelled) {
		final = flowtype.StatusCancelled
	}
	x.finish(final, nil, x.run.Error, "")
}

// compensate runs one attempt of a step's compensation and records it. It
// reports whether the unwind may go on to the next step.
func (x *execution) compensate(s store.Step, def Step) bool {
	key := s.Key()
	var attempt int
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		var err error
		if attempt, err = tx.StepCompensationBegin(ctx, key); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventCompensationStarted, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt})
	})
	if err != nil {
		x.interrupted("begin compensation of step "+key.String(), err)
		return false
	}

	info := flowtype.AttemptInfo{RunID: key.RunID, Workflow: x.def.Key, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt, Compensation: true}
	compErr := x.callAttempt(x.leaseCtx, info, def.Timeout, func(ctx context.Context) error {
		return def.Compensate(ctx, s.Input, s.Output)
	})
	if compErr != nil && x.leaseCtx.Err() != nil {
		// Lease lost or engine stopping: the attempt was interrupted.
		if errors.Is(context.Cause(x.leaseCtx), errStopping) {
			x.release(0, "engine stopping")
		}
		return false
	}

	ev := store.Event{Kind: flowtype.EventCompensationCompleted, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt}
	if compErr == nil {
		err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
			if err := tx.StepCompensationEnd(ctx, key, store.CompensationCompleted, ""); err != nil {
				return err
			}
			return x.event(ctx, tx, now, ev)
		})
		if err != nil {
			// The compensation ran: given back, the run runs it again
			// (compensations are at least once, like steps).
			x.interrupted("record compensation of step "+key.String(), err)
		}
		return err == nil
	}

	msg := compErr.Error()
	if finalAttempt(def.CompensateRetry, attempt, compErr) {
		reason := fmt.Sprintf("compensation of step %s failed after %d attempt(s): %s", key.Name, attempt, msg)
		err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
			if err := tx.StepCompensationEnd(ctx, key, store.CompensationFailed, msg); err != nil {
				return err
			}
			ev.Kind, ev.Detail = flowtype.EventCompensationFailed, msg
			return x.event(ctx, tx, now, ev)
		})
		if err != nil {
			x.interrupted("record failed compensation of step "+key.String(), err)
			return false
		}
		x.suspend(reason)
		return false
	}
	delay := def.CompensateRetry.Backoff(attempt)
	err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.StepCompensationEnd(ctx, key, store.CompensationRetrying, msg); err != nil {
			return err
		}
		ev.Kind, ev.Detail = flowtype.EventCompensationRetried, fmt.Sprintf("%s; next attempt in %s", msg, delay.Round(time.Millisecond))
		if err := x.event(ctx, tx, now, ev); err != nil {
			return err
		}
		return tx.RunRelease(ctx, x.lease, store.RunReleaseParams{RunAt: now + delay.Milliseconds(), WakeSeq: x.run.WakeSeq, Now: now})
	})
	if err != nil {
		x.interrupted("record compensation attempt of step "+key.String(), err)
		return false
	}
	x.ending.Store(true) // released until the next attempt
	x.e.wakeAfter(x.run.Queue, delay)
	return false
}

// startUnwind moves the run to compensating and unwinds it.
func (x *execution) startUnwind(rc *RunContext, errMsg string) {
	var children []string
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.RunStartCompensating(ctx, x.lease, errMsg, now); err != nil {
			return err
		}
		if err := tx.StepCompensationArm(ctx, x.run.ID); err != nil {
			return err
		}
		// Unfinished children are cancelled, which unwinds them in turn.
		var err error
		children, err = tx.RunCancelChildren(ctx, x.run.ID, now)
		if err != nil {
			return err
		}
		for _, id := range children {
			ev := store.Event{RunID: id, At: now, Kind: flowtype.EventCancelRequested, Detail: "parent " + x.run.ID + " is unwinding"}
			if err := tx.EventAppend(ctx, ev); err != nil {
				return err
			}
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventWorkflowFailed, Detail: errMsg})
	})
	if err != nil {
		x.interrupted("start compensating", err)
		return
	}
	x.run.Status, x.run.Error = flowtype.StatusCompensating, errMsg
	x.e.cancelActive(children) // children executing here see it now, not at their next heartbeat
	x.e.WakeAll()              // cancelled children, if any, unwind now
	x.unwind(rc, true)
}
