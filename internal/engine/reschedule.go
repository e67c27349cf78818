package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// EventRunRescheduled is recorded when an operator gave a pending run a new
// due time; its detail says when it is due and when it was.
const EventRunRescheduled = flowtype.EventRunRescheduled

// RunAt makes the pending run id due at at, and wakes its queue: a run
// started with a delay, one waiting out the backoff before the next attempt
// of a step (whose attempt count does not change), or one due already that
// no engine claimed yet, which is put off. A time at or before now is
// RunNow: the run is due now, recorded as run_made_due, and a run due
// already is left as it is. A finished run is ErrRunFinished; a running,
// waiting (for a timer, a signal or a child: their own records say when
// they wake), compensating or suspended one store.ErrConflict; an unknown
// one store.ErrNotFound. Nothing changes on refusal.
//
// The write is guarded by the run's status, lease and claim fence as read
// in the same transaction: an engine that claimed the run meanwhile (and
// perhaps gave it back with a new backoff) makes it a store.ErrConflict
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
			return fmt.Errorf("%w: run is %s", ErrRunFinished, run.Status)
		case run.Status != store.RunPending:
			return fmt.Errorf("%w: run is %s, not pending: only a run waiting to be claimed (delayed, backing off or due) gets a new due time", store.ErrConflict, run.Status)
		case run.LeaseOwner != "":
			return fmt.Errorf("%w: run is leased by %s", store.ErrConflict, run.LeaseOwner)
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
			return fmt.Errorf("%w: run changed meanwhile (an engine claimed it): read it again", store.ErrConflict)
		}
		detail := "due at " + formatMs(due) + ", was due at " + formatMs(run.RunAt)
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: EventRunRescheduled, Detail: detail})
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
