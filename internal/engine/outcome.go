package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The outcome of a run: forward turns what the workflow body returned
// into the run's end (completed, unwinding, suspended, or given back), and
// finish records it, batched with the outcomes of other runs ending at the
// same time (outcomeBatcher). Wait and RolledBack read an outcome for a
// starter.

// finish records the outcome of the run.
func (x *execution) finish(status flowtype.RunStatus, output []byte, errMsg, reason string) {
	kind := map[flowtype.RunStatus]string{
		flowtype.StatusCompleted: flowtype.EventRunCompleted, flowtype.StatusFailed: flowtype.EventRunFailed,
		flowtype.StatusCancelled: flowtype.EventRunCancelled, flowtype.StatusSuspended: flowtype.EventRunSuspended,
	}[status]
	err := x.finishBatched(status, output, errMsg, reason, kind)
	if errors.Is(err, errNotBatched) {
		err = x.finishAlone(status, output, errMsg, reason, kind)
	}
	if err != nil {
		if !errors.Is(err, store.ErrLeaseLost) {
			// Try to hand the run back, so that it resumes from its last
			// checkpoint once the database takes writes again.
			x.e.log.Error("record run outcome; giving the run back", "run", x.run.ID, "status", status, "err", err)
			x.release(x.e.cfg.PollInterval, "its outcome could not be recorded: "+err.Error())
		}
		return
	}
	x.e.log.Debug("run settled", "run", x.run.ID, "workflow", x.run.Workflow, "status", status)
	x.e.metrics.runFinished(status)
	x.e.settled()
}

// finishAlone records the outcome of the run in a write of its own,
// retried as writeRetried retries.
func (x *execution) finishAlone(status flowtype.RunStatus, output []byte, errMsg, reason, kind string) error {
	return x.writeRetried("outcome", func(ctx context.Context, tx store.Tx, now int64) error {
		p := store.RunFinishParams{Status: status, Output: output, Error: errMsg, Reason: reason, Now: now}
		if status != flowtype.StatusSuspended {
			p.FinishedAt = now
		}
		if err := tx.RunFinish(ctx, x.lease, p); err != nil {
			return err
		}
		if err := x.undoBegun(ctx, tx, "the run "+string(status)+" first", now); err != nil {
			return err
		}
		if x.run.ParentID != "" && status.Finished() {
			if _, err := tx.RunWake(ctx, x.run.ParentID, now); err != nil {
				return err
			}
		}
		return x.event(ctx, tx, now, store.Event{Kind: kind, Detail: firstNonEmpty(reason, errMsg)})
	})
}

func (x *execution) suspend(reason string) {
	x.e.log.Warn("run suspended", "run", x.run.ID, "reason", reason)
	x.finish(flowtype.StatusSuspended, nil, x.run.Error, reason)
}

// forward runs the workflow body and records its outcome, starting the
// unwind when it fails or the run is cancelled.
func (x *execution) forward(rc *RunContext) {
	output, wfErr := rc.callWorkflow()
	if wfErr == nil {
		// The workflow failed to produce an output the engine may store: it
		// fails (and is compensated) with an error saying so.
		wfErr = x.e.CheckPayload("output of workflow "+x.def.Key.String(), output)
	}
	cause := rc.cause()
	if cause == nil {
		// The body returned: it must have made every call it recorded.
		rc.st.mu.Lock()
		if err := rc.st.history.unvisited(x.run.ID); err != nil {
			cause = rc.st.abortLocked(err)
		}
		rc.st.mu.Unlock()
	}
	var next *ContinueAsNewError
	switch {
	case cause != nil:
		x.abort(rc, cause)
	case errors.As(wfErr, &next):
		x.continueAsNew(rc, next)
	case wfErr == nil:
		x.finish(flowtype.StatusCompleted, output, "", "")
	default:
		x.startUnwind(rc, wfErr.Error())
	}
}

// abort handles an execution that ended before the workflow body settled.
func (x *execution) abort(rc *RunContext, cause error) {
	var decodeErr *flowtype.DecodeError
	var replayErr *ReplayError
	var defErr *DefinitionError
	var divergence *flowtype.NonDeterminismError
	var historyFull *flowtype.HistoryLimitError
	switch {
	case errors.Is(cause, store.ErrLeaseLost):
		// No longer ours to write: a fenced write failed, or the heartbeat
		// found the lease taken.
	case errors.Is(cause, errParked):
		st := rc.st
		st.mu.Lock()
		at, waiting, why := st.parkAt, !st.parkRetry, st.parkWhy
		st.mu.Unlock()
		switch {
		case why != "":
		case at >= never:
			why = "until woken"
		default:
			why = "until " + time.UnixMilli(at).UTC().Format(time.RFC3339Nano)
		}
		x.releaseUntil(at, waiting, why)
	case errors.Is(cause, flowtype.ErrCancelled):
		x.startUnwind(rc, cause.Error())
	case errors.Is(cause, errStopping):
		x.release(0, "engine stopping")
	case errors.As(cause, &decodeErr), errors.As(cause, &replayErr), errors.As(cause, &defErr), errors.As(cause, &divergence),
		errors.As(cause, &historyFull):
		x.suspend(cause.Error())
	default:
		x.e.log.Error("run interrupted", "run", x.run.ID, "err", cause)
		x.release(x.e.cfg.PollInterval, "interrupted: "+cause.Error())
	}
}

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
	status     flowtype.RunStatus
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
func (x *execution) finishBatched(status flowtype.RunStatus, output []byte, errMsg, reason, kind string) error {
	if x.superseded.Load() {
		return errSuperseded // as writeTx: the database would take it
	}
	x.begunMu.Lock()
	begun := x.hasBegun
	x.begunMu.Unlock()
	if begun {
		return errNotBatched
	}
	deferred := x.takeDeferred()
	if len(deferred) > 1 || len(deferred) == 1 && deferred[0].progressOnly() {
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
		items := make([]store.RunFinishItem, 0, len(batch))
		sent := make([]int, 0, len(batch)) // batch index of each item
		for i, o := range batch {
			if o.x.superseded.Load() {
				// Superseded since it was queued: its lease passes the
				// database's checks, so it must not reach them.
				lost[i] = true
				continue
			}
			p := store.RunFinishParams{Status: o.status, Output: o.output, Error: o.errMsg, Reason: o.reason, Now: now}
			if o.status != flowtype.StatusSuspended {
				p.FinishedAt = now
			}
			item := store.RunFinishItem{Lease: o.x.lease, Finish: p}
			if o.checkpoint != nil {
				item.Step = &o.checkpoint.step
			}
			items, sent = append(items, item), append(sent, i)
		}
		lostIdx, err := tx.RunFinishMany(ctx, items)
		if err != nil {
			return err
		}
		for _, i := range lostIdx {
			lost[sent[i]] = true
		}
		for i, o := range batch {
			if lost[i] {
				continue
			}
			x := o.x
			if c := o.checkpoint; c != nil {
				if c.progress != nil {
					if err := x.event(ctx, tx, c.step.Now, *c.progress); err != nil {
						return err
					}
				}
				if err := x.writeCheckpointStreams(ctx, tx, *c); err != nil {
					return err
				}
				if err := x.completedEvent(ctx, tx, *c); err != nil {
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

// RolledBack returns the error of the failed run, naming the step that
// failed for good if one did.
func (e *Engine) RolledBack(ctx context.Context, run store.Run) *flowtype.RolledBackError {
	rb := &flowtype.RolledBackError{RunID: run.ID, Cause: run.Error}
	steps, err := e.store.Reader().StepList(ctx, run.ID)
	if err != nil {
		e.log.Warn("read the steps of a rolled back run", "run", run.ID, "err", err)
		return rb
	}
	var last *store.Step
	for i, st := range steps {
		if st.Status == store.StepFailed && (last == nil || st.FinishedAt >= last.FinishedAt) {
			last = &steps[i]
		}
	}
	if last != nil {
		rb.Step, rb.Attempts = last.Name, last.Attempts
	}
	return rb
}

// Wait blocks until the run is completed, failed, cancelled or suspended,
// and returns it.
//
// A read that finds the database unavailable (flowtype.ErrUnavailable: a
// server restarting, a broken connection) does not end the wait: the run
// goes on once the database is back, and so does the wait, polling, until
// ctx ends; its error then matches both ctx's error and the last
// flowtype.ErrUnavailable.
func (e *Engine) Wait(ctx context.Context, id string) (store.Run, error) {
	var last store.Run
	var away error // the last read's flowtype.ErrUnavailable, while it lasts
	for {
		signal := e.settledSignal()
		run, err := e.store.Reader().RunGet(ctx, id)
		switch {
		case errors.Is(err, flowtype.ErrUnavailable):
			if ctx.Err() != nil {
				return last, fmt.Errorf("%w: %w", ctx.Err(), err)
			}
			if away == nil {
				e.log.Warn("database unavailable while waiting for a run; still waiting", "run", id, "err", err)
			}
			away = err
		case err != nil:
			return store.Run{}, err
		default:
			if away != nil {
				e.log.Info("database available again; waiting for the run goes on", "run", id)
			}
			last, away = run, nil
			if run.Status.Finished() || run.Status == flowtype.StatusSuspended {
				return run, nil
			}
			if err := e.unwrittenError(run); err != nil {
				return run, err
			}
		}
		timer := time.NewTimer(e.cfg.PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			if away != nil {
				return last, fmt.Errorf("%w: %w", ctx.Err(), away)
			}
			return last, ctx.Err()
		case <-signal:
		case <-timer.C:
		}
		timer.Stop()
	}
}
