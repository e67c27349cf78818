package flow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// A step's rate limit holds across engines: two engines running a
// workflow whose second step calls a "rate-limited API" begin at most the
// limiter's attempts per period between them, the first step of every run
// is not held back, and each held-back run records why it waits.
func TestStepRateLimitAcrossEngines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger()
	period := 300 * time.Millisecond
	limit := flow.StepRateLimit{Name: "payments-api", Rate: flow.RateLimit{Limit: 3, Period: period}}
	charge := flow.Step[int, int]{Name: "charge", RateLimit: &limit, Run: func(ctx context.Context, n int) (int, error) {
		return n, l.body(0)(ctx, limitedArgs{N: n})
	}}
	prepare := flow.Step[int, int]{Name: "prepare", Run: func(_ context.Context, n int) (int, error) { return n, nil }}
	wf := flow.Workflow[int, int]{Name: "checkout", Run: func(wc flow.Context, n int) (int, error) {
		m, err := flow.Do(wc, prepare, n)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, charge, m)
	}}
	path := dbPath(t)
	var engines []*flow.Engine
	for range 2 {
		cfg := testConfig()
		cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 8}}
		e := openEngine(t, path, cfg)
		flow.Register(e, wf)
		engines = append(engines, e)
	}
	var runs []*flow.Run[int]
	for i := range 9 {
		r, err := flow.Start(ctx, engines[i%2], wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	began := time.Now()
	startAll(t, engines...)
	for i, r := range runs {
		if out, err := r.Result(waitCtx(t)); err != nil || out != i {
			t.Fatalf("run %d: %d, %v", i, out, err)
		}
	}
	window := period * 2 / 3 // see TestRateLimit
	if got := l.maxInWindow(window); got > 3 {
		t.Errorf("%d attempts of the limited step began within %s, limit 3 per %s", got, window, period)
	}
	if took := time.Since(began); took < 2*period-50*time.Millisecond {
		t.Errorf("9 attempts at 3 per %s took %s, under the two periods they need", period, took)
	}
	held := 0
	for _, r := range runs {
		hist, err := engines[0].History(ctx, r.ID())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range hist {
			if ev.Kind == flow.EventRunReleased && strings.Contains(ev.Detail, "rate limiter payments-api (3/300ms)") {
				held++
				break
			}
		}
	}
	if held < 3 {
		t.Errorf("%d runs record a release for the rate limiter; 9 runs at 3 per period hold back at least 6", held)
	}
}

// A run held back by a step's rate limit holds no worker slot: with one
// slot, an unlimited job runs while the limited run waits for its start.
func TestStepRateLimitHoldsNoSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 1}}
	e := openEngine(t, dbPath(t), cfg)
	limit := flow.StepRateLimit{Rate: flow.RateLimit{Limit: 1, Period: 2 * time.Second}}
	limited := flow.Job[int]{Name: "sms", RateLimit: &limit, Handler: func(context.Context, int) error { return nil }}
	quick := flow.Job[int]{Name: "quick", Handler: func(context.Context, int) error { return nil }}
	flow.RegisterJob(e, limited)
	flow.RegisterJob(e, quick)
	first, err := flow.Enqueue(ctx, e, limited, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := flow.Enqueue(ctx, e, limited, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, e)
	if _, err := first.Result(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	q, err := flow.Enqueue(ctx, e, quick, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, slowBound(1500*time.Millisecond))
	defer cancel()
	if _, err := q.Result(qctx); err != nil {
		t.Fatalf("the unlimited job did not run while the limited one waited for its rate (%v): the waiting run held the slot", err)
	}
	info, err := e.Inspect(ctx, second.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusPending {
		t.Errorf("the held-back run is %s, want pending (a due row, not a leased one)", info.Status)
	}
	if _, err := second.Result(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// PerKey gives each concurrency key a budget of its own: one key's
// attempts do not hold back another's.
func TestStepRateLimitPerKey(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), testConfig())
	limit := flow.StepRateLimit{Rate: flow.RateLimit{Limit: 1, Period: time.Hour}, PerKey: true}
	l := newLedger()
	job := flow.Job[limitedArgs]{Name: "tenant-sync", RateLimit: &limit, Handler: l.body(0)}
	flow.RegisterJob(e, job)
	enqueueLimited(t, e, job, "a", "b", "c", "a")
	startEngine(t, e)
	waitFinished(t, l, 3)
	time.Sleep(200 * time.Millisecond)
	if n := l.finished(); n != 3 {
		t.Errorf("%d runs finished; want 3: one per key, the second of key a held for an hour", n)
	}
}

// A bad rate limit fails the run's step for good, naming the step and
// what is wrong, and a bad job's is refused at registration.
func TestStepRateLimitInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := openEngine(t, dbPath(t), testConfig())
	err := flow.RegisterJobSafely(e, flow.Job[int]{Name: "bad", RateLimit: &flow.StepRateLimit{Rate: flow.RateLimit{Limit: 5}},
		Handler: func(context.Context, int) error { return nil }})
	if err == nil || !strings.Contains(err.Error(), "job bad") || !strings.Contains(err.Error(), "Period") {
		t.Errorf("RegisterJobSafely with a rate without a period: %v", err)
	}
	step := flow.Step[int, int]{Name: "call", RateLimit: &flow.StepRateLimit{}, Run: func(_ context.Context, n int) (int, error) { return n, nil }}
	wf := flow.Workflow[int, int]{Name: "calls", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, step, n) }}
	flow.Register(e, wf)
	startEngine(t, e)
	r, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Result(waitCtx(t))
	if err == nil || !strings.Contains(err.Error(), "step call") || !strings.Contains(err.Error(), "no Rate") {
		t.Errorf("a step with an empty rate limit: %v", err)
	}
}
