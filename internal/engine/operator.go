package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Operator actions on one run: cancel it, resume or skip a suspended one,
// delete a finished one, and make a pending one due now or at another time.
// Each is one guarded write transaction that refuses a run in the wrong
// state and changes nothing then. Going back in a run's history (Reset,
// Fork, Revive) is in reset.go, dead letters in deadletter.go.

// DeleteRun deletes the finished (completed, failed or cancelled) run id
// with its steps, events and signals, and its unique key and holds with it,
// so that the key is free again. An unfinished run, or the child of an
// unfinished parent (which may still read its outcome), is refused with
// flowtype.ErrConflict naming why; an unknown one is flowtype.ErrRunNotFound.
// Nothing changes on refusal.
func (e *Engine) DeleteRun(ctx context.Context, id string) error {
	err := e.store.Write(ctx, func(tx store.Tx) error {
		ok, err := tx.RunDeleteOne(ctx, id)
		if ok || err != nil {
			return err
		}
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case !run.Status.Finished():
			return fmt.Errorf("%w: run is %s, not finished (completed, failed or cancelled): cancel it first", flowtype.ErrConflict, run.Status)
		case run.ParentID != "":
			return fmt.Errorf("%w: its parent %s has not finished and may still read its outcome", flowtype.ErrConflict, run.ParentID)
		}
		return fmt.Errorf("%w: run changed meanwhile", flowtype.ErrConflict)
	})
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	e.log.Info("run deleted", "run", id)
	return nil
}

// RunNow makes the pending run id due now, and wakes its queue: a run
// started with a delay, or one waiting out the backoff before the next
// attempt of a step (whose attempt count does not change). A run due already
// is left as it is. A finished run is flowtype.ErrRunFinished; a running,
// waiting (for a timer, a signal or a child), compensating or suspended one
// flowtype.ErrConflict; an unknown one flowtype.ErrRunNotFound. Nothing changes
// on refusal.
func (e *Engine) RunNow(ctx context.Context, id string) error {
	var queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case run.Status.Finished():
			return fmt.Errorf("%w: run is %s", flowtype.ErrRunFinished, run.Status)
		case run.Status != flowtype.StatusPending:
			return fmt.Errorf("%w: run is %s, not pending: only a delayed run or one waiting out a retry backoff can run now", flowtype.ErrConflict, run.Status)
		}
		queue = run.Queue
		now := e.nowMs()
		if run.RunAt <= now {
			return nil
		}
		ok, err := tx.RunMakeDue(ctx, id, now)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: run changed meanwhile", flowtype.ErrConflict)
		}
		detail := "was due at " + time.UnixMilli(run.RunAt).UTC().Format(time.RFC3339Nano)
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventRunMadeDue, Detail: detail})
	})
	if err != nil {
		return fmt.Errorf("run %s now: %w", id, err)
	}
	e.Wake(queue)
	return nil
}

// Cancel requests cancellation of a run. Running code sees it through its
// context; completed steps are compensated and the run ends cancelled. A
// suspended run is cancelled at once, leaving its unwind where it stopped.
// Cancelling a finished run is flowtype.ErrRunFinished.
func (e *Engine) Cancel(ctx context.Context, id string) error {
	var queue string
	var children []string
	var finished int
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		queue, children, finished, err = e.cancelTx(ctx, tx, id, e.nowMs(), "")
		return err
	})
	if err != nil {
		return fmt.Errorf("cancel run %s: %w", id, err)
	}
	e.cancelActive(append(children, id))
	for range finished {
		e.metrics.runFinished(flowtype.StatusCancelled)
	}
	e.settled()
	e.Wake(queue)
	if len(children) > 0 {
		e.WakeAll()
	}
	return nil
}

// cancelTx cancels the run id inside tx, as Cancel does, and returns its
// queue, the children it asked to cancel and how many runs it cancelled at
// once. why (when not empty) is the detail of the request's event. A
// finished run is flowtype.ErrRunFinished.
func (e *Engine) cancelTx(ctx context.Context, tx store.Tx, id string, now int64, why string) (queue string, children []string, finished int, err error) {
	// The run is held from this read to the commit, so that what it says
	// (does a worker execute the run?) still holds when the guarded
	// updates below run: a claim in between, possible where writes do not
	// serialize (PostgreSQL), would make them find the run changed and
	// fail the call. With the row held, a claim either committed first,
	// and the cancel becomes a request to the engine that holds the run,
	// or waits, and claims a cancelled run no more.
	run, err := tx.RunGetForUpdate(ctx, id)
	if err != nil {
		return "", nil, 0, err
	}
	queue = run.Queue
	if run.Status == flowtype.StatusSuspended {
		err := tx.RunSetStatus(ctx, store.RunSetStatusParams{
			ID: id, Expected: flowtype.StatusSuspended, Status: flowtype.StatusCancelled,
			Reason: run.Reason, RunAt: run.RunAt, FinishedAt: now, Now: now,
		})
		if err != nil {
			return queue, nil, 0, err
		}
		return queue, nil, 0, tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventRunCancelled, Detail: firstNonEmpty(why, "cancelled while suspended")})
	}
	if run.Status.Finished() {
		return queue, nil, 0, fmt.Errorf("%w: run is %s", flowtype.ErrRunFinished, run.Status) // the caller names the run
	}
	if run.LeaseOwner == "" && (run.Status == flowtype.StatusPending || run.Status == flowtype.StatusWaiting) {
		// No worker executes it: nobody would see a request, so the run is
		// cancelled (or set to unwind) here.
		children, finished, err = e.cancelIdle(ctx, tx, run, now, why)
		return queue, children, finished, err
	}
	ok, err := tx.RunRequestCancel(ctx, id, now)
	if err != nil {
		return queue, nil, 0, err
	}
	if !ok {
		return queue, nil, 0, fmt.Errorf("%w: run is %s", flowtype.ErrRunFinished, run.Status) // the caller names the run
	}
	return queue, nil, 0, tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventCancelRequested, Detail: why})
}

// cancelIdle cancels a run that no worker executes, inside tx. With nothing
// to undo it ends cancelled at once; with completed steps to compensate it
// becomes compensating, and the next engine to claim it runs the
// compensations and ends it cancelled (not before: until then the effects
// of its steps stand, which a cancelled status would hide). Its unfinished
// children are cancelled too: idle ones in the same way, executing ones by
// request. It returns the IDs of the children that were asked to cancel,
// and how many runs it cancelled at once.
func (e *Engine) cancelIdle(ctx context.Context, tx store.Tx, run store.Run, now int64, why string) (children []string, cancelled int, err error) {
	msg := flowtype.ErrCancelled.Error()
	detail := "cancelled while " + string(run.Status)
	if why != "" {
		detail = why
	}
	done, err := tx.RunCancelIdle(ctx, run.ID, msg, now)
	if err != nil {
		return nil, 0, err
	}
	if done {
		cancelled++
		if err := tx.EventAppend(ctx, store.Event{RunID: run.ID, At: now, Kind: flowtype.EventRunCancelled, Detail: detail}); err != nil {
			return nil, 0, err
		}
		if run.ParentID != "" {
			if _, err := tx.RunWake(ctx, run.ParentID, now); err != nil {
				return nil, 0, err
			}
		}
	} else {
		ok, err := tx.RunCancelToUnwind(ctx, run.ID, msg, now)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, 0, fmt.Errorf("%w: run %s changed while being cancelled", flowtype.ErrConflict, run.ID)
		}
		if err := tx.StepCompensationArm(ctx, run.ID); err != nil {
			return nil, 0, err
		}
		ev := store.Event{RunID: run.ID, At: now, Kind: flowtype.EventCancelRequested, Detail: detail + "; compensations run when an engine claims it"}
		if err := tx.EventAppend(ctx, ev); err != nil {
			return nil, 0, err
		}
	}
	children, err = tx.RunCancelChildren(ctx, run.ID, now)
	if err != nil {
		return nil, 0, err
	}
	all := children
	for _, id := range children {
		child, err := tx.RunGet(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if child.LeaseOwner != "" || (child.Status != flowtype.StatusPending && child.Status != flowtype.StatusWaiting) {
			ev := store.Event{RunID: id, At: now, Kind: flowtype.EventCancelRequested, Detail: "parent " + run.ID + " was cancelled"}
			if err := tx.EventAppend(ctx, ev); err != nil {
				return nil, 0, err
			}
			continue
		}
		grandchildren, n, err := e.cancelIdle(ctx, tx, child, now, "parent "+run.ID+" was cancelled")
		if err != nil {
			return nil, 0, err
		}
		all = append(all, grandchildren...)
		cancelled += n
	}
	return all, cancelled, nil
}

// Resume puts a suspended run back to work: failed compensations get a fresh
// set of attempts, and a run suspended before its workflow failed (e.g. on a
// value it could not decode) runs its body again.
func (e *Engine) Resume(ctx context.Context, id string) error {
	return e.operate(ctx, id, "resume", func(tx store.Tx, run store.Run, now int64) error {
		target := flowtype.StatusPending
		if run.Error != "" {
			target = flowtype.StatusCompensating
			if _, err := tx.StepCompensationRetryFailed(ctx, id); err != nil {
				return err
			}
		}
		err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: id, Expected: flowtype.StatusSuspended, Status: target, RunAt: now, Now: now})
		if err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventRunResumed, Detail: "was: " + run.Reason})
	})
}

// Skip marks the failed compensations of a suspended run as skipped (an
// operator decided their effects need no undo) and resumes the unwind.
func (e *Engine) Skip(ctx context.Context, id string) error {
	return e.operate(ctx, id, "skip compensation of", func(tx store.Tx, run store.Run, now int64) error {
		n, err := tx.StepCompensationSkipFailed(ctx, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: no failed compensation to skip (suspended because: %s)", flowtype.ErrConflict, run.Reason)
		}
		err = tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: id, Expected: flowtype.StatusSuspended, Status: flowtype.StatusCompensating, RunAt: now, Now: now})
		if err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventCompensationSkipped, Detail: run.Reason})
	})
}

// operate applies an operator action to a suspended run.
func (e *Engine) operate(ctx context.Context, id, verb string, fn func(store.Tx, store.Run, int64) error) error {
	var queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		if run.Status != flowtype.StatusSuspended {
			return fmt.Errorf("%w: run is %s, not suspended", flowtype.ErrConflict, run.Status)
		}
		queue = run.Queue
		return fn(tx, run, e.nowMs())
	})
	if err != nil {
		return fmt.Errorf("%s run %s: %w", verb, id, err)
	}
	e.Wake(queue)
	return nil
}

// RunAt makes the pending run id due at at, and wakes its queue: a run
// started with a delay, one waiting out the backoff before the next attempt
// of a step (whose attempt count does not change), or one due already that
// no engine claimed yet, which is put off. A time at or before now is
// RunNow: the run is due now, recorded as run_made_due, and a run due
// already is left as it is. A finished run is flowtype.ErrRunFinished; a
// running, waiting (for a timer, a signal or a child: their own records say
// when they wake), compensating or suspended one flowtype.ErrConflict; an
// unknown one flowtype.ErrRunNotFound. Nothing changes on refusal.
//
// The write is guarded by the run's status, lease and claim fence as read
// in the same transaction: an engine that claimed the run meanwhile (and
// perhaps gave it back with a new backoff) makes it a flowtype.ErrConflict
// naming the claim, never a due time set over the engine's.
func (e *Engine) RunAt(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("run %s at a time: the time is zero", id)
	}
	now := e.nowMs()
	due := at.UnixMilli()
	if due <= now {
		return e.RunNow(ctx, id)
	}
	var queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case run.Status.Finished():
			return fmt.Errorf("%w: run is %s", flowtype.ErrRunFinished, run.Status)
		case run.Status != flowtype.StatusPending:
			return fmt.Errorf("%w: run is %s, not pending: only a run waiting to be claimed (delayed, backing off or due) gets a new due time", flowtype.ErrConflict, run.Status)
		case run.LeaseOwner != "":
			return fmt.Errorf("%w: run is leased by %s", flowtype.ErrConflict, run.LeaseOwner)
		}
		queue = run.Queue
		if run.RunAt == due {
			return nil
		}
		now := e.nowMs()
		ok, err := tx.RunReschedule(ctx, store.RunRescheduleParams{ID: id, Fence: run.Fence, RunAt: due, Now: now})
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: run changed meanwhile (an engine claimed it): read it again", flowtype.ErrConflict)
		}
		detail := "due at " + formatMs(due) + ", was due at " + formatMs(run.RunAt)
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventRunRescheduled, Detail: detail})
	})
	if err != nil {
		return fmt.Errorf("run %s at %s: %w", id, at.UTC().Format(time.RFC3339Nano), err)
	}
	// A run put off is simply not claimed before its time; one brought
	// forward needs this engine's claim loop to look then.
	e.wakeAfter(queue, time.Duration(due-e.nowMs())*time.Millisecond)
	return nil
}

// formatMs formats a time in Unix milliseconds for an event's detail.
func formatMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
