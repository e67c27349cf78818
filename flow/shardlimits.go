package flow

import (
	"context"
	"sync"

	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// shardLimits makes a queue's global limits (QueueLimits.Concurrency and
// Rate) hold across the files of a shard set rather than in each file (see
// internal/engine/setlimits.go): the claims of such a queue, by every
// engine of the set in every process, take turns on a lock of shard 0
// (store.SetLocker, a record lock beside its file), and count the leases
// and starts of the other files before they claim in theirs.
type shardLimits struct {
	self   int
	stores []store.Store
	lock   func(ctx context.Context, name string) (func(), error)
}

var _ engine.SetLimits = (*shardLimits)(nil)

// shareLimits gives each shard's engine its view of the set's limits.
func shareLimits(shards []*Engine) {
	stores := make([]store.Store, len(shards))
	for i, s := range shards {
		stores[i] = s.store
	}
	lock := inProcessLocks()
	if l, ok := stores[0].(store.SetLocker); ok {
		lock = l.LockSet
	}
	for i, s := range shards {
		s.core.SetShardLimits(&shardLimits{self: i, stores: stores, lock: lock})
	}
}

// inProcessLocks are locks by name within this process, for a shard 0
// whose store cannot lock across processes.
func inProcessLocks() func(ctx context.Context, name string) (func(), error) {
	var mu sync.Mutex
	turns := make(map[string]chan struct{})
	return func(ctx context.Context, name string) (func(), error) {
		mu.Lock()
		turn := turns[name]
		if turn == nil {
			turn = make(chan struct{}, 1)
			turns[name] = turn
		}
		mu.Unlock()
		select {
		case turn <- struct{}{}:
			return func() { <-turn }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (l *shardLimits) Lock(ctx context.Context, queue string) (func(), error) {
	return l.lock(ctx, "queue limits "+queue)
}

func (l *shardLimits) Elsewhere(ctx context.Context, queue string, since int64) (int, store.RateStarts, error) {
	running := 0
	for i, s := range l.stores {
		if i == l.self {
			continue
		}
		counts, err := s.Reader().RunLeasedCounts(ctx, queue)
		if err != nil {
			return 0, store.RateStarts{}, err
		}
		for _, n := range counts {
			running += n
		}
	}
	if since <= 0 {
		return running, store.RateStarts{}, nil
	}
	started, err := l.StartsElsewhere(ctx, queue, "", since)
	return running, started, err
}

func (l *shardLimits) StartsElsewhere(ctx context.Context, bucket, key string, since int64) (store.RateStarts, error) {
	var started store.RateStarts
	for i, s := range l.stores {
		if i == l.self {
			continue
		}
		rs, err := s.Reader().RateStartsCount(ctx, bucket, key, since)
		if err != nil {
			return started, err
		}
		started.Count += rs.Count
		if rs.Oldest > 0 && (started.Oldest == 0 || rs.Oldest < started.Oldest) {
			started.Oldest = rs.Oldest
		}
	}
	return started, nil
}
