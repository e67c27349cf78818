package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// Flow control scenarios: the SQLite drain of N no-op jobs under a queue
// limit ("flowlite-limited") beside the same drain without it ("flowlite",
// the same jobs with the same concurrency keys), so that the table's ratio
// is limited ÷ unlimited, and a check of how closely the limit held, from
// the handlers' own record (the most running at once, in all and per key,
// and the most started in any window of the rate's period).

// limitsGlobal is a global concurrency limit above the drain's natural
// concurrency (the engine's own slots): it must cost little.
const limitsGlobal = 2 * flowliteConcurrency

// limitsKeys is the number of concurrency keys of the per-key scenario,
// each at a limit of one run at a time.
const limitsKeys = 1000

// limitsRate is the rate of the rate scenario, per second; its drain takes
// about N/limitsRate seconds by design, so its figure says how close to the
// rate the drain ran.
const limitsRate = 2000

// limitsHold is how long each handler holds its slot: long enough for runs
// to overlap (so that a limit that did not hold would show), short enough
// for the engine's slots not to bound the drain (64 slots: 64k/s).
const limitsHold = time.Millisecond

// limitScenario is one flow control scenario's set-up.
type limitScenario struct {
	limits flow.QueueLimits
	keys   int // 0: runs without a key
}

func limitScenarios() map[string]limitScenario {
	return map[string]limitScenario{
		"limits-global": {limits: flow.QueueLimits{Concurrency: limitsGlobal}},
		"limits-keys":   {limits: flow.QueueLimits{KeyConcurrency: 1}, keys: limitsKeys},
		"limits-rate":   {limits: flow.QueueLimits{Rate: flow.RateLimit{Limit: limitsRate, Period: time.Second}}},
	}
}

// limitsPlan is the scenarios of the plan, limited first.
func limitsPlan() []scenario {
	sys := []string{"flowlite-limited", "flowlite"}
	return []scenario{
		{Name: fmt.Sprintf("{n} jobs drained under a global limit of %d (above the engine's %d slots)", limitsGlobal, flowliteConcurrency),
			Key: "limits-global", Unit: "jobs/s", N: 20000, Systems: sys},
		{Name: fmt.Sprintf("{n} jobs drained, %d keys at a per-key limit of 1", limitsKeys),
			Key: "limits-keys", Unit: "jobs/s", N: 20000, Systems: sys},
		{Name: fmt.Sprintf("{n} jobs drained under a rate limit of %d/s", limitsRate),
			Key: "limits-rate", Unit: "jobs/s", N: 20000, Systems: sys},
	}
}

// limitsDrain returns the scenario function of key: limited or not.
func limitsDrain(key string, limited bool) scenarioFunc {
	ls := limitScenarios()[key]
	return func(ctx context.Context, p params) (result, error) {
		e, db, err := flowliteSQLite(ctx, p.Dir)
		if err != nil {
			return result{}, err
		}
		defer e.Close()
		defer db.Close()
		rec := newLimitRecord()
		var handled atomic.Int64
		job := flow.Job[int]{Name: "noop", Handler: func(_ context.Context, n int) error {
			done := rec.begin(limitKey(ls.keys, n, p.N))
			time.Sleep(limitsHold)
			done()
			handled.Add(1)
			return nil
		}}
		flow.RegisterJob(e, job)
		if limited {
			if err := e.SetQueueLimits(ctx, flow.DefaultQueue, ls.limits); err != nil {
				return result{}, err
			}
		}
		keyed := func(i int) *flow.EnqueueOptions {
			return &flow.EnqueueOptions{ConcurrencyKey: limitKey(ls.keys, i, p.N)}
		}
		if err := flowliteEnqueueBulkWith(ctx, e, db, job, p.N, keyed); err != nil {
			return result{}, err
		}
		r, err := flowliteDrain(ctx, e, p.N, &handled)
		if err != nil {
			return result{}, err
		}
		r.Held = rec.summary(ls, limited)
		return r, nil
	}
}

// limitKey is the concurrency key of job n of total among keys ("" for
// none): each key's jobs are enqueued one after another, so that without a
// per-key limit the drain runs many of one key at once.
func limitKey(keys, n, total int) string {
	if keys == 0 {
		return ""
	}
	return "k" + strconv.Itoa(n*keys/max(total, 1))
}

// limitRecord is what the handlers saw: how many ran at once, in all and
// per key, and when each began.
type limitRecord struct {
	mu        sync.Mutex
	now, peak int
	byKey     map[string]int
	peakKey   int
	starts    []time.Time
}

func newLimitRecord() *limitRecord { return &limitRecord{byKey: map[string]int{}} }

// begin records a handler's start under key and returns its end.
func (r *limitRecord) begin(key string) func() {
	r.mu.Lock()
	r.now++
	r.peak = max(r.peak, r.now)
	if key != "" {
		r.byKey[key]++
		r.peakKey = max(r.peakKey, r.byKey[key])
	}
	r.starts = append(r.starts, time.Now())
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.now--
		if key != "" {
			r.byKey[key]--
		}
		r.mu.Unlock()
	}
}

// summary says how closely the limits of ls held (or, unlimited, what the
// same drain did without them).
func (r *limitRecord) summary(ls limitScenario, limited bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	of := func(limit int) string {
		if !limited {
			return "no limit"
		}
		return "limit " + strconv.Itoa(limit)
	}
	switch {
	case ls.limits.Concurrency > 0:
		return fmt.Sprintf("most running at once %d (%s)", r.peak, of(ls.limits.Concurrency))
	case ls.limits.KeyConcurrency > 0:
		return fmt.Sprintf("most running at once per key %d (%s)", r.peakKey, of(ls.limits.KeyConcurrency))
	default:
		// Handlers begin some way after the claim the rate counts, so the
		// window is the period less a tenth (as flow's tests measure it).
		window := ls.limits.Rate.Period * 9 / 10
		return fmt.Sprintf("most started in any %s %d (%s per %s)", window, mostInWindow(r.starts, window), of(ls.limits.Rate.Limit), ls.limits.Rate.Period)
	}
}

// mostInWindow is the most of starts within any window of length d.
func mostInWindow(starts []time.Time, d time.Duration) int {
	s := slices.Clone(starts)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	best, j := 0, 0
	for i := range s {
		for j < len(s) && s[j].Sub(s[i]) < d {
			j++
		}
		best = max(best, j-i)
	}
	return best
}
