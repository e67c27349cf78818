package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Operator actions on one run that the peers' dashboards offer: delete a
// finished run, and run a delayed or backing-off run now.

// EventRunMadeDue is recorded when an operator made a pending run due now;
// its detail says when it was due.
const EventRunMadeDue = flowtype.EventRunMadeDue

// DeleteRun deletes the finished (completed, failed or cancelled) run id
// with its steps, events and signals, and its unique key and holds with it,
// so that the key is free again. An unfinished run, or the child of an
// unfinished parent (which may still read its outcome), is refused with
// store.ErrConflict naming why; an unknown one is store.ErrNotFound. Nothing
// changes on refusal.
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
			return fmt.Errorf("%w: run is %s, not finished (completed, failed or cancelled): cancel it first", store.ErrConflict, run.Status)
		case run.ParentID != "":
			return fmt.Errorf("%w: its parent %s has not finished and may still read its outcome", store.ErrConflict, run.ParentID)
		}
		return fmt.Errorf("%w: run changed meanwhile", store.ErrConflict)
	})
	if err != nil {
		return fmt.Errorf("delete run %s: %w", id, err)
	}
	e.log.Info("run deleted", "run", id)
	return nil
}

// RunNow makes the pending run id due now, and wakes its queue: a run
// started with a delay, or one waiting out the backoff before the next
// attempt of a step (whose attempt count does not change). A run due
// already is left as it is. A finished run is ErrRunFinished; a running,
// waiting (for a timer, a signal or a child), compensating or suspended one
// store.ErrConflict; an unknown one store.ErrNotFound. Nothing changes on
// refusal.
func (e *Engine) RunNow(ctx context.Context, id string) error {
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
			return fmt.Errorf("%w: run is %s, not pending: only a delayed run or one waiting out a retry backoff can run now", store.ErrConflict, run.Status)
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
			return fmt.Errorf("%w: run changed meanwhile", store.ErrConflict)
		}
		detail := "was due at " + time.UnixMilli(run.RunAt).UTC().Format(time.RFC3339Nano)
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: EventRunMadeDue, Detail: detail})
	})
	if err != nil {
		return fmt.Errorf("run %s now: %w", id, err)
	}
	e.Wake(queue)
	return nil
}
