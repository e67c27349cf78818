package flow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// ledger records what the bodies of a limited job did: how many ran at
// once, in all and per key, and when each started.
type ledger struct {
	mu        sync.Mutex
	now, peak int
	byKey     map[string]int
	peakByKey map[string]int
	starts    []time.Time
	order     []string // keys, in the order runs started
	done      int
}

func newLedger() *ledger {
	return &ledger{byKey: map[string]int{}, peakByKey: map[string]int{}}
}

// body returns a job handler that holds its slot for hold, recording
// itself in the ledger under the key its args carry.
func (l *ledger) body(hold time.Duration) func(context.Context, limitedArgs) error {
	return func(ctx context.Context, a limitedArgs) error {
		l.mu.Lock()
		l.now++
		l.peak = max(l.peak, l.now)
		l.byKey[a.Key]++
		l.peakByKey[a.Key] = max(l.peakByKey[a.Key], l.byKey[a.Key])
		l.starts = append(l.starts, time.Now())
		l.order = append(l.order, a.Key)
		l.mu.Unlock()
		time.Sleep(hold)
		l.mu.Lock()
		l.now--
		l.byKey[a.Key]--
		l.done++
		l.mu.Unlock()
		return nil
	}
}

func (l *ledger) finished() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// maxInWindow is the most starts the ledger saw within any window of
// length d.
func (l *ledger) maxInWindow(d time.Duration) int {
	l.mu.Lock()
	starts := slices.Clone(l.starts)
	l.mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	best := 0
	for i := range starts {
		j := i
		for j < len(starts) && starts[j].Sub(starts[i]) < d {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

type limitedArgs struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// limitedEngines opens n engines on one database, each working queue with
// a concurrency of its own of perEngine.
func limitedEngines(t *testing.T, n, perEngine int, job flow.Job[limitedArgs]) []*flow.Engine {
	t.Helper()
	path := dbPath(t)
	var engines []*flow.Engine
	for range n {
		cfg := testConfig()
		cfg.Queues = map[string]flow.QueueConfig{job.Queue: {Concurrency: perEngine}}
		e := openEngine(t, path, cfg)
		flow.RegisterJob(e, job)
		engines = append(engines, e)
	}
	return engines
}

func enqueueLimited(t *testing.T, e *flow.Engine, job flow.Job[limitedArgs], keys ...string) {
	t.Helper()
	for i, k := range keys {
		if _, err := flow.Enqueue(context.Background(), e, job, limitedArgs{Key: k, N: i}, &flow.EnqueueOptions{ConcurrencyKey: k}); err != nil {
			t.Fatal(err)
		}
	}
}

func startAll(t *testing.T, engines ...*flow.Engine) {
	t.Helper()
	for _, e := range engines {
		startEngine(t, e)
	}
}

func waitFinished(t *testing.T, l *ledger, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d runs finished", n), func() bool { return l.finished() == n })
}

// Two engines each allowed 4 runs of the queue at once execute at most the
// queue's global limit of 2 between them (issue 21: "two processes working
// one queue at Concurrency: 1 ran two jobs at once").
func TestGlobalConcurrencyAcrossEngines(t *testing.T) {
	t.Parallel()
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "pay", Queue: "pay", Handler: l.body(20 * time.Millisecond)}
	engines := limitedEngines(t, 2, 4, job)
	if err := engines[0].SetQueueLimits(context.Background(), "pay", flow.QueueLimits{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 16)
	enqueueLimited(t, engines[0], job, keys...)
	startAll(t, engines...)
	waitFinished(t, l, len(keys))
	if l.peak > 2 {
		t.Errorf("%d runs executed at once under a global limit of 2", l.peak)
	}
	if l.peak < 2 {
		t.Errorf("at most %d run executed at once: the limit of 2 was never used", l.peak)
	}
}

// At most KeyConcurrency runs of one key execute at once, while runs of
// different keys execute side by side.
func TestKeyConcurrency(t *testing.T) {
	t.Parallel()
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "sync", Queue: "sync", Handler: l.body(20 * time.Millisecond)}
	engines := limitedEngines(t, 2, 4, job)
	if err := engines[0].SetQueueLimits(context.Background(), "sync", flow.QueueLimits{
		KeyConcurrency: 1,
		Keys:           []flow.KeyLimit{{Prefix: "vip-", Concurrency: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for range 4 {
		keys = append(keys, "tenant-a", "tenant-b", "vip-c")
	}
	enqueueLimited(t, engines[0], job, keys...)
	startAll(t, engines...)
	waitFinished(t, l, len(keys))
	for key, want := range map[string]int{"tenant-a": 1, "tenant-b": 1, "vip-c": 2} {
		if got := l.peakByKey[key]; got > want {
			t.Errorf("key %s: %d runs at once, limit %d", key, got, want)
		}
	}
	if l.peak < 2 {
		t.Errorf("runs of different keys never executed side by side (peak %d)", l.peak)
	}
}

// A rate limit bounds the runs started in any window of its period, across
// engines, and the runs it holds back start as it allows.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "mail", Queue: "mail", Handler: l.body(0)}
	engines := limitedEngines(t, 2, 10, job)
	period := 300 * time.Millisecond
	if err := engines[0].SetQueueLimits(context.Background(), "mail", flow.QueueLimits{Rate: flow.RateLimit{Limit: 4, Period: period}}); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 12)
	enqueueLimited(t, engines[0], job, keys...)
	began := time.Now()
	startAll(t, engines...)
	waitFinished(t, l, len(keys))
	// The ledger's clock reads when a body begins, some milliseconds after
	// the claim the rate counts (more for one claim's runs than another's
	// on a loaded machine), so the windows measured are two thirds of the
	// period: every 12 runs at once, as without the limit, still fail it.
	window := period * 2 / 3
	if got := l.maxInWindow(window); got > 4 {
		t.Errorf("%d runs began within %s, rate 4 per %s", got, window, period)
	}
	if took := time.Since(began); took < 2*period-50*time.Millisecond {
		t.Errorf("12 runs at 4 per %s took %s, under the two periods they need", period, took)
	}
}

// Claims of a fair queue take its keys in turn: the few runs of small keys
// do not wait behind a key's large backlog enqueued before them.
func TestFairClaimsAcrossKeys(t *testing.T) {
	t.Parallel()
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "report", Queue: "report", Handler: l.body(0)}
	engines := limitedEngines(t, 1, 1, job)
	if err := engines[0].SetQueueLimits(context.Background(), "report", flow.QueueLimits{Fair: true}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for range 40 {
		keys = append(keys, "big")
	}
	keys = append(keys, "small-1", "small-2", "small-1", "small-2")
	enqueueLimited(t, engines[0], job, keys...)
	startAll(t, engines...)
	waitFinished(t, l, len(keys))
	last := 0
	for i, k := range l.order {
		if strings.HasPrefix(k, "small") {
			last = i
		}
	}
	// Round-robin over three keys serves the four small runs within the
	// first eight claims; first-in-first-out would serve them last (40-43).
	if last > 8 {
		t.Errorf("the last small run started %dth of %d: %v", last+1, len(l.order), l.order[:min(12, len(l.order))])
	}
}

// A run that waits durably holds no slot of its queue's limit: with a
// global limit of 1, a second run executes while the first sleeps.
func TestLimitSlotFreeWhileSleeping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := dbPath(t)
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"naps": {Concurrency: 4, Limits: &flow.QueueLimits{Concurrency: 1}}}
	e := openEngine(t, path, cfg)
	nap := flow.Workflow[int, int]{Name: "nap", Run: func(wc flow.Context, n int) (int, error) {
		if err := flow.Sleep(wc, 300*time.Millisecond); err != nil {
			return 0, err
		}
		return n, nil
	}}
	flow.Register(e, nap)
	startEngine(t, e)
	began := time.Now()
	var runs []*flow.Run[int]
	for i := range 3 {
		r, err := flow.Start(ctx, e, nap, i, &flow.StartOptions{Queue: "naps"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		if _, err := r.Result(waitCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	// Holding the slot through its sleep, each run would wait for the one
	// before: 900ms at least.
	if took := time.Since(began); took > slowBound(850*time.Millisecond) {
		t.Errorf("three sleeping runs under a limit of 1 took %s: a sleeping run held the slot", took)
	}
}

// An operator can see why a ready run is not starting, and the limits'
// use; bad limits are refused, naming what is wrong, and change nothing.
func TestQueueLimitsOperable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	job := flow.Job[limitedArgs]{Name: "hold", Queue: "hold", Handler: func(ctx context.Context, a limitedArgs) error {
		started <- struct{}{}
		<-release
		return nil
	}}
	engines := limitedEngines(t, 1, 4, job)
	e := engines[0]
	for _, bad := range []struct {
		l    flow.QueueLimits
		want string
	}{
		{flow.QueueLimits{Concurrency: -1}, "negative Concurrency"},
		{flow.QueueLimits{Rate: flow.RateLimit{Limit: 3}}, "needs a Period"},
		{flow.QueueLimits{Keys: []flow.KeyLimit{{Concurrency: 1}}}, "empty Prefix"},
	} {
		err := e.SetQueueLimits(ctx, "hold", bad.l)
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "hold") {
			t.Errorf("SetQueueLimits(%+v) = %v, want an error naming the queue and %q", bad.l, err, bad.want)
		}
	}
	if uses, err := e.QueueLimits(ctx); err != nil || len(uses) != 0 {
		t.Fatalf("after refused limits: %+v, %v; want none", uses, err)
	}
	if err := e.SetQueueLimits(ctx, "hold", flow.QueueLimits{Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	enqueueLimited(t, e, job, "", "")
	startEngine(t, e)
	<-started
	var held *flow.RunInfo
	eventually(t, "a run left ready", func() bool {
		list, err := e.ListRuns(ctx, flow.RunFilter{Status: flow.StatusPending})
		if err != nil || len(list) != 1 {
			return false
		}
		held = &list[0]
		return true
	})
	why, err := e.HeldBy(ctx, held.ID)
	if err != nil || why != "held by the global limit of queue hold: 1 of 1 running" {
		t.Errorf("HeldBy = %q, %v", why, err)
	}
	uses, err := e.QueueLimits(ctx)
	if err != nil || len(uses) != 1 {
		t.Fatalf("QueueLimits = %+v, %v", uses, err)
	}
	if u := uses[0]; u.Queue != "hold" || u.Running != 1 || u.Ready != 1 || u.HeldBack != 1 || u.Limits.Concurrency != 1 {
		t.Errorf("QueueLimits = %+v, want queue hold, 1 running, 1 ready, 1 held back", u)
	}
	// Raising the limit at run time lets the held run start.
	if err := e.SetQueueLimits(ctx, "hold", flow.QueueLimits{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-waitCtx(t).Done():
		t.Fatal("the held run did not start once the limit was raised")
	}
	close(release)
	// Removing the limits (the zero value) removes the queue's row.
	if err := e.SetQueueLimits(ctx, "hold", flow.QueueLimits{}); err != nil {
		t.Fatal(err)
	}
	if uses, err := e.QueueLimits(ctx); err != nil || len(uses) != 0 {
		t.Errorf("after removing the limits: %+v, %v", uses, err)
	}
}

// An engine starts and stops working a queue while it runs (a queue per
// tenant that appears at run time), and its limits come with it.
func TestWorkQueueAtRunTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "tenant", Queue: "tenant-7", Handler: l.body(5 * time.Millisecond)}
	e := openEngine(t, dbPath(t), testConfig())
	flow.RegisterJob(e, job)
	startEngine(t, e)
	enqueueLimited(t, e, job, "", "", "", "")
	time.Sleep(100 * time.Millisecond)
	if n := l.finished(); n != 0 {
		t.Fatalf("%d runs of a queue the engine does not work finished", n)
	}
	if err := e.WorkQueue(ctx, "tenant-7", flow.QueueConfig{Concurrency: 4, Limits: &flow.QueueLimits{Concurrency: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := e.WorkQueue(ctx, "tenant-7", flow.QueueConfig{}); err == nil || !strings.Contains(err.Error(), "tenant-7") {
		t.Errorf("working a worked queue again: %v, want an error naming it", err)
	}
	waitFinished(t, l, 4)
	if l.peak != 1 {
		t.Errorf("peak %d under the limit of 1 WorkQueue set", l.peak)
	}
	if err := e.StopWorkingQueue("tenant-7"); err != nil {
		t.Fatal(err)
	}
	if err := e.StopWorkingQueue("tenant-7"); err == nil || !strings.Contains(err.Error(), "does not work") {
		t.Errorf("stopping an unworked queue: %v", err)
	}
	enqueueLimited(t, e, job, "")
	time.Sleep(100 * time.Millisecond)
	if n := l.finished(); n != 4 {
		t.Errorf("%d runs finished after the engine stopped working the queue, want 4", n)
	}
	if err := e.WorkQueue(ctx, "tenant-7", flow.QueueConfig{}); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, l, 5)
}
