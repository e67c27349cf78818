package flow_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
	"golang.org/x/sync/errgroup"
)

var double = flow.Step[int, int]{
	Name: "double",
	Run:  func(_ context.Context, n int) (int, error) { return 2 * n, nil },
}

func doubler(name string, version int) flow.Workflow[int, int] {
	return flow.Workflow[int, int]{
		Name: name, Version: version,
		Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, double, n) },
	}
}

func TestStartSameRunIDReturnsExistingRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)

	first, err := flow.Start(ctx, e, wf, 21, &flow.StartOptions{RunID: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := flow.Start(ctx, e, wf, 99, &flow.StartOptions{RunID: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Existing() || !second.Existing() || second.ID() != "order-1" {
		t.Fatalf("existing = %v/%v, id %q; want false/true, order-1", first.Existing(), second.Existing(), second.ID())
	}
	other := doubler("other", 1)
	flow.Register(e, other)
	if _, err := flow.Start(ctx, e, other, 1, &flow.StartOptions{RunID: "order-1"}); !errors.Is(err, flow.ErrRunExists) {
		t.Fatalf("start with a taken ID of another workflow: err = %v, want ErrRunExists", err)
	}

	startEngine(t, e)
	got, err := second.Result(ctx)
	if err != nil || got != 42 {
		t.Fatalf("result = %d, %v; want 42 (the first input), nil", got, err)
	}
	if kinds := eventKinds(t, e, "order-1"); slices.Index(kinds, "run_started") != 0 || strings.Count(strings.Join(kinds, " "), "run_started") != 1 {
		t.Fatalf("history %v: want exactly one run_started, first", kinds)
	}
}

func TestStartUnregisteredWorkflowRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, doubler("doubler", 1))

	for _, wf := range []flow.Workflow[int, int]{doubler("nope", 1), doubler("doubler", 2)} {
		_, err := flow.Start(ctx, e, wf, 1, nil)
		if !errors.Is(err, flow.ErrUnknownWorkflow) || !strings.Contains(err.Error(), wf.Name) {
			t.Fatalf("start %s v%d: err = %v, want ErrUnknownWorkflow naming it", wf.Name, wf.Version, err)
		}
	}
	runs, err := e.ListRuns(ctx, flow.RunFilter{})
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs = %v, %v; want none", runs, err)
	}
}

// A run of a workflow (or version) that the working engine lacks waits: it
// is never claimed, failed or discarded, and it is reported.
func TestRunOfUnknownWorkflowWaitsUntilAnEngineHasIt(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)

	producer := openEngine(t, path, nil)
	v1 := doubler("doubler", 1)
	flow.Register(producer, v1)
	run, err := flow.Start(ctx, producer, v1, 5, nil)
	if err != nil {
		t.Fatal(err)
	}

	lacking := openEngine(t, path, nil)
	flow.Register(lacking, doubler("doubler", 2))
	flow.Register(lacking, doubler("unrelated", 1))
	startEngine(t, lacking)
	time.Sleep(100 * time.Millisecond) // ten poll intervals

	info, err := lacking.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusPending || len(info.Steps) != 0 {
		t.Fatalf("run is %s with %d steps; want pending and untouched", info.Status, len(info.Steps))
	}
	if kinds := eventKinds(t, lacking, run.ID()); !slices.Equal(kinds, []string{"run_started"}) {
		t.Fatalf("history = %v, want only run_started", kinds)
	}
	waiting, err := lacking.Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []flow.WaitingWorkflow{{Workflow: "doubler", Version: 1, Runs: 1}}
	if !slices.Equal(waiting, want) {
		t.Fatalf("waiting = %v, want %v", waiting, want)
	}

	startEngine(t, producer)
	if got, err := run.Result(ctx); err != nil || got != 10 {
		t.Fatalf("result = %d, %v; want 10", got, err)
	}
}

// A recorded step output that no longer decodes into the step's type (the
// type changed between deploys) suspends the run with an error naming run,
// step and type; nothing is compensated and nothing recorded changes.
func TestRecordedOutputOfAnotherTypeSuspendsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var compensated bool
	release := make(chan struct{})

	greet := flow.Step[string, string]{
		Name:       "greet",
		Run:        func(_ context.Context, s string) (string, error) { return "hello " + s, nil },
		Compensate: func(context.Context, string, string) error { compensated = true; return nil },
	}
	block := flow.Step[string, string]{
		Name: "block",
		Run: func(ctx context.Context, s string) (string, error) {
			select {
			case <-release:
				return s, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		},
	}
	v1 := flow.Workflow[string, string]{Name: "greeter", Run: func(wc flow.Context, s string) (string, error) {
		g, err := flow.Do(wc, greet, s)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, block, g)
	}}
	e1 := openEngine(t, path, nil)
	flow.Register(e1, v1)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, v1, "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "greet to complete", func() bool {
		info, _ := e1.Inspect(ctx, run.ID())
		return len(info.Steps) == 2
	})
	if err := e1.Close(); err != nil { // interrupts block; the run is released
		t.Fatal(err)
	}
	close(release)

	type Greeting struct{ Text string }
	greetV2 := flow.Step[string, Greeting]{
		Name:       "greet",
		Run:        func(_ context.Context, s string) (Greeting, error) { return Greeting{"hi " + s}, nil },
		Compensate: func(context.Context, string, Greeting) error { compensated = true; return nil },
	}
	v1Changed := flow.Workflow[string, string]{Name: "greeter", Run: func(wc flow.Context, s string) (string, error) {
		g, err := flow.Do(wc, greetV2, s)
		return g.Text, err
	}}
	e2 := openEngine(t, path, nil)
	flow.Register(e2, v1Changed)
	before, err := e2.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, e2)
	run2, err := flow.Lookup(ctx, e2, v1Changed, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	_, err = run2.Result(ctx)
	var suspended *flow.SuspendedError
	if !errors.As(err, &suspended) {
		t.Fatalf("result err = %v, want *SuspendedError", err)
	}
	for _, want := range []string{run.ID(), "greet", "flow_test.Greeting"} {
		if !strings.Contains(suspended.Reason, want) {
			t.Errorf("reason %q does not name %q", suspended.Reason, want)
		}
	}
	after, err := e2.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if compensated || after.Steps[0].Compensation != "none" || string(after.Steps[0].Output) != string(before.Steps[0].Output) {
		t.Fatalf("recorded step changed: compensated=%v, step %+v", compensated, after.Steps[0])
	}
}

// A stored input that is not valid JSON for the workflow's input type
// suspends the run; the stored bytes are left as they are.
func TestMalformedStoredInputSuspendsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	e := openEngine(t, path, nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "bad-input"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawDB(t, path).Exec(`UPDATE flowlite_runs SET input = CAST('{"oops' AS BLOB) WHERE id = 'bad-input'`); err != nil {
		t.Fatal(err)
	}
	startEngine(t, e)
	_, err = run.Result(ctx)
	if !errors.Is(err, flow.ErrSuspended) || !strings.Contains(err.Error(), "decode workflow input into int") {
		t.Fatalf("result err = %v, want suspended naming the input type", err)
	}
	info, err := e.Inspect(ctx, "bad-input")
	if err != nil {
		t.Fatal(err)
	}
	if string(info.Input) != `{"oops` || len(info.Steps) != 0 {
		t.Fatalf("stored input = %q, steps %d; want untouched", info.Input, len(info.Steps))
	}
}

func TestCancelFinishedOrUnknownRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	before := eventKinds(t, e, run.ID())
	if err := e.Cancel(ctx, run.ID()); !errors.Is(err, flow.ErrRunFinished) || !strings.Contains(err.Error(), "completed") {
		t.Fatalf("cancel completed run: err = %v, want ErrRunFinished saying completed", err)
	}
	if after := eventKinds(t, e, run.ID()); !slices.Equal(before, after) {
		t.Fatalf("history changed by a refused cancel: %v → %v", before, after)
	}
	if err := e.Cancel(ctx, "no-such-run"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("cancel unknown run: err = %v, want ErrRunNotFound", err)
	}
	if err := e.Resume(ctx, run.ID()); !errors.Is(err, flow.ErrConflict) {
		t.Fatalf("resume completed run: err = %v, want ErrConflict", err)
	}
}

// Calls on a closed engine say so, instead of the driver's words.
func TestClosedEngine(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e, err := flowsqlite.Open(ctx, dbPath(t), testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wf := doubler("closed", 1)
	flow.Register(e, wf)
	run, err := flow.Start(ctx, e, wf, 1, nil) // not started: stays pending
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrClosed) {
		t.Errorf("Result after Close: %v, want ErrClosed", err)
	}
	if _, err := e.Inspect(ctx, run.ID()); !errors.Is(err, flow.ErrClosed) {
		t.Errorf("Inspect after Close: %v, want ErrClosed", err)
	}
	if _, err := flow.Start(ctx, e, wf, 2, nil); !errors.Is(err, flow.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}

// A timeout counts from the run's first claim: a run that waited in its
// queue longer than its timeout still runs, where one with the same
// absolute Deadline is cancelled before it ran. The claim turns the
// timeout into the deadline.
func TestTimeoutCountsFromDequeue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	cfg := testConfig()
	cfg.Clock = clk
	e := openEngine(t, dbPath(t), cfg)
	var ran atomic.Int64
	wf := flow.Workflow[int, int]{Name: "queued", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, flow.Step[int, int]{Name: "work", Run: func(_ context.Context, n int) (int, error) {
			ran.Add(1)
			return n * 2, nil
		}}, n)
	}}
	flow.Register(e, wf)
	ctx := waitCtx(t)
	timed, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "timed", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	absolute, err := flow.Start(ctx, e, wf, 2, &flow.StartOptions{RunID: "absolute", Deadline: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if info, err := e.Inspect(ctx, "timed"); err != nil || info.Timeout != time.Hour || !info.Deadline.IsZero() {
		t.Fatalf("queued run: timeout %s, deadline %s, %v; want 1h and no deadline yet", info.Timeout, info.Deadline, err)
	}
	// Both wait in the queue for two hours before an engine works it.
	clk.Advance(2 * time.Hour)
	startEngine(t, e)
	if out, err := timed.Result(ctx); err != nil || out != 2 {
		t.Fatalf("timed run = %d, %v; want it to run, its hour counting from its claim", out, err)
	}
	var cancelled *flow.CancelledError
	if _, err := absolute.Result(ctx); !errors.As(err, &cancelled) {
		t.Fatalf("run past its absolute deadline = %v, want cancelled", err)
	}
	info, err := e.Inspect(ctx, "timed")
	if err != nil {
		t.Fatal(err)
	}
	if want := info.StartedAt.Add(time.Hour); !info.Deadline.Equal(want) || !info.StartedAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("after its claim at %s: deadline %s, want %s", info.StartedAt, info.Deadline, want)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("step ran %d times, want once (for the timed run only)", n)
	}
	var detail string
	for _, ev := range historyOf(t, e, "timed") {
		if ev.Kind == flow.EventRunStarted {
			detail = ev.Detail
		}
	}
	if !strings.Contains(detail, "timeout 1h0m0s from its first claim") {
		t.Errorf("run_started detail %q does not record the timeout", detail)
	}
}

// Once claimed, the timeout is a deadline like any: a run that takes
// longer is cancelled, its step seeing the cancellation through its
// context. An earlier Deadline wins over the timeout.
func TestTimeoutCancelsARunThatTakesTooLong(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	block := flow.Step[int, int]{Name: "block", Run: func(ctx context.Context, n int) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	}}
	wf := flow.Workflow[int, int]{Name: "slow", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, block, n)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	r, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var cancelled *flow.CancelledError
	if _, err := r.Result(ctx); !errors.As(err, &cancelled) {
		t.Fatalf("Result = %v, want cancelled by its timeout", err)
	}
	info, err := e.Inspect(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if want := info.StartedAt.Add(200 * time.Millisecond); !info.Deadline.Equal(want) {
		t.Errorf("deadline %s, want the first claim %s plus 200ms", info.Deadline, info.StartedAt)
	}

	early := time.Now().Add(time.Hour)
	r2, err := flow.Start(ctx, e, wf, 2, &flow.StartOptions{Timeout: 24 * time.Hour, Deadline: early})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run claimed", func() bool {
		info, err := e.Inspect(ctx, r2.ID())
		return err == nil && !info.StartedAt.IsZero()
	})
	if info, _ := e.Inspect(ctx, r2.ID()); !info.Deadline.Equal(early.Truncate(time.Millisecond)) {
		t.Errorf("deadline %s, want the earlier Deadline %s", info.Deadline, early)
	}
	if err := e.Cancel(ctx, r2.ID()); err != nil {
		t.Fatal(err)
	}
}

// A bad timeout fails the start and records nothing.
func TestTimeoutBadInput(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[int, int]{Name: "noop", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "negative timeout -1s"},
		{500 * time.Microsecond, "timeout 500µs is under the millisecond"},
	} {
		if _, err := flow.Start(context.Background(), e, wf, 1, &flow.StartOptions{Timeout: tc.d}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start with timeout %s = %v, want %q", tc.d, err, tc.want)
		}
	}
	if n := totalRuns(t, e); n != 0 {
		t.Fatalf("%d runs recorded, want none", n)
	}
}

// The benchmarks start b.N runs and wait for all of them, reporting runs/s
// and steps/s (a step counts its checkpoint; a compensation counts too).
// Run them with:
//
//	go test -run '^$' -bench '^BenchmarkRuns$' -benchtime 3000x ./flow/

var noop = flow.Step[int, int]{Name: "noop", Run: func(_ context.Context, n int) (int, error) { return n + 1, nil }}

var noopUndo = flow.Step[int, int]{
	Name:       "noop_undo",
	Run:        func(_ context.Context, n int) (int, error) { return n + 1, nil },
	Compensate: func(context.Context, int, int) error { return nil },
}

var decline = flow.Step[int, int]{Name: "decline", Run: func(context.Context, int) (int, error) {
	return 0, flow.Permanent(errors.New("declined"))
}}

func benchWorkflows() []struct {
	name  string
	wf    flow.Workflow[int, int]
	steps int
	fails bool
} {
	return []struct {
		name  string
		wf    flow.Workflow[int, int]
		steps int
		fails bool
	}{
		{"OneStep", flow.Workflow[int, int]{Name: "one", Run: func(wc flow.Context, n int) (int, error) {
			return flow.Do(wc, noop, n)
		}}, 1, false},
		{"ThreeSteps", flow.Workflow[int, int]{Name: "three", Run: func(wc flow.Context, n int) (int, error) {
			for range 3 {
				var err error
				if n, err = flow.Do(wc, noop, n); err != nil {
					return 0, err
				}
			}
			return n, nil
		}}, 3, false},
		// Two compensable steps, a third that fails for good, and the two
		// compensations: five step executions.
		{"SagaCompensates", flow.Workflow[int, int]{Name: "saga", Run: func(wc flow.Context, n int) (int, error) {
			for range 2 {
				var err error
				if n, err = flow.Do(wc, noopUndo, n); err != nil {
					return 0, err
				}
			}
			return flow.Do(wc, decline, n)
		}}, 5, true},
	}
}

// producers is how many goroutines start runs in the benchmarks.
const producers = 16

func BenchmarkRuns(b *testing.B) {
	for _, sync := range []flowsqlite.Synchronous{flowsqlite.SynchronousFull, flowsqlite.SynchronousNormal} {
		for _, bw := range benchWorkflows() {
			b.Run(bw.name+"/"+string(sync), func(b *testing.B) {
				ctx := context.Background()
				e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), &flow.Config{
					Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}},
					PollInterval: 50 * time.Millisecond,
				}, &flowsqlite.Options{Synchronous: sync})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				flow.Register(e, bw.wf)
				if err := e.Start(ctx); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				// Producers start runs concurrently, as the request handlers
				// of a service would.
				runs := make([]*flow.Run[int], b.N)
				var g errgroup.Group
				for p := range producers {
					g.Go(func() error {
						for i := p; i < b.N; i += producers {
							var err error
							if runs[i], err = flow.Start(ctx, e, bw.wf, i, nil); err != nil {
								return err
							}
						}
						return nil
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				for _, r := range runs {
					_, err := r.Result(ctx)
					if bw.fails != errors.Is(err, flow.ErrRolledBack) {
						b.Fatalf("result err = %v", err)
					}
				}
				elapsed := time.Since(start).Seconds()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed, "runs/s")
				b.ReportMetric(float64(b.N*bw.steps)/elapsed, "steps/s")
				if err := e.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkStartLatency starts runs one after the other on an idle engine
// and reports how long after flow.Start was called each run's first step
// began (p50, p99, max): the in-process start→first-step latency, FULL
// sync. Run it with:
//
//	go test -run '^$' -bench StartLatency -benchtime 2000x ./flow/
func BenchmarkStartLatency(b *testing.B) {
	ctx := context.Background()
	began := make(chan time.Time, 1)
	step := flow.Step[int, int]{Name: "first", Run: func(_ context.Context, n int) (int, error) {
		began <- time.Now()
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "latency", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, step, n)
	}}
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "latency.db"), &flow.Config{PollInterval: time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.Register(e, wf)
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	latencies := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, (<-began).Sub(start))
		if _, err := r.Result(ctx); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(latencies)
	at := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(at(1), "max-ms")
}

// BenchmarkJobLatency enqueues b.N no-op jobs at 200 a second (each from
// its own goroutine, on a fixed schedule, so a slow commit does not slow
// the rate) on a started engine, and reports how long after Enqueue was
// called each handler began (p50, p99, max), FULL sync: the in-process
// insert→handler latency the README's latency target is about. Run it
// with:
//
//	go test -run '^$' -bench JobLatency -benchtime 2000x ./flow/
func BenchmarkJobLatency(b *testing.B) {
	ctx := context.Background()
	const rate = 200 // jobs per second
	starts := make([]time.Time, b.N)
	began := make([]time.Time, b.N)
	done := make(chan struct{}, b.N)
	job := flow.Job[int]{Name: "latency_job", Handler: func(_ context.Context, i int) error {
		began[i] = time.Now()
		done <- struct{}{}
		return nil
	}}
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "latency.db"), &flow.Config{PollInterval: time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, job)
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer e.Stop(ctx)
	b.ResetTimer()
	t0 := time.Now()
	errs := make(chan error, b.N)
	for i := range b.N {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * time.Second / rate)))
		starts[i] = time.Now()
		go func() {
			if _, err := flow.Enqueue(ctx, e, job, i, nil); err != nil {
				errs <- err
			}
		}()
	}
	for range b.N {
		select {
		case <-done:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	b.StopTimer()
	latencies := make([]time.Duration, b.N)
	for i := range latencies {
		latencies[i] = began[i].Sub(starts[i])
	}
	slices.Sort(latencies)
	at := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(at(1), "max-ms")
}

// BenchmarkFinishedRunsMemory runs five rounds of 10,000 one-step runs on
// one engine and reports the live heap after the first and after the last
// round, and the growth per finished run between them: memory should stay
// flat however many runs the engine finished. Run it once:
//
//	go test -run '^$' -bench FinishedRunsMemory -benchtime 1x ./flow/
func BenchmarkFinishedRunsMemory(b *testing.B) {
	const rounds, perRound = 5, 10_000
	wf := flow.Workflow[int, int]{Name: "finite", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, noop, n) }}
	for b.Loop() {
		ctx := context.Background()
		e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "memory.db"), &flow.Config{
			Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}},
			PollInterval: 50 * time.Millisecond,
		}, nil)
		if err != nil {
			b.Fatal(err)
		}
		flow.Register(e, wf)
		if err := e.Start(ctx); err != nil {
			b.Fatal(err)
		}
		heap := func() float64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return float64(m.HeapInuse)
		}
		var first float64
		for round := range rounds {
			runs := startRuns(b, e, wf, perRound, flow.DefaultQueue)
			for _, r := range runs {
				if _, err := r.Result(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if round == 0 {
				first = heap()
			}
		}
		last := heap()
		b.ReportMetric(first/(1<<20), "heap-MiB-after-10k")
		b.ReportMetric(last/(1<<20), "heap-MiB-after-50k")
		b.ReportMetric((last-first)/float64((rounds-1)*perRound), "heap-bytes/finished-run")
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
