package engine

import (
	"context"
	"errors"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Writes that end an execution (its outcome, or giving the run back) are
// retried with backoff when the database refuses them for a reason that may
// pass (a full disk, a lock held too long, an I/O error): dropping them
// would leave the run leased to this engine, its caller waiting, until the
// lease expired. When the retries run out, the run is left where its last
// checkpoint put it, the failure is counted and logged, and Result on this
// engine returns it (see flowtype.WriteError) instead of waiting in silence.

const (
	// writeRetryFirst is the first wait before a failed write is retried;
	// each further wait doubles, up to writeRetryMax.
	writeRetryFirst = 50 * time.Millisecond
	writeRetryMax   = 2 * time.Second
	// writeRetryBudget bounds how long one write is retried (and so how
	// long a stop may wait for it); half the lease bounds it further, so
	// the retries end before another engine may rescue the run.
	writeRetryBudget = 10 * time.Second
)

// writeRetried is writeFenced, retried while the error may pass and the
// budget lasts. what names the write in logs.
//
// A database that is unavailable (flowtype.ErrUnavailable: a PostgreSQL
// server restarting, a failover) has no budget: it takes minutes at worst,
// and a write given up leaves the run leased here until its lease expires,
// then to be rescued and resumed by someone, while a write retried lands
// as soon as the database is back. Meanwhile nobody else can take the run
// over, and once the database is back this execution's heartbeat renews
// the lease (and the rescuer of this engine renews the lease of the runs
// it executes before it rescues any); should another engine still take
// the run, the fenced write fails with store.ErrLeaseLost. Once the engine
// stops, the budget applies again, so that Stop waits no longer than it
// would for any other failing write.
func (x *execution) writeRetried(what string, fn func(ctx context.Context, tx store.Tx, now int64) error) error {
	budget := min(writeRetryBudget, x.e.cfg.LeaseTimeout/2)
	deadline := time.Now().Add(budget)
	wait := writeRetryFirst
	for attempt := 1; ; attempt++ {
		err := x.writeFenced(fn)
		if err == nil || !retryableWrite(err) {
			return err
		}
		if time.Now().Add(wait).After(deadline) && (!errors.Is(err, flowtype.ErrUnavailable) || x.e.stopping()) {
			return err
		}
		x.e.metrics.writeFailed(err, x.e.now())
		x.e.log.Warn("write failed; retrying", "run", x.run.ID, "write", what, "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-x.leaseCtx.Done():
			return err // the engine stops hard, or the lease is gone
		}
		wait = min(2*wait, writeRetryMax)
	}
}

// stopping reports whether Stop was called.
func (e *Engine) stopping() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.running
}

// retryableWrite reports whether a failed write may succeed later. A lost
// lease, a state conflict and a closed store will not.
func retryableWrite(err error) bool {
	return !errors.Is(err, store.ErrLeaseLost) && !errors.Is(err, flowtype.ErrConflict) && !errors.Is(err, flowtype.ErrClosed)
}

// gaveUp records that the execution could not write what, so that Result on
// this engine returns err instead of waiting for a lease to expire.
func (x *execution) gaveUp(what string, err error) {
	x.e.metrics.writeFailed(err, x.e.now())
	x.e.log.Error("write failed for good; the run stays at its last checkpoint and resumes once its lease expires and the database takes writes",
		"run", x.run.ID, "write", what, "err", err)
	x.e.mu.Lock()
	x.e.unwritten[x.run.ID] = unwritten{fence: x.lease.Fence, err: &flowtype.WriteError{RunID: x.run.ID, What: what, Err: err}}
	x.e.mu.Unlock()
	x.e.settled()
}

// unwritten is a run whose execution here ended without recording where it
// got to.
type unwritten struct {
	fence int64
	err   error
}

// unwrittenError returns the error Wait reports for run: the write failure
// of its last execution here, while the run's row still shows that
// execution's lease (nothing recorded it moved on since).
func (e *Engine) unwrittenError(run store.Run) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	u, ok := e.unwritten[run.ID]
	if !ok {
		return nil
	}
	if run.LeaseOwner == e.cfg.WorkerID && run.Fence == u.fence {
		return u.err
	}
	delete(e.unwritten, run.ID) // rescued, released or finished since
	return nil
}
