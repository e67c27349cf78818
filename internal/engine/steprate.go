package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Step rate limits (flowtype.StepRateLimit): the write that would begin an
// attempt of a rate-limited step first takes a start from the step's
// limiter, counted in rate_starts as a queue's rate is (limits.go). When
// the limiter has none left, the write begins nothing and the run parks
// until the oldest start counted leaves the window: it gives its lease
// back and waits as a pending row due then, like a step retry, and the
// next execution replays to the step and tries again. Waiting runs are
// not queued for the limiter: whichever asks first when a start frees up
// takes it.

// stepRateBucket is the rate_starts queue of a step rate limiter. Queue
// names cannot hold control characters (CheckName), so a limiter's starts
// never count toward a queue's rate, nor a queue's toward a limiter's.
func stepRateBucket(name string) string { return "\x1fstep\x1f" + name }

// stepRateKey is the bucket and key of the run's attempts with limiter l.
func (x *execution) stepRateKey(l *flowtype.StepRateLimit) (bucket, key string) {
	if l.PerKey {
		key = x.run.ConcurrencyKey
	}
	return stepRateBucket(l.Name), key
}

// lockStepRate, on the engine of a shard set's file, takes the set's lock
// of limiter l and reads the starts the other files logged, as a claim of a
// queue with a global rate does (setlimits.go); unlock goes after the
// commit of the write that takes the start. Elsewhere it does nothing.
func (x *execution) lockStepRate(ctx context.Context, l *flowtype.StepRateLimit) (store.RateStarts, func(), error) {
	if l == nil || x.e.setLimits == nil {
		return store.RateStarts{}, func() {}, nil
	}
	bucket, key := x.stepRateKey(l)
	unlock, err := x.e.setLimits.Lock(ctx, "rate limiter "+l.Name)
	if err != nil {
		return store.RateStarts{}, nil, fmt.Errorf("lock rate limiter %s across the shard set: %w", l.Name, err)
	}
	others, err := x.e.setLimits.StartsElsewhere(ctx, bucket, key, x.e.nowMs()-l.Rate.Period.Milliseconds())
	if err != nil {
		unlock()
		return store.RateStarts{}, nil, fmt.Errorf("count the attempts of rate limiter %s across the shard set: %w", l.Name, err)
	}
	return others, unlock, nil
}

// takeStepRate takes a start from the limiter l of the run's step inside
// tx, counting the starts logged elsewhere in a shard set with the file's,
// and returns 0; or, when l has no start left, takes none and returns when
// the next one frees up (Unix ms).
func (x *execution) takeStepRate(ctx context.Context, tx store.Tx, l *flowtype.StepRateLimit, now int64, elsewhere store.RateStarts) (int64, error) {
	bucket, key := x.stepRateKey(l)
	if err := tx.RateLock(ctx, bucket); err != nil {
		return 0, err
	}
	left, retryAt, err := rateLeftWith(ctx, tx, bucket, key, l.Rate, now, elsewhere)
	if err != nil {
		return 0, fmt.Errorf("count the attempts of rate limiter %s: %w", l.Name, err)
	}
	if left == 0 {
		return max(retryAt, now+1), nil
	}
	// Forget the starts no window counts any longer, once a period per
	// engine: the table then holds about two periods of starts.
	period := l.Rate.Period.Milliseconds()
	if last, ok := x.e.stepRatePruned.Load(bucket); !ok || now-last.(int64) >= period {
		if err := tx.RateStartsPrune(ctx, bucket, now-period); err != nil {
			return 0, fmt.Errorf("prune rate limiter %s: %w", l.Name, err)
		}
		x.e.stepRatePruned.Store(bucket, now)
	}
	if err := tx.RateStartAdd(ctx, bucket, key, x.run.ID, now); err != nil {
		return 0, fmt.Errorf("log an attempt with rate limiter %s: %w", l.Name, err)
	}
	return 0, nil
}

// rateHeldWhy is the reason a run released for a step's rate limit
// records.
func rateHeldWhy(step string, l *flowtype.StepRateLimit, until int64) string {
	return fmt.Sprintf("step %s waits for rate limiter %s (%s) until %s", step, l.Name, l.Rate,
		time.UnixMilli(until).UTC().Format(time.RFC3339Nano))
}
