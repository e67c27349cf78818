package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/flowlite/flowlite/internal/store"
)

// maxOutcomeBatch caps the runs one outcome write records.
const maxOutcomeBatch = 256

// outcomeBatcher records the outcomes of runs that end at about the same
// time in one write transaction, with one set-based statement
// (store.RunTx.RunFinishMany), instead of one transaction per run. On
// PostgreSQL a run's outcome costs five round trips and a commit on its
// own; batched, a few hundred runs share them.
//
// Batches form by themselves, without a timer: the first run to end while
// no batch is being written writes its own outcome at once, with whatever
// others queued meanwhile, and keeps writing the queue until it is empty.
// A lone run therefore waits for nothing, and under load a batch holds
// every outcome that arrived while the one before was written.
type outcomeBatcher struct {
	mu      sync.Mutex
	queue   []*outcome
	writing bool
}

// outcome is one run's ending, queued for a batch.
type outcome struct {
	x          *execution
	status     store.RunStatus
	output     []byte
	errMsg     string
	reason     string
	kind       string      // the run's history event
	checkpoint *checkpoint // the last step's, committed with the outcome
	err        error       // set before done is closed
	done       chan struct{}
}

// errNotBatched is returned when an outcome was not recorded by a batch:
// the execution records it on its own, with the retries and checks a
// single write has.
var errNotBatched = errors.New("outcome not batched")

// finishBatched records the outcome of x with other runs' outcomes. It
// returns errNotBatched, with x as it was, when the outcome needs more
// than a batch does (a first attempt to give back, more than one
// checkpoint) or the batch's write failed; then the caller writes it
// alone. A lost lease is returned as such: nothing of x was written.
func (x *execution) finishBatched(status store.RunStatus, output []byte, errMsg, reason, kind string) error {
	x.begunMu.Lock()
	begun := x.hasBegun
	x.begunMu.Unlock()
	if begun {
		return errNotBatched
	}
	deferred := x.takeDeferred()
	if len(deferred) > 1 {
		x.restoreDeferred(deferred)
		return errNotBatched
	}
	o := &outcome{x: x, status: status, output: output, errMsg: errMsg, reason: reason, kind: kind, done: make(chan struct{})}
	if len(deferred) == 1 {
		o.checkpoint = &deferred[0]
	}
	x.ending.Store(true)
	x.e.outcomes.record(x.e, o)
	switch {
	case errors.Is(o.err, store.ErrLeaseLost):
		x.cancelLease(store.ErrLeaseLost)
	case o.err != nil:
		x.ending.Store(false)
		x.restoreDeferred(deferred)
		return errNotBatched
	}
	return o.err
}

// record queues o and returns once its batch was written; o.err says how.
func (b *outcomeBatcher) record(e *Engine, o *outcome) {
	b.mu.Lock()
	b.queue = append(b.queue, o)
	if b.writing {
		b.mu.Unlock()
		<-o.done
		return
	}
	b.writing = true
	for len(b.queue) > 0 {
		n := min(len(b.queue), maxOutcomeBatch)
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		e.writeOutcomes(batch)
		b.mu.Lock()
	}
	b.queue = nil
	b.writing = false
	b.mu.Unlock()
}

// writeOutcomes records batch in one write transaction and settles each
// outcome: nil, a lost lease, or the write's error for all.
func (e *Engine) writeOutcomes(batch []*outcome) {
	// Outcomes must land even once the runs were cancelled; the leases,
	// not the context, stop a stale writer.
	ctx := context.WithoutCancel(e.baseCtx)
	lost := make([]bool, len(batch))
	err := e.store.Write(ctx, func(tx store.Tx) error {
		clear(lost)
		now := e.nowMs()
		items := make([]store.RunFinishItem, len(batch))
		for i, o := range batch {
			p := store.RunFinishParams{Status: o.status, Output: o.output, Error: o.errMsg, Reason: o.reason, Now: now}
			if o.status != store.RunSuspended {
				p.FinishedAt = now
			}
			items[i] = store.RunFinishItem{Lease: o.x.lease, Finish: p}
			if o.checkpoint != nil {
				items[i].Step = &o.checkpoint.step
			}
		}
		lostIdx, err := tx.RunFinishMany(ctx, items)
		if err != nil {
			return err
		}
		for _, i := range lostIdx {
			lost[i] = true
		}
		for i, o := range batch {
			if lost[i] {
				continue
			}
			x := o.x
			if c := o.checkpoint; c != nil {
				if err := x.event(ctx, tx, c.step.Now, c.event()); err != nil {
					return err
				}
			}
			if x.run.ParentID != "" && o.status.Finished() {
				if _, err := tx.RunWake(ctx, x.run.ParentID, now); err != nil {
					return err
				}
			}
			if err := x.event(ctx, tx, now, store.Event{Kind: o.kind, Detail: firstNonEmpty(o.reason, o.errMsg)}); err != nil {
				return err
			}
		}
		return nil
	})
	for i, o := range batch {
		switch {
		case err != nil:
			o.err = err
		case lost[i]:
			o.err = store.ErrLeaseLost
		}
		close(o.done)
	}
}
