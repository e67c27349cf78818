package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Flow control: the limits of a queue, shared by every engine of the
// database (issue 21), and what a claim of a limited queue reads and
// writes to honour them.
//
// A run executes while it holds its lease, so the runs of a queue
// executing now are its leased runs (RunLeasedCounts): a slot is the lease,
// taken by the claim and given back with it on every exit path (an
// outcome, a wait, a lost lease, a rescue), and nothing else has to give
// it back. A run's start, for rate limits, is its first claim; a claim of
// a rate-limited queue logs each (RateStartAdd) and counts the log.
//
// A claim of a limited queue happens in Write: QueueLimitsLock first, then
// the counts, then the claim. On a database whose writers take turns
// (SQLite) nothing else claims between the counts and the claim. On one
// without a global write lock (PostgreSQL) QueueLimitsLock must lock the
// queue's limits until the transaction ends, so that claimers of the queue
// take turns, and each later read of the transaction must see every claim
// committed before the lock was granted.

// QueueLimitsRecord is the recorded flow control of a queue.
type QueueLimitsRecord struct {
	Queue     string
	Limits    flowtype.QueueLimits
	UpdatedAt int64
}

// RunClaimKeyParams selects the runs of one concurrency key of a queue to
// lease (” for its runs without a key), of every priority, highest first.
type RunClaimKeyParams struct {
	RunClaimParams
	Key string
}

// RunReadyKeysParams asks for up to Max concurrency keys, after After in
// key order, that have runs of Queue ready at Now, looking at no more than
// Scan keys.
type RunReadyKeysParams struct {
	Queue string
	After string
	Now   int64
	Max   int
	Scan  int
}

// RateStarts is the count of the starts of one key (or of the queue) in a
// period, and the time of the oldest of them (0: none), when the next
// start frees up.
type RateStarts struct {
	Count  int
	Oldest int64
}

// TxClaimer is implemented by a Tx that can make what a Claimer's
// ClaimAndBegin does (the leases, the first attempts and the events of
// both) one statement inside the transaction: a claim of a limited queue,
// which takes the queue's lock and counts first, then claims without the
// round trips of RunClaim, StepBeginMany and the events.
type TxClaimer interface {
	ClaimAndBeginIn(ctx context.Context, p ClaimAndBeginParams) ([]ClaimedRun, error)
}

// LimitedClaimer is implemented by a store that can make the claim of a
// queue whose only limit is a global concurrency one statement, committed
// on its own, as a Claimer's ClaimAndBegin: it leases up to p.Max runs and
// never more than the queue's concurrency minus its leased runs. Where the
// statement cannot be sure of its count (another claim of the queue
// committed while it ran) or the queue's limits are no longer a global
// concurrency alone, it claims nothing, and the engine claims again in
// Write: so no run claimed means "claim the careful way", not "none ready".
type LimitedClaimer interface {
	ClaimAndBeginLimited(ctx context.Context, p ClaimAndBeginParams) ([]ClaimedRun, error)
}

// LimitReader reads the limits of queues.
type LimitReader interface {
	// QueueLimitsList returns the limits of every queue that has some, by
	// queue name.
	QueueLimitsList(ctx context.Context) ([]QueueLimitsRecord, error)
	// QueueLimitsGet returns the limits of queue, or false when it has
	// none.
	QueueLimitsGet(ctx context.Context, queue string) (flowtype.QueueLimits, bool, error)
	// RunLeasedCounts counts the leased runs of queue by concurrency key.
	RunLeasedCounts(ctx context.Context, queue string) (map[string]int, error)
	// RateStartsCount counts the starts of queue's runs with concurrency
	// key key ('' for the queue's own rate) after since.
	RateStartsCount(ctx context.Context, queue, key string, since int64) (RateStarts, error)
}

// LimitTx sets the limits of queues and claims runs of limited queues
// inside a write transaction.
type LimitTx interface {
	// QueueLimitsSet records the limits of queue, replacing any.
	QueueLimitsSet(ctx context.Context, queue string, l flowtype.QueueLimits, now int64) error
	// QueueLimitsDelete removes the limits of queue, and reports false
	// when it had none.
	QueueLimitsDelete(ctx context.Context, queue string) (bool, error)
	// QueueLimitsLock returns the limits of queue for a claim (false: none),
	// locking them until the transaction ends on a database without a
	// global write lock (see above).
	QueueLimitsLock(ctx context.Context, queue string) (flowtype.QueueLimits, bool, error)
	// RunReadyKeys returns the concurrency keys with ready runs, in order.
	RunReadyKeys(ctx context.Context, p RunReadyKeysParams) ([]string, error)
	// RunClaimKey is RunClaim for the runs of one concurrency key.
	RunClaimKey(ctx context.Context, p RunClaimKeyParams) ([]Run, error)
	// RateStartAdd logs the start of run runID of queue at at, under key
	// ('' for the queue's own rate).
	RateStartAdd(ctx context.Context, queue, key, runID string, at int64) error
	// RateStartsPrune deletes the starts of queue at or before until.
	RateStartsPrune(ctx context.Context, queue string, until int64) error
	// RateLock makes the transactions that count and log the starts of
	// the limiter bucket take turns until they end, on a database without
	// a global write lock; a step's rate limit (which has no queue_limits
	// row to lock) takes it before RateStartsCount.
	RateLock(ctx context.Context, bucket string) error
}

// keyLimitRow is one entry of queue_limits.keys, as the migration
// describes it: periods in ms.
type keyLimitRow struct {
	Prefix      string `json:"prefix"`
	Concurrency int    `json:"concurrency,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	RatePeriod  int64  `json:"rate_period,omitempty"`
	Weight      int    `json:"weight,omitempty"`
}

// KeyLimitsJSON is the queue_limits.keys column of keys, for the adapters.
func KeyLimitsJSON(keys []flowtype.KeyLimit) string {
	rows := make([]keyLimitRow, len(keys))
	for i, k := range keys {
		rows[i] = keyLimitRow{Prefix: k.Prefix, Concurrency: k.Concurrency, Rate: k.Rate.Limit,
			RatePeriod: k.Rate.Period.Milliseconds(), Weight: k.Weight}
	}
	b, _ := json.Marshal(rows) // plain strings and numbers always marshal
	return string(b)
}

// ParseKeyLimits reads a queue_limits.keys column, for the adapters.
func ParseKeyLimits(s string) ([]flowtype.KeyLimit, error) {
	var rows []keyLimitRow
	if err := json.Unmarshal([]byte(s), &rows); err != nil {
		return nil, fmt.Errorf("read the key limits %q: %w", s, err)
	}
	var keys []flowtype.KeyLimit
	for _, r := range rows {
		keys = append(keys, flowtype.KeyLimit{Prefix: r.Prefix, Concurrency: r.Concurrency,
			Rate: flowtype.RateLimit{Limit: r.Rate, Period: time.Duration(r.RatePeriod) * time.Millisecond}, Weight: r.Weight})
	}
	return keys, nil
}

// LimitsFromColumns builds the limits of a queue_limits row, for the
// adapters.
func LimitsFromColumns(concurrency, keyConcurrency, rate, ratePeriod, keyRate, keyRatePeriod int64, fair bool, keys string) (flowtype.QueueLimits, error) {
	k, err := ParseKeyLimits(keys)
	if err != nil {
		return flowtype.QueueLimits{}, err
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return flowtype.QueueLimits{
		Concurrency: int(concurrency), KeyConcurrency: int(keyConcurrency),
		Rate:    flowtype.RateLimit{Limit: int(rate), Period: ms(ratePeriod)},
		KeyRate: flowtype.RateLimit{Limit: int(keyRate), Period: ms(keyRatePeriod)},
		Fair:    fair, Keys: k,
	}, nil
}
