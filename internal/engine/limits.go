package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Flow control across engines (issue 21): the limits of a queue are a row
// of the database, read by every engine's claims of the queue, so they hold
// whichever engine claims.
//
//   - A run executes while it holds its lease, so the slots a limit counts
//     are the queue's leased runs (store.LimitReader.RunLeasedCounts). The
//     lease is given back on every exit path already (an outcome, a durable
//     wait, a lost lease, the rescue of a crashed engine's runs), so there
//     is no slot to leak.
//   - A rate counts claims: a run's first, and every resume after a wait, a
//     retry's backoff or a rescue, each of which runs the run's code again.
//   - A claim of a limited queue is one write transaction: the limits
//     (locked on PostgreSQL, see store/limit.go), the counts, then the
//     claim of what they allow. Queues without limits keep the claim they
//     had, one statement on PostgreSQL, and so does a queue whose only
//     limit is a global concurrency where the store can make it one
//     statement (store.LimitedClaimer; the transaction when that one
//     cannot be sure of its count).
//   - Fair claims (QueueLimits.Keyed) take the keys with ready runs in key
//     order from where this engine's last claim of the queue stopped, each
//     key's weight at a time, round after round, then the runs without a
//     key; so a key with a huge backlog gets one turn per round like the
//     others.

// limitsRefresh is how often an engine reads the limits of every queue
// again. A limit set by another engine applies here from the next read;
// a limit set or removed here applies at once. Claims of a queue known to
// be limited read its limits again inside the claim, so a limit lowered or
// removed elsewhere applies from the next claim.
const limitsRefresh = time.Second

// MaxConcurrencyKey is the longest concurrency key a run may carry, in
// bytes.
const MaxConcurrencyKey = 256

// fairKeyScan bounds how many keys a fair claim looks at in one claim.
const fairKeyScan = 1000

// limitCache is an engine's view of the limits of every queue.
type limitCache struct {
	mu       sync.Mutex
	byQueue  map[string]flowtype.QueueLimits
	loadedAt time.Time
	cursor   map[string]string // per queue: the last key a fair claim served
	retryAt  map[string]int64  // per queue: when a rate that held back its last claim frees a start
}

// holdUntil records when a rate that held back the last claim of queue
// frees a start (0: none held it back).
func (c *limitCache) holdUntil(queue string, at int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retryAt == nil {
		c.retryAt = make(map[string]int64)
	}
	c.retryAt[queue] = at
}

// nextTry returns, for a claimer of queue about to sleep for poll, how long
// to sleep: until a rate that held back its last claim frees a start, if
// that is sooner.
func (c *limitCache) nextTry(queue string, poll time.Duration, now int64) time.Duration {
	c.mu.Lock()
	at := c.retryAt[queue]
	c.mu.Unlock()
	if at == 0 {
		return poll
	}
	return max(min(poll, time.Duration(at-now)*time.Millisecond), time.Millisecond)
}

// limited reports whether queue had limits when this engine last read
// them.
func (c *limitCache) limited(queue string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.byQueue[queue]
	return ok
}

// limitsOf returns the limits of queue as this engine last read them,
// reading every queue's again when that was more than limitsRefresh ago.
// An error keeps the last view (the claim reports the database's state).
func (e *Engine) limitsOf(ctx context.Context, queue string) (flowtype.QueueLimits, bool) {
	c := &e.limits
	c.mu.Lock()
	stale := time.Since(c.loadedAt) >= limitsRefresh
	c.mu.Unlock()
	if stale {
		_ = e.loadLimits(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.byQueue[queue]
	return l, ok
}

// loadLimits reads the limits of every queue into the cache.
func (e *Engine) loadLimits(ctx context.Context) error {
	recs, err := e.store.Reader().QueueLimitsList(ctx)
	if err != nil {
		// Keep the last view until the next refresh: a database that is
		// out of reach is not read again by every claim.
		e.limits.mu.Lock()
		e.limits.loadedAt = time.Now()
		e.limits.mu.Unlock()
		return err
	}
	byQueue := make(map[string]flowtype.QueueLimits, len(recs))
	for _, r := range recs {
		byQueue[r.Queue] = r.Limits
	}
	c := &e.limits
	c.mu.Lock()
	c.byQueue, c.loadedAt = byQueue, time.Now()
	c.mu.Unlock()
	return nil
}

// SetQueueLimits sets the flow control of queue for every engine of the
// database, replacing what it had; the zero QueueLimits removes it. It
// applies at once to this engine's claims and within limitsRefresh to the
// others'.
func (e *Engine) SetQueueLimits(ctx context.Context, queue string, l flowtype.QueueLimits) error {
	if err := CheckName("queue", queue); err != nil {
		return fmt.Errorf("set the limits of queue: %w", err)
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("set the limits of queue %s: %w", queue, err)
	}
	err := e.store.Write(ctx, func(tx store.Tx) error {
		if l.IsZero() {
			_, err := tx.QueueLimitsDelete(ctx, queue)
			return err
		}
		return tx.QueueLimitsSet(ctx, queue, l, e.nowMs())
	})
	if err != nil {
		return err
	}
	e.log.Info("queue limits set", "queue", queue, "limits", fmt.Sprintf("%+v", l))
	_ = e.loadLimits(ctx) // the next claim reads them anyway if this fails
	e.Wake(queue)
	return nil
}

// QueueLimits returns the limits of every queue that has some, with what
// they hold now, by queue name.
func (e *Engine) QueueLimits(ctx context.Context) ([]flowtype.QueueLimitUse, error) {
	var out []flowtype.QueueLimitUse
	err := e.store.Read(ctx, func(r store.Reader) error {
		recs, err := r.QueueLimitsList(ctx)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		now := e.nowMs()
		counts, err := r.QueueCounts(ctx, store.QueueCountsParams{Now: now, MinuteAgo: now, HourAgo: now})
		if err != nil {
			return err
		}
		ready := make(map[string]int)
		for _, c := range counts {
			ready[c.Queue] += int(c.Ready)
		}
		for _, rec := range recs {
			use, err := limitUse(ctx, r, rec, now)
			if err != nil {
				return err
			}
			use.Ready = ready[rec.Queue]
			free := use.Ready
			if rec.Limits.Concurrency > 0 {
				free = min(free, max(rec.Limits.Concurrency-use.Running, 0))
			}
			if !rec.Limits.Rate.IsZero() {
				free = min(free, max(rec.Limits.Rate.Limit-use.Started, 0))
			}
			use.HeldBack = use.Ready - free
			out = append(out, use)
		}
		return nil
	})
	return out, err
}

// limitUse is what the limits of one queue hold at now.
func limitUse(ctx context.Context, r store.Reader, rec store.QueueLimitsRecord, now int64) (flowtype.QueueLimitUse, error) {
	use := flowtype.QueueLimitUse{Queue: rec.Queue, Limits: rec.Limits}
	running, err := r.RunLeasedCounts(ctx, rec.Queue)
	if err != nil {
		return use, err
	}
	use.RunningByKey = make(map[string]int)
	for k, n := range running {
		use.Running += n
		if k != "" {
			use.RunningByKey[k] = n
		}
	}
	if !rec.Limits.Rate.IsZero() {
		rs, err := r.RateStartsCount(ctx, rec.Queue, "", now-rec.Limits.Rate.Period.Milliseconds())
		if err != nil {
			return use, err
		}
		use.Started = rs.Count
	}
	return use, nil
}

// HeldBy says why the run runID, ready to start, is not starting, when a
// limit of its queue holds it back: "held by the global limit of queue X: 5
// of 5 running". It returns "" for a run that is not ready (executing,
// finished, waiting for a time or a signal) or that no limit holds back.
func (e *Engine) HeldBy(ctx context.Context, runID string) (string, error) {
	r := e.store.Reader()
	run, err := r.RunGet(ctx, runID)
	if err != nil {
		return "", err
	}
	now := e.nowMs()
	if run.LeaseOwner != "" || run.RunAt > now || !readyStatus(run.Status) {
		return "", nil
	}
	l, ok, err := r.QueueLimitsGet(ctx, run.Queue)
	if err != nil || !ok {
		return "", err
	}
	running, err := r.RunLeasedCounts(ctx, run.Queue)
	if err != nil {
		return "", err
	}
	total := 0
	for _, n := range running {
		total += n
	}
	if l.Concurrency > 0 && total >= l.Concurrency {
		return fmt.Sprintf("held by the global limit of queue %s: %d of %d running", run.Queue, total, l.Concurrency), nil
	}
	if !l.Rate.IsZero() {
		rs, err := r.RateStartsCount(ctx, run.Queue, "", now-l.Rate.Period.Milliseconds())
		if err != nil {
			return "", err
		}
		if rs.Count >= l.Rate.Limit {
			return fmt.Sprintf("held by the rate limit of queue %s: %d of %d started in %s", run.Queue, rs.Count, l.Rate.Limit, l.Rate.Period), nil
		}
	}
	if key := run.ConcurrencyKey; key != "" {
		kl := l.ForKey(key)
		if kl.Concurrency > 0 && running[key] >= kl.Concurrency {
			return fmt.Sprintf("held by the limit of key %q of queue %s: %d of %d running", key, run.Queue, running[key], kl.Concurrency), nil
		}
		if !kl.Rate.IsZero() {
			rs, err := r.RateStartsCount(ctx, run.Queue, key, now-kl.Rate.Period.Milliseconds())
			if err != nil {
				return "", err
			}
			if rs.Count >= kl.Rate.Limit {
				return fmt.Sprintf("held by the rate limit of key %q of queue %s: %d of %d started in %s", key, run.Queue, rs.Count, kl.Rate.Limit, kl.Rate.Period), nil
			}
		}
	}
	return "", nil
}

// globalOnly reports whether l limits nothing but the queue's
// concurrency, which a store.LimitedClaimer claims in one statement.
func globalOnly(l flowtype.QueueLimits) bool {
	return l.Concurrency > 0 && l.Rate.IsZero() && !l.Keyed()
}

// readyStatus reports whether a run in status s can be claimed once due
// and unleased.
func readyStatus(s flowtype.RunStatus) bool {
	return s == flowtype.StatusPending || s == flowtype.StatusWaiting || s == flowtype.StatusCompensating
}

// limitedClaim is what claimLimited leased: the runs, and when the limits
// may allow more (Unix ms; 0: when a run of the queue finishes here, or at
// the next poll). Begun is set when the claim also recorded the events and
// first attempts (store.TxClaimer), with the attempts it began.
type limitedClaim struct {
	now     int64 // the claim's time, read once it held the queue's lock
	runs    []store.Run
	retryAt int64
	begun   []store.ClaimedRun
}

// claimLimited leases, in tx, up to p.Max runs of a queue that has limits,
// as many as they allow.
func (e *Engine) claimLimited(ctx context.Context, tx store.Tx, p store.RunClaimParams, set *elsewhere) (limitedClaim, error) {
	l, ok, err := tx.QueueLimitsLock(ctx, p.Queue)
	if err != nil {
		return limitedClaim{}, err
	}
	if ok && e.countsAcrossSet(l) && set == nil {
		// Set elsewhere in the shard set since this engine read them: no
		// claim without the set's lock. The next claim reads them again
		// and takes it.
		e.limits.mu.Lock()
		e.limits.loadedAt = time.Time{}
		e.limits.mu.Unlock()
		now := e.nowMs()
		return limitedClaim{now: now, retryAt: now + 1}, nil
	}
	if set == nil {
		set = &elsewhere{}
	}
	// The lock may have waited for other claims of the queue: the claim,
	// its leases and its starts are as of now, when it holds the lock.
	now := e.nowMs()
	p.LeaseExpiresAt += now - p.Now
	p.Now = now
	if !ok { // removed since this engine read them
		c, err := e.leaseIn(ctx, tx, p)
		c.now = now
		return c, err
	}
	running, err := tx.RunLeasedCounts(ctx, p.Queue)
	if err != nil {
		return limitedClaim{}, err
	}
	var b budget
	b.max = p.Max
	if l.Concurrency > 0 {
		total := set.running
		for _, n := range running {
			total += n
		}
		b.max = min(b.max, l.Concurrency-total)
	}
	if err := b.rate(ctx, tx, p.Queue, "", l.Rate, p.Now, set.started); err != nil {
		return limitedClaim{}, err
	}
	var c limitedClaim
	if b.max > 0 {
		p.Max = b.max
		if l.Keyed() {
			c.runs, err = e.claimFair(ctx, tx, p, l, running, &b)
		} else {
			c, err = e.leaseIn(ctx, tx, p)
		}
		if err != nil {
			return limitedClaim{}, err
		}
	}
	if err := logStarts(ctx, tx, p.Queue, l, c.runs, p.Now); err != nil {
		return limitedClaim{}, err
	}
	c.retryAt, c.now = b.retryAt, now
	return c, nil
}

// leaseIn leases up to p.Max ready runs of the queue in tx: in one
// statement that also records their events and first attempts where the
// store can (store.TxClaimer), else with RunClaim.
func (e *Engine) leaseIn(ctx context.Context, tx store.Tx, p store.RunClaimParams) (limitedClaim, error) {
	if tc, ok := tx.(store.TxClaimer); ok {
		claimed, err := tc.ClaimAndBeginIn(ctx, store.ClaimAndBeginParams{RunClaimParams: p, FirstSteps: e.firstSteps()})
		if err != nil {
			return limitedClaim{}, err
		}
		c := limitedClaim{runs: make([]store.Run, len(claimed)), begun: claimed}
		for i, r := range claimed {
			c.runs[i] = r.Run
		}
		return c, nil
	}
	runs, err := tx.RunClaim(ctx, p)
	return limitedClaim{runs: runs}, err
}

// budget is how many runs a claim may still take, and the earliest time a
// rate that held it back frees a start.
type budget struct {
	max     int
	retryAt int64
}

// rate lowers b to what the rate l of key (” for the queue's) allows at
// now, with the starts logged in the other files of a shard set.
func (b *budget) rate(ctx context.Context, tx store.Tx, queue, key string, l flowtype.RateLimit, now int64, elsewhere store.RateStarts) error {
	left, retryAt, err := rateLeftWith(ctx, tx, queue, key, l, now, elsewhere)
	if err != nil {
		return err
	}
	if left < b.max {
		b.max = left
		b.hold(retryAt)
	}
	return nil
}

func (b *budget) hold(at int64) {
	if at > 0 && (b.retryAt == 0 || at < b.retryAt) {
		b.retryAt = at
	}
}

// rateLeft returns how many starts the rate l of key leaves at now, and,
// when none, when the oldest start in the period leaves it.
func rateLeft(ctx context.Context, tx store.Tx, queue, key string, l flowtype.RateLimit, now int64) (int, int64, error) {
	return rateLeftWith(ctx, tx, queue, key, l, now, store.RateStarts{})
}

// rateLeftWith is rateLeft counting, besides tx's, the starts elsewhere.
func rateLeftWith(ctx context.Context, tx store.Tx, queue, key string, l flowtype.RateLimit, now int64, elsewhere store.RateStarts) (int, int64, error) {
	if l.IsZero() {
		return int(^uint(0) >> 1), 0, nil
	}
	period := l.Period.Milliseconds()
	rs, err := tx.RateStartsCount(ctx, queue, key, now-period)
	if err != nil {
		return 0, 0, err
	}
	rs.Count += elsewhere.Count
	if elsewhere.Oldest > 0 && (rs.Oldest == 0 || elsewhere.Oldest < rs.Oldest) {
		rs.Oldest = elsewhere.Oldest
	}
	left := max(l.Limit-rs.Count, 0)
	if left == 0 {
		return 0, rs.Oldest + period, nil
	}
	return left, 0, nil
}

// claimFair takes up to p.Max ready runs of a keyed queue round-robin
// across its keys (see the top of this file).
func (e *Engine) claimFair(ctx context.Context, tx store.Tx, p store.RunClaimParams, l flowtype.QueueLimits, running map[string]int, b *budget) ([]store.Run, error) {
	keys, err := e.fairKeys(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	// A key's budget is read when its turn first comes: a claim that fills
	// up on the first keys reads nothing of the others.
	left := make(map[string]int, len(keys))
	budgetOf := func(key string) (int, error) {
		if n, ok := left[key]; ok {
			return n, nil
		}
		kl := l.ForKey(key)
		n := p.Max
		if kl.Concurrency > 0 {
			n = min(n, kl.Concurrency-running[key])
		}
		if n > 0 {
			r, retryAt, err := rateLeft(ctx, tx, p.Queue, key, kl.Rate, p.Now)
			if err != nil {
				return 0, err
			}
			if r < n {
				n = r
				b.hold(retryAt)
			}
		}
		left[key] = max(n, 0)
		return left[key], nil
	}
	var runs []store.Run
	want := p.Max
	last, served := "", false
	for want > 0 {
		progress := false
		for _, key := range keys {
			n, err := budgetOf(key)
			if err != nil {
				return nil, err
			}
			take := min(l.ForKey(key).Weight, n, want)
			if take <= 0 {
				continue
			}
			kp := p
			kp.Max = take
			got, err := tx.RunClaimKey(ctx, store.RunClaimKeyParams{RunClaimParams: kp, Key: key})
			if err != nil {
				return nil, err
			}
			runs = append(runs, got...)
			want -= len(got)
			left[key] -= len(got)
			if len(got) < take {
				left[key] = 0 // nothing more is ready
			}
			if len(got) > 0 {
				progress, last, served = true, key, true
			}
			if want == 0 {
				break
			}
		}
		if !progress {
			break
		}
	}
	if served {
		e.limits.mu.Lock()
		if e.limits.cursor == nil {
			e.limits.cursor = make(map[string]string)
		}
		e.limits.cursor[p.Queue] = last
		e.limits.mu.Unlock()
	}
	return runs, nil
}

// fairKeys lists the keys with ready runs of the queue in the order a fair
// claim serves them: from the key after the last one this engine served,
// wrapping around, then ” for the runs without a key.
func (e *Engine) fairKeys(ctx context.Context, tx store.Tx, p store.RunClaimParams) ([]string, error) {
	e.limits.mu.Lock()
	cursor := e.limits.cursor[p.Queue]
	e.limits.mu.Unlock()
	// More keys than runs to claim: keys at their limit are passed over.
	want := min(fairKeyScan, 4*p.Max+8)
	keys, err := tx.RunReadyKeys(ctx, store.RunReadyKeysParams{Queue: p.Queue, After: cursor, Now: p.Now, Max: want, Scan: fairKeyScan})
	if err != nil {
		return nil, err
	}
	if len(keys) < want && cursor != "" {
		more, err := tx.RunReadyKeys(ctx, store.RunReadyKeysParams{Queue: p.Queue, Now: p.Now, Max: want - len(keys), Scan: fairKeyScan})
		if err != nil {
			return nil, err
		}
		for _, k := range more {
			if k > cursor {
				break // the first list has it
			}
			keys = append(keys, k)
		}
	}
	return append(keys, ""), nil
}

// logStarts logs the claims of runs for the rates of l that count them,
// and forgets the starts no period counts any longer.
func logStarts(ctx context.Context, tx store.Tx, queue string, l flowtype.QueueLimits, runs []store.Run, now int64) error {
	longest := l.LongestPeriod()
	if longest == 0 {
		return nil
	}
	if err := tx.RateStartsPrune(ctx, queue, now-longest.Milliseconds()); err != nil {
		return err
	}
	for _, r := range runs {
		if !l.Rate.IsZero() {
			if err := tx.RateStartAdd(ctx, queue, "", r.ID, now); err != nil {
				return err
			}
		}
		if key := r.ConcurrencyKey; key != "" && !l.ForKey(key).Rate.IsZero() {
			if err := tx.RateStartAdd(ctx, queue, key, r.ID, now); err != nil {
				return err
			}
		}
	}
	return nil
}
