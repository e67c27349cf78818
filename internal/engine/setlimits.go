package engine

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Global limits on a shard set. Each file of a set has its own writer, so
// the claims of one file cannot see, inside their transaction, the leases
// another file's claims are taking. A queue's global concurrency and rate
// (QueueLimits.Concurrency and Rate) hold across the set because the
// claims of such a queue take turns on a lock of the whole set
// (SetLimits.Lock: every engine of the set, in every process), and each
// reads, holding it, what the other files hold (SetLimits.Elsewhere)
// before it claims in its own: every claim of the queue commits before it
// gives the lock back, so what it reads elsewhere is final, and leases
// given back meanwhile only leave more room. Per-key limits need none of
// this: runs with a concurrency key are placed by it, so all the runs of a
// key live in one file.

// SetLimits counts a queue's global limits across the files of a shard
// set, for the engine of one of them (SetShardLimits).
type SetLimits interface {
	// Lock makes the claims of queue's runs by every engine of the set
	// take turns until unlock is called.
	Lock(ctx context.Context, queue string) (unlock func(), err error)
	// Elsewhere returns how many runs of queue hold a lease in the set's
	// other files, and, when since > 0, the starts of the queue's own rate
	// logged there after since (the oldest: the earliest of them).
	Elsewhere(ctx context.Context, queue string, since int64) (running int, started store.RateStarts, err error)
	// StartsElsewhere returns the starts of bucket's key logged in the
	// set's other files after since: a step rate limiter's (steprate.go).
	StartsElsewhere(ctx context.Context, bucket, key string, since int64) (store.RateStarts, error)
}

// SetShardLimits makes e, the engine of one file of a shard set, count the
// global limits of its queues across the set with s. Call it before
// Start.
func (e *Engine) SetShardLimits(s SetLimits) { e.setLimits = s }

// elsewhere is what the other files of a shard set hold of a queue, read
// under the set's lock of it.
type elsewhere struct {
	running int
	started store.RateStarts
}

// countsAcrossSet reports whether limits l of a queue count across the
// files of a shard set.
func (e *Engine) countsAcrossSet(l flowtype.QueueLimits) bool {
	return e.setLimits != nil && (l.Concurrency > 0 || !l.Rate.IsZero())
}

// lockSetClaim takes the set's lock of queue for a claim when its limits,
// as this engine last read them, count across a shard set, and reads what
// the other files hold. The claim must commit before unlock is called. It
// returns a nil *elsewhere when the claim needs no lock.
func (e *Engine) lockSetClaim(ctx context.Context, queue string, limited bool) (*elsewhere, func(), error) {
	l, _ := e.limitsOf(ctx, queue)
	if !limited || !e.countsAcrossSet(l) {
		return nil, func() {}, nil
	}
	unlock, err := e.setLimits.Lock(ctx, queue)
	if err != nil {
		return nil, nil, fmt.Errorf("lock the limits of queue %s across the shard set: %w", queue, err)
	}
	var since int64
	if !l.Rate.IsZero() {
		since = e.nowMs() - l.Rate.Period.Milliseconds()
	}
	running, started, err := e.setLimits.Elsewhere(ctx, queue, since)
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("count the runs of queue %s across the shard set: %w", queue, err)
	}
	return &elsewhere{running: running, started: started}, unlock, nil
}
