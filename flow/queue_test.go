package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
)

func queueStats(t *testing.T, e *flow.Engine, queue string) flow.QueueStats {
	t.Helper()
	list, err := e.QueueStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Queue == queue {
			return s
		}
	}
	t.Fatalf("no stats of queue %s in %+v", queue, list)
	return flow.QueueStats{}
}

func runStatus(t *testing.T, e *flow.Engine, id string) flow.RunStatus {
	t.Helper()
	info, err := e.Inspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.Status
}

// A pause made by one engine is honoured by another engine on the same
// file, survives a restart, and only the paused queue stops.
func TestPauseQueueHonouredByAnotherEngine(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	rec := &recorder{}
	job := flow.Job[email]{Name: "mail", Queue: "mail", Handler: rec.handle}
	other := flow.Job[email]{Name: "other", Queue: "other", Handler: rec.handle}
	ctx := context.Background()

	// The operator's engine works no queue of these.
	admin := openEngine(t, path, nil)
	flow.RegisterJob(admin, job)
	flow.RegisterJob(admin, other)
	if err := admin.PauseQueue(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	if err := admin.PauseQueue(ctx, "mail"); err != nil {
		t.Errorf("pausing a paused queue: %v", err)
	}
	var paused []*flow.Run[struct{}]
	for i := range 3 {
		paused = append(paused, enqueue(t, admin, job, email{To: fmt.Sprint(i)}, nil))
	}
	free := enqueue(t, admin, other, email{To: "free"}, nil)

	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"mail": {Concurrency: 4}, "other": {Concurrency: 4}}
	worker := openEngine(t, path, cfg)
	flow.RegisterJob(worker, job)
	flow.RegisterJob(worker, other)
	startEngine(t, worker)
	if _, err := free.Result(waitCtx(t)); err != nil {
		t.Fatalf("run of an unpaused queue: %v", err)
	}
	time.Sleep(10 * cfg.PollInterval) // ten polls of the worker
	for _, r := range paused {
		if st := runStatus(t, worker, r.ID()); st != flow.StatusPending {
			t.Errorf("run %s of the paused queue is %s, want pending", r.ID(), st)
		}
	}
	if n := rec.count(); n != 1 {
		t.Errorf("handler called %d times while the queue was paused, want 1 (the other queue's)", n)
	}
	s := queueStats(t, worker, "mail")
	if !s.Paused || s.Ready != 3 || s.Counts[flow.StatusPending] != 3 {
		t.Errorf("stats of the paused queue: paused %v, ready %d, counts %v", s.Paused, s.Ready, s.Counts)
	}
	if queueStats(t, worker, "other").Paused {
		t.Error("other queue reported paused")
	}

	// The pause is durable: a fresh engine sees it.
	if !queueStats(t, openEngine(t, path, nil), "mail").Paused {
		t.Error("pause not seen by a newly opened engine")
	}

	// Resumed by the operator's engine, the worker takes the runs at its
	// next poll.
	if err := admin.ResumeQueue(ctx, "mail"); err != nil {
		t.Fatal(err)
	}
	for _, r := range paused {
		if _, err := r.Result(waitCtx(t)); err != nil {
			t.Errorf("run %s after resume: %v", r.ID(), err)
		}
	}
	if queueStats(t, worker, "mail").Paused {
		t.Error("queue still reported paused after resume")
	}
	if err := admin.ResumeQueue(ctx, "mail"); err != nil {
		t.Errorf("resuming a queue that is not paused: %v", err)
	}
	if err := admin.PauseQueue(ctx, ""); err == nil {
		t.Error("pausing a queue without name succeeded")
	}
}

// Pausing a queue lets its runs in flight finish; the runs that were not
// claimed wait, and so does a run in flight that releases its lease to
// wait for its next attempt.
func TestPauseQueueLetsRunsInFlightFinish(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.DefaultRetry = flow.RetryPolicy{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond, Jitter: -1}
	e := openEngine(t, dbPath(t), cfg)
	started := make(chan string, 10)
	release := make(chan struct{})
	job := flow.Job[string]{Name: "block", Handler: func(ctx context.Context, what string) error {
		started <- what
		<-release
		info, _ := flow.Attempt(ctx)
		if what == "retry" && info.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)

	inFlight, err := flow.Enqueue(ctx, e, job, "in flight", nil)
	if err != nil {
		t.Fatal(err)
	}
	retried, err := flow.Enqueue(ctx, e, job, "retry", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		<-started
	}
	if err := e.PauseQueue(ctx, flow.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	waiting, err := flow.Enqueue(ctx, e, job, "waiting", nil)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if _, err := inFlight.Result(ctx); err != nil {
		t.Errorf("run in flight when the queue was paused: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the retry's backoff, and more
	select {
	case what := <-started:
		t.Errorf("handler started for %q while the queue was paused", what)
	default:
	}
	if st := runStatus(t, e, retried.ID()); st != flow.StatusPending {
		t.Errorf("run waiting for its retry is %s, want pending", st)
	}
	if st := runStatus(t, e, waiting.ID()); st != flow.StatusPending {
		t.Errorf("run enqueued while paused is %s, want pending", st)
	}

	if err := e.ResumeQueue(ctx, flow.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*flow.Run[struct{}]{retried, waiting} {
		if _, err := r.Result(ctx); err != nil {
			t.Errorf("run %s after resume: %v", r.ID(), err)
		}
	}
}

type timed struct {
	Seconds int  `json:"seconds"`
	Fail    bool `json:"fail"`
}

// QueueStats on a fixture run on a manual clock: 20 jobs taking 1 to 20
// seconds, run one at a time in that order (by priority), then 2 failing
// jobs, a paused queue with ready runs and a delayed run.
func TestQueueStats(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	cfg := testConfig()
	cfg.Clock = clk
	cfg.LeaseTimeout = 1000 * time.Hour
	cfg.CleanInterval = -1
	cfg.Queues = map[string]flow.QueueConfig{"work": {Concurrency: 1}}
	e := openEngine(t, dbPath(t), cfg)
	job := flow.Job[timed]{Name: "timed", Queue: "work", Handler: func(_ context.Context, a timed) error {
		clk.Advance(time.Duration(a.Seconds) * time.Second)
		if a.Fail {
			return flow.Permanent(errors.New("failed on purpose"))
		}
		return nil
	}}
	flow.RegisterJob(e, job)
	ctx := waitCtx(t)
	var runs []*flow.Run[struct{}]
	for s := 1; s <= 20; s++ {
		r, err := flow.Enqueue(ctx, e, job, timed{Seconds: s}, &flow.EnqueueOptions{Priority: 100 - s})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	for i := range 2 {
		r, err := flow.Enqueue(ctx, e, job, timed{Fail: true}, &flow.EnqueueOptions{Priority: -i})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	startEngine(t, e)
	for _, r := range runs {
		_, _ = r.Result(ctx)
	}
	// Run k (1-based) finished at t0 + k(k+1)/2 s: the last at t0+210s,
	// with the failed ones.
	end := t0.Add(210 * time.Second)
	if now := clk.Now(); !now.Equal(end) {
		t.Fatalf("clock at %v after the fixture, want %v", now, end)
	}
	if err := e.PauseQueue(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	held := flow.Job[timed]{Name: "held", Queue: "held", Handler: job.Handler}
	flow.RegisterJob(e, held)
	for range 3 {
		if _, err := flow.Enqueue(ctx, e, held, timed{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := flow.Enqueue(ctx, e, held, timed{}, &flow.EnqueueOptions{Delay: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}

	list, err := e.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Queue != "held" || list[1].Queue != "work" {
		t.Fatalf("queues %+v, want held and work", list)
	}
	w := list[1]
	want := flow.QueueStats{
		Queue:  "work",
		Counts: map[flow.RunStatus]int64{flow.StatusCompleted: 20, flow.StatusFailed: 2},
		// Finished at or after end-60s: runs 17 (t0+153s) to 20, and the 2 failed.
		DeadLetters: 2, FinishedLastMinute: 6, FinishedLastHour: 22,
		// 1s..20s: mean 10.5s; nearest-rank p95 of 20 is the 19th.
		AvgDuration: 10500 * time.Millisecond, P95Duration: 19 * time.Second, DurationSamples: 20,
	}
	checkStats(t, "work at the end", w, want)
	h := list[0]
	checkStats(t, "held at the end", h, flow.QueueStats{
		Queue: "held", Paused: true, Counts: map[flow.RunStatus]int64{flow.StatusPending: 4}, Ready: 3,
	})

	// An hour later only what finished at end is in the window, and the
	// held runs have been ready for an hour.
	clk.Advance(time.Hour)
	list, err = e.QueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want.FinishedLastMinute, want.FinishedLastHour = 0, 3
	want.AvgDuration, want.P95Duration, want.DurationSamples = 20*time.Second, 20*time.Second, 1
	checkStats(t, "work an hour later", list[1], want)
	checkStats(t, "held an hour later", list[0], flow.QueueStats{
		Queue: "held", Paused: true, Counts: map[flow.RunStatus]int64{flow.StatusPending: 4}, Ready: 3, OldestReadyAge: time.Hour,
	})
	// And another hour later the delayed run is ready too, but the oldest
	// ready run is still the same.
	clk.Advance(time.Hour)
	h = queueStats(t, e, "held")
	if h.Ready != 4 || h.OldestReadyAge != 2*time.Hour {
		t.Errorf("held two hours later: ready %d, oldest %s; want 4, 2h", h.Ready, h.OldestReadyAge)
	}

	// The configured queue shows up with no runs at all.
	cfg2 := testConfig()
	cfg2.Queues = map[string]flow.QueueConfig{"empty": {Concurrency: 1}}
	fresh := openEngine(t, dbPath(t), cfg2)
	checkStats(t, "empty", queueStats(t, fresh, "empty"), flow.QueueStats{Queue: "empty", Counts: map[flow.RunStatus]int64{}})
}

func checkStats(t *testing.T, what string, got, want flow.QueueStats) {
	t.Helper()
	if got.Queue != want.Queue || got.Paused != want.Paused || got.Ready != want.Ready ||
		got.OldestReadyAge != want.OldestReadyAge || got.DeadLetters != want.DeadLetters ||
		got.FinishedLastMinute != want.FinishedLastMinute || got.FinishedLastHour != want.FinishedLastHour ||
		got.AvgDuration != want.AvgDuration || got.P95Duration != want.P95Duration || got.DurationSamples != want.DurationSamples {
		t.Errorf("%s: stats\n%+v\nwant\n%+v", what, got, want)
	}
	if len(got.Counts) != len(want.Counts) {
		t.Errorf("%s: counts %v, want %v", what, got.Counts, want.Counts)
	}
	for st, n := range want.Counts {
		if got.Counts[st] != n {
			t.Errorf("%s: counts %v, want %v", what, got.Counts, want.Counts)
			break
		}
	}
}

// A queue configured with a zero QueueConfig works, at DefaultConcurrency,
// like every other zero field of Config means the default.
func TestZeroQueueConcurrencyMeansTheDefault(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"orders": {}}
	e, err := flowsqlite.Open(ctx, dbPath(t), cfg, nil)
	if err != nil {
		t.Fatalf("open with Queues{orders: {}}: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	if got := cfg.Queues["orders"].Concurrency; got != 0 {
		t.Fatalf("Open changed the caller's config: concurrency %d", got)
	}

	// Each run holds its slot until released, so the number of runs in
	// flight at once is the queue's concurrency.
	var mu sync.Mutex
	inFlight, peak := 0, 0
	release := make(chan struct{})
	hold := flow.Step[int, int]{
		Name: "hold",
		Run: func(ctx context.Context, n int) (int, error) {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
			select {
			case <-release:
				return n, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
	}
	wf := flow.Workflow[int, int]{Name: "held", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, hold, n) }}
	flow.Register(e, wf)
	startEngine(t, e)
	runs := make([]*flow.Run[int], flow.DefaultConcurrency+5)
	for i := range runs {
		if runs[i], err = flow.Start(ctx, e, wf, i, &flow.StartOptions{Queue: "orders"}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the queue to fill its slots", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight == flow.DefaultConcurrency
	})
	time.Sleep(50 * time.Millisecond) // a few polls: no run beyond the limit starts
	mu.Lock()
	got := peak
	mu.Unlock()
	if got != flow.DefaultConcurrency {
		t.Fatalf("peak runs in flight = %d, want DefaultConcurrency %d", got, flow.DefaultConcurrency)
	}
	close(release)
	for i, r := range runs {
		if out, err := r.Result(ctx); err != nil || out != i {
			t.Fatalf("run %d: %d, %v", i, out, err)
		}
	}
}

func TestNegativeQueueConcurrencyIsRefusedNamingTheQueue(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"orders": {Concurrency: -1}}
	e, err := flowsqlite.Open(context.Background(), dbPath(t), cfg, nil)
	if err == nil {
		e.Close()
		t.Fatal("open with concurrency -1: want an error")
	}
	if !strings.Contains(err.Error(), `"orders"`) || !strings.Contains(err.Error(), "-1") {
		t.Fatalf("err = %v, want it to name the queue and the value", err)
	}
}
