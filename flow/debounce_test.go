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
	"github.com/flowlite/flowlite/internal/clock"
)

var debounceT0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// debounceEngine opens an engine on a manual clock at debounceT0, not
// started (its runs stay pending), with the doubler registered.
func debounceEngine(t *testing.T) (*flow.Engine, *clock.Manual, flow.Workflow[int, int]) {
	t.Helper()
	clk := clock.NewManual(debounceT0)
	cfg := testConfig()
	cfg.Clock = clk
	cfg.LeaseTimeout = 1000 * time.Hour
	e := openEngine(t, dbPath(t), cfg)
	wf := doubler("debounced", 1)
	flow.Register(e, wf)
	return e, clk, wf
}

func startDebounced(t *testing.T, e *flow.Engine, wf flow.Workflow[int, int], in int, d flow.Debounce) *flow.Run[int] {
	t.Helper()
	run, err := flow.Start(context.Background(), e, wf, in, &flow.StartOptions{Debounce: &d})
	if err != nil {
		t.Fatalf("debounced start of %d: %v", in, err)
	}
	return run
}

func inspectRun(t *testing.T, e *flow.Engine, id string) flow.RunInfo {
	t.Helper()
	info, err := e.Inspect(context.Background(), id)
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return info
}

// Under DebounceReplace each start within the window gives the pending run
// its input and moves its due time to a window after it; the history
// records each replacement. Keys are per workflow.
func TestDebounceReplaceTakesNewestInput(t *testing.T) {
	t.Parallel()
	e, clk, wf := debounceEngine(t)
	d := flow.Debounce{Key: "k", Window: 10 * time.Second, MaxDelay: time.Minute}

	first := startDebounced(t, e, wf, 1, d)
	if first.Existing() {
		t.Fatal("first debounced start: Existing reports true")
	}
	if info := inspectRun(t, e, first.ID()); info.Status != flow.StatusPending || !info.RunAt.Equal(debounceT0.Add(10*time.Second)) {
		t.Fatalf("first start: status %s, due %s; want pending, due a window later", info.Status, info.RunAt)
	}
	clk.Advance(5 * time.Second)
	second := startDebounced(t, e, wf, 2, d)
	if second.ID() != first.ID() || !second.Existing() {
		t.Fatalf("second start: run %s (existing %v), want %s", second.ID(), second.Existing(), first.ID())
	}
	info := inspectRun(t, e, first.ID())
	if string(info.Input) != "2" || !info.RunAt.Equal(debounceT0.Add(15*time.Second)) {
		t.Errorf("after the second start: input %s, due %s; want 2, due %s", info.Input, info.RunAt, debounceT0.Add(15*time.Second))
	}
	if kinds := eventKinds(t, e, first.ID()); strings.Join(kinds, ",") != "run_started,run_debounced" {
		t.Errorf("history %v, want run_started, run_debounced", kinds)
	}
	events, err := e.History(context.Background(), first.ID())
	if err != nil {
		t.Fatal(err)
	}
	if ev := events[0]; !strings.Contains(ev.Detail, `debounce key "k" (replace, window 10s, max delay 1m0s)`) {
		t.Errorf("run_started says %q, want it to name the debounce", ev.Detail)
	}
	if last := events[len(events)-1]; last.Kind != flow.EventRunDebounced || !strings.Contains(last.Detail, "input replaced") {
		t.Errorf("last event %s %q, want run_debounced saying the input was replaced", last.Kind, last.Detail)
	}

	// Another key, and the same key of another workflow, are runs of their own.
	if other := startDebounced(t, e, wf, 3, flow.Debounce{Key: "k2", Window: time.Second}); other.Existing() {
		t.Errorf("another key merged into run %s", other.ID())
	}
	wf2 := doubler("debounced-too", 1)
	flow.Register(e, wf2)
	if other := startDebounced(t, e, wf2, 4, d); other.Existing() || other.ID() == first.ID() {
		t.Errorf("the key of another workflow merged into run %s", other.ID())
	}
}

// A steady stream of starts moves the due time only up to MaxDelay after
// the first start: the run then becomes due and runs with the newest input.
func TestDebounceMaxDelayBoundsSteadyStream(t *testing.T) {
	t.Parallel()
	e, clk, wf := debounceEngine(t)
	d := flow.Debounce{Key: "k", Window: 10 * time.Second, MaxDelay: 30 * time.Second}
	run := startDebounced(t, e, wf, 0, d)
	bound := debounceT0.Add(30 * time.Second)
	for i := 1; i <= 5; i++ {
		clk.Advance(5 * time.Second)
		r := startDebounced(t, e, wf, i, d)
		if r.ID() != run.ID() {
			t.Fatalf("start %d: run %s, want %s", i, r.ID(), run.ID())
		}
		want := clk.Now().Add(d.Window)
		if want.After(bound) {
			want = bound
		}
		if info := inspectRun(t, e, run.ID()); !info.RunAt.Equal(want) {
			t.Fatalf("start %d at +%s: due %s, want %s", i, clk.Now().Sub(debounceT0), info.RunAt, want)
		}
	}
	clk.Advance(5 * time.Second) // at the bound: due now, whatever the stream does
	startEngine(t, e)
	got, err := run.Result(waitCtx(t))
	if err != nil || got != 10 {
		t.Fatalf("result %d, %v; want 10 (the last input, 5, doubled)", got, err)
	}
}

// Under DebounceDrop the first start wins: later starts return its run and
// change neither its input nor its due time, and the history says so.
func TestDebounceDropKeepsFirstStart(t *testing.T) {
	t.Parallel()
	e, clk, wf := debounceEngine(t)
	d := flow.Debounce{Key: "k", Window: 10 * time.Second, Mode: flow.DebounceDrop}
	first := startDebounced(t, e, wf, 1, d)
	clk.Advance(5 * time.Second)
	second := startDebounced(t, e, wf, 2, d)
	if second.ID() != first.ID() || !second.Existing() {
		t.Fatalf("second start: run %s (existing %v), want %s", second.ID(), second.Existing(), first.ID())
	}
	if info := inspectRun(t, e, first.ID()); string(info.Input) != "1" || !info.RunAt.Equal(debounceT0.Add(10*time.Second)) {
		t.Errorf("after a dropped start: input %s, due %s; want 1, due %s", info.Input, info.RunAt, debounceT0.Add(10*time.Second))
	}
	events, err := e.History(context.Background(), first.ID())
	if err != nil {
		t.Fatal(err)
	}
	if last := events[len(events)-1]; last.Kind != flow.EventRunDebounced || !strings.Contains(last.Detail, "dropped") {
		t.Errorf("last event %s %q, want run_debounced saying the start was dropped", last.Kind, last.Detail)
	}
}

// A debounced run that was claimed (running, or finished) or cancelled
// takes no more starts: the next start with its key records a new run,
// and the claimed run keeps its input.
func TestDebounceClaimedRunIsNotReplaced(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(debounceT0)
	cfg := testConfig()
	cfg.Clock = clk
	cfg.LeaseTimeout = 1000 * time.Hour
	e := openEngine(t, dbPath(t), cfg)
	release := make(chan struct{})
	running := make(chan struct{}, 4)
	wf := flow.Workflow[int, int]{Name: "held", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		running <- struct{}{}
		<-release
		return n, nil
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	d := flow.Debounce{Key: "k", Window: time.Second}

	first := startDebounced(t, e, wf, 1, d)
	clk.Advance(time.Second)
	select {
	case <-running:
	case <-waitCtx(t).Done():
		t.Fatal("the debounced run was not claimed once due")
	}
	second := startDebounced(t, e, wf, 2, d)
	if second.Existing() || second.ID() == first.ID() {
		t.Fatalf("start while the debounced run runs: run %s (existing %v), want a new run", second.ID(), second.Existing())
	}
	if info := inspectRun(t, e, first.ID()); string(info.Input) != "1" {
		t.Errorf("the running run's input became %s", info.Input)
	}
	// The new run takes starts until it too is claimed.
	if third := startDebounced(t, e, wf, 3, d); third.ID() != second.ID() {
		t.Errorf("third start: run %s, want the new pending run %s", third.ID(), second.ID())
	}
	close(release)
	ctx := waitCtx(t)
	if got, err := first.Result(ctx); err != nil || got != 1 {
		t.Errorf("first run: %d, %v; want 1", got, err)
	}
	clk.Advance(time.Second)
	if got, err := second.Result(ctx); err != nil || got != 3 {
		t.Errorf("second run: %d, %v; want 3", got, err)
	}

	// A cancelled debounced run frees its key too.
	cancelled := startDebounced(t, e, wf, 4, flow.Debounce{Key: "c", Window: time.Hour})
	if err := e.Cancel(ctx, cancelled.ID()); err != nil {
		t.Fatal(err)
	}
	if next := startDebounced(t, e, wf, 5, flow.Debounce{Key: "c", Window: time.Hour}); next.Existing() || next.ID() == cancelled.ID() {
		t.Errorf("start after the debounced run was cancelled: run %s (existing %v), want a new run", next.ID(), next.Existing())
	}
}

// Several engines on one database debouncing one key at once end with one
// pending run; a start after them all gives it its input.
func TestDebounceConcurrentStartsOneRun(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	const engines, perEngine = 3, 4
	var es []*flow.Engine
	wf := doubler("debounced", 1)
	for range engines {
		e := openEngine(t, path, nil)
		flow.Register(e, wf)
		es = append(es, e)
	}
	d := flow.Debounce{Key: "k", Window: time.Hour}
	ids := make(chan string, engines*perEngine)
	errs := make(chan error, engines*perEngine)
	var wg sync.WaitGroup
	for i, e := range es {
		for j := range perEngine {
			wg.Go(func() {
				run, err := flow.Start(context.Background(), e, wf, 10*i+j, &flow.StartOptions{Debounce: &d})
				if err != nil {
					errs <- err
					return
				}
				ids <- run.ID()
			})
		}
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent debounced start: %v", err)
	}
	var id string
	for got := range ids {
		if id == "" {
			id = got
		}
		if got != id {
			t.Fatalf("concurrent debounced starts returned runs %s and %s, want one", id, got)
		}
	}
	last := startDebounced(t, es[0], wf, 99, d)
	runs, err := es[1].ListRuns(context.Background(), flow.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || last.ID() != id {
		t.Fatalf("%d runs (last start's %s, concurrent starts' %s), want 1", len(runs), last.ID(), id)
	}
	if info := inspectRun(t, es[2], id); string(info.Input) != "99" {
		t.Errorf("input %s, want the last start's 99", info.Input)
	}
	if n := len(eventKinds(t, es[0], id)); n != engines*perEngine+1 {
		t.Errorf("%d events, want a run_started and %d run_debounced", n, engines*perEngine)
	}
}

// Bad debounces are refused with an error naming what is wrong, and
// record nothing.
func TestDebounceBadInput(t *testing.T) {
	t.Parallel()
	e, _, wf := debounceEngine(t)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	ok := flow.Debounce{Key: "k", Window: time.Second}
	with := func(f func(*flow.Debounce)) *flow.Debounce { d := ok; f(&d); return &d }
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		opts *flow.StartOptions
		want string
	}{
		{"no key", &flow.StartOptions{Debounce: with(func(d *flow.Debounce) { d.Key = "" })}, "needs a key"},
		{"long key", &flow.StartOptions{Debounce: with(func(d *flow.Debounce) { d.Key = strings.Repeat("k", 257) })}, "debounce key of 257 bytes"},
		{"negative window", &flow.StartOptions{Debounce: with(func(d *flow.Debounce) { d.Window = -time.Second })}, "negative debounce window"},
		{"no window", &flow.StartOptions{Debounce: with(func(d *flow.Debounce) { d.Window = 0 })}, "under the millisecond"},
		{"negative max delay", &flow.StartOptions{Debounce: with(func(d *flow.Debounce) { d.MaxDelay = -time.Second })}, "negative debounce max delay"},
		{"max delay under window", &flow.StartOptions{Debounce: with(func(d *flow.Debounce) { d.MaxDelay = time.Millisecond })}, "shorter than its window"},
		{"unknown mode", &flow.StartOptions{Debounce: with(func(d *flow.Debounce) { d.Mode = 7 })}, "unknown debounce mode 7"},
		{"unique key", &flow.StartOptions{Debounce: &ok, UniqueKey: "u"}, "excludes a unique key"},
		{"run ID", &flow.StartOptions{Debounce: &ok, RunID: "r"}, "excludes RunID"},
		{"delay", &flow.StartOptions{Debounce: &ok, Delay: time.Second}, "excludes RunAt and Delay"},
		{"run at", &flow.StartOptions{Debounce: &ok, RunAt: debounceT0}, "excludes RunAt and Delay"},
		{"ID reuse", &flow.StartOptions{Debounce: &ok, IDReuse: flow.ReuseFinished}, "excludes ID reuse"},
	} {
		if _, err := flow.Start(ctx, e, wf, 1, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.want)
		}
	}
	if _, err := flow.StartTx(ctx, e, nil, wf, 1, &flow.StartOptions{Debounce: &ok}); err == nil || !strings.Contains(err.Error(), "caller's transaction") {
		t.Errorf("StartTx: error %v, want one refusing a debounce in the caller's transaction", err)
	}
	_, err := flow.StartMany(ctx, e, wf, []flow.StartItem[int]{{In: 1}, {In: 2, Opts: &flow.StartOptions{Debounce: &ok}}})
	var item *flow.ItemError
	if !errors.As(err, &item) || item.Index != 1 || !strings.Contains(err.Error(), "in a batch") {
		t.Errorf("StartMany: error %v, want item 1's refusing a debounce in a batch", err)
	}
	if _, err := flow.Enqueue(ctx, e, job, email{To: "a"}, &flow.EnqueueOptions{Debounce: &ok, UniqueByArgs: true}); err == nil || !strings.Contains(err.Error(), "excludes a unique key") {
		t.Errorf("Enqueue with UniqueByArgs: error %v, want one saying a debounce excludes a unique key", err)
	}
	runs, err := e.ListRuns(ctx, flow.RunFilter{})
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs after refused starts: %d, %v; want none", len(runs), err)
	}
}

// Enqueue debounces a job's runs as Start does a workflow's.
func TestDebounceEnqueue(t *testing.T) {
	t.Parallel()
	e, clk, _ := debounceEngine(t)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	d := &flow.Debounce{Key: "user-1", Window: time.Minute, MaxDelay: 5 * time.Minute}
	first := enqueue(t, e, job, email{To: "a", Subject: "1"}, &flow.EnqueueOptions{Debounce: d})
	clk.Advance(30 * time.Second)
	second := enqueue(t, e, job, email{To: "a", Subject: "2"}, &flow.EnqueueOptions{Debounce: d})
	if second.ID() != first.ID() || !second.Existing() {
		t.Fatalf("second enqueue: run %s, want %s", second.ID(), first.ID())
	}
	if info := inspectRun(t, e, first.ID()); !strings.Contains(string(info.Input), `"2"`) {
		t.Errorf("input %s, want the second enqueue's", info.Input)
	}
}

// On a set of shards every start of a debounce key reaches the shard that
// holds its pending run, whatever the start's concurrency key.
func TestDebounceShards(t *testing.T) {
	t.Parallel()
	e := openShards(t, shardPaths(t, 4), nil)
	flow.Register(e, shardDouble)
	ctx := context.Background()
	var id string
	for i := range 12 {
		d := flow.Debounce{Key: "k", Window: time.Hour}
		run, err := flow.Start(ctx, e, shardDouble, i, &flow.StartOptions{Debounce: &d, ConcurrencyKey: fmt.Sprint("c", i)})
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			id = run.ID()
		}
		if run.ID() != id {
			t.Fatalf("start %d: run %s, want %s", i, run.ID(), id)
		}
	}
	if info, err := e.Inspect(ctx, id); err != nil || string(info.Input) != "11" {
		t.Fatalf("inspect: input %s, %v; want 11", info.Input, err)
	}
}
