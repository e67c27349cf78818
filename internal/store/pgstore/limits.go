package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Flow control (store/limit.go). A claim of a limited queue locks the
// queue's row of queue_limits first (QueueLimitsLock), so that the claimers
// of the queue take turns, and each of its later statements, under READ
// COMMITTED, sees the claims committed before.

func limitsFromRow(r pgdb.QueueLimit) (flowtype.QueueLimits, error) {
	return store.LimitsFromColumns(r.Concurrency, r.KeyConcurrency, r.Rate, r.RatePeriod, r.KeyRate, r.KeyRatePeriod, r.Fair, r.Keys)
}

func (r reader) QueueLimitsList(ctx context.Context) ([]store.QueueLimitsRecord, error) {
	rows, err := r.q.QueueLimitsList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list queue limits: %w", interpretError(ctx, err))
	}
	out := make([]store.QueueLimitsRecord, 0, len(rows))
	for _, row := range rows {
		l, err := limitsFromRow(row)
		if err != nil {
			return nil, fmt.Errorf("list queue limits: queue %s: %w", row.Queue, err)
		}
		out = append(out, store.QueueLimitsRecord{Queue: row.Queue, Limits: l, UpdatedAt: row.UpdatedAt})
	}
	return out, nil
}

func (r reader) QueueLimitsGet(ctx context.Context, queue string) (flowtype.QueueLimits, bool, error) {
	row, err := r.q.QueueLimitsGet(ctx, queue)
	if errors.Is(err, sql.ErrNoRows) {
		return flowtype.QueueLimits{}, false, nil
	}
	if err != nil {
		return flowtype.QueueLimits{}, false, fmt.Errorf("read the limits of queue %s: %w", queue, interpretError(ctx, err))
	}
	l, err := limitsFromRow(row)
	if err != nil {
		return flowtype.QueueLimits{}, false, fmt.Errorf("read the limits of queue %s: %w", queue, err)
	}
	return l, true, nil
}

func (r reader) RunLeasedCounts(ctx context.Context, queue string) (map[string]int, error) {
	rows, err := r.q.RunLeasedCounts(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("count the running runs of queue %s: %w", queue, interpretError(ctx, err))
	}
	out := make(map[string]int, len(rows))
	for _, row := range rows {
		out[row.ConcurrencyKey] = int(row.Runs)
	}
	return out, nil
}

func (r reader) RateStartsCount(ctx context.Context, queue, key string, since int64) (store.RateStarts, error) {
	row, err := r.q.RateStartsCount(ctx, pgdb.RateStartsCountParams{Queue: queue, Key: key, Since: since})
	if err != nil {
		return store.RateStarts{}, fmt.Errorf("count the starts of queue %s: %w", queue, interpretError(ctx, err))
	}
	return store.RateStarts{Count: int(row.Starts), Oldest: row.Oldest}, nil
}

func (t *tx) QueueLimitsSet(ctx context.Context, queue string, l flowtype.QueueLimits, now int64) error {
	err := t.q.QueueLimitsSet(ctx, pgdb.QueueLimitsSetParams{
		Queue: queue, Concurrency: int64(l.Concurrency), KeyConcurrency: int64(l.KeyConcurrency),
		Rate: int64(l.Rate.Limit), RatePeriod: l.Rate.Period.Milliseconds(),
		KeyRate: int64(l.KeyRate.Limit), KeyRatePeriod: l.KeyRate.Period.Milliseconds(),
		Fair: l.Fair, Keys: store.KeyLimitsJSON(l.Keys), UpdatedAt: now,
	})
	if err != nil {
		return fmt.Errorf("set the limits of queue %s: %w", queue, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) QueueLimitsDelete(ctx context.Context, queue string) (bool, error) {
	n, err := t.q.QueueLimitsDelete(ctx, queue)
	if err != nil {
		return false, fmt.Errorf("remove the limits of queue %s: %w", queue, interpretError(ctx, err))
	}
	return n > 0, nil
}

func (t *tx) QueueLimitsLock(ctx context.Context, queue string) (flowtype.QueueLimits, bool, error) {
	row, err := t.q.QueueLimitsLock(ctx, queue)
	if errors.Is(err, sql.ErrNoRows) {
		return flowtype.QueueLimits{}, false, nil
	}
	if err != nil {
		return flowtype.QueueLimits{}, false, fmt.Errorf("lock the limits of queue %s: %w", queue, interpretError(ctx, err))
	}
	l, err := limitsFromRow(row)
	if err != nil {
		return flowtype.QueueLimits{}, false, fmt.Errorf("lock the limits of queue %s: %w", queue, err)
	}
	return l, true, nil
}

func (t *tx) RunReadyKeys(ctx context.Context, p store.RunReadyKeysParams) ([]string, error) {
	keys, err := t.q.RunReadyKeys(ctx, pgdb.RunReadyKeysParams{
		Queue: p.Queue, After: p.After, Now: p.Now, MaxKeys: int64(p.Max), MaxScan: int64(p.Scan),
	})
	if err != nil {
		return nil, fmt.Errorf("list the keys with ready runs of queue %s: %w", p.Queue, interpretError(ctx, err))
	}
	return keys, nil
}

func (t *tx) RunClaimKey(ctx context.Context, p store.RunClaimKeyParams) ([]store.Run, error) {
	server, heldBefore, err := t.s.serverGate(ctx, t.q, p.Now)
	if err != nil {
		return nil, fmt.Errorf("claim runs of key %q of queue %s: %w", p.Key, p.Queue, interpretError(ctx, err))
	}
	rows, err := t.q.RunClaimKey(ctx, pgdb.RunClaimKeyParams{
		Owner: p.Owner, LeaseExpiresAt: p.LeaseExpiresAt, Now: p.Now, Queue: p.Queue, Key: p.Key,
		Known: knownJSON(p.Known), MaxRuns: int64(p.Max), ServerStarted: server, HeldBefore: heldBefore,
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs of key %q of queue %s: %w", p.Key, p.Queue, interpretError(ctx, err))
	}
	return runsFromRows(rows), nil
}

func (t *tx) RateStartAdd(ctx context.Context, queue, key, runID string, at int64) error {
	if err := t.q.RateStartAdd(ctx, pgdb.RateStartAddParams{Queue: queue, Key: key, At: at, RunID: runID}); err != nil {
		return fmt.Errorf("log the start of run %s of queue %s: %w", runID, queue, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) RateStartsPrune(ctx context.Context, queue string, until int64) error {
	if err := t.q.RateStartsPrune(ctx, pgdb.RateStartsPruneParams{Queue: queue, Until: until}); err != nil {
		return fmt.Errorf("prune the starts of queue %s: %w", queue, interpretError(ctx, err))
	}
	return nil
}

// rateLockID returns the advisory lock of a rate limiter's bucket in a
// schema (see RateLock in db/queries/postgres/limits.sql).
func rateLockID(schema, bucket string) int64 {
	h := fnv.New64a()
	h.Write([]byte("flowlite\x00rate\x00" + schema + "\x00" + bucket))
	return int64(h.Sum64())
}

func (t *tx) RateLock(ctx context.Context, bucket string) error {
	if err := t.q.RateLock(ctx, rateLockID(t.s.schema, bucket)); err != nil {
		return fmt.Errorf("lock rate limiter %q: %w", bucket, interpretError(ctx, err))
	}
	return nil
}
