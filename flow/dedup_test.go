package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// dedupWorkflow counts the executions of its body.
func dedupWorkflow(ran *atomic.Int64) flow.Workflow[string, string] {
	return flow.Workflow[string, string]{Name: "dedup", Run: func(wc flow.Context, s string) (string, error) {
		ran.Add(1)
		return "done " + s, nil
	}}
}

// dedupEngine opens an engine with dedupWorkflow registered, and returns
// the count of its body's calls.
func dedupEngine(t *testing.T) (*flow.Engine, flow.Workflow[string, string], *atomic.Int64) {
	t.Helper()
	e := openEngine(t, dbPath(t), nil)
	ran := new(atomic.Int64)
	wf := dedupWorkflow(ran)
	flow.Register(e, wf)
	return e, wf, ran
}

// A workflow's UniqueKey deduplicates its starts as a job's does: while
// the first run is unfinished, a start with the key returns it and records
// nothing; once it finished (with no unique states), the key is free.
func TestStartUniqueKeyReturnsTheHolder(t *testing.T) {
	t.Parallel()
	e, wf, ran := dedupEngine(t)
	ctx := waitCtx(t)
	// Not started yet: the first run stays pending while the others try.
	first, err := flow.Start(ctx, e, wf, "a", &flow.StartOptions{UniqueKey: "order-7"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := flow.Start(ctx, e, wf, "b", &flow.StartOptions{UniqueKey: "order-7"})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Existing() || second.ID() != first.ID() {
		t.Fatalf("second start: run %s (existing %v), want the holder %s", second.ID(), second.Existing(), first.ID())
	}
	if n := totalRuns(t, e); n != 1 {
		t.Fatalf("%d runs recorded, want 1", n)
	}
	if info, err := e.Inspect(ctx, first.ID()); err != nil || info.UniqueKey != "order-7" {
		t.Fatalf("Inspect: unique key %q, %v; want order-7", info.UniqueKey, err)
	}
	startEngine(t, e)
	if out, err := second.Result(ctx); err != nil || out != "done a" {
		t.Fatalf("Result = %q, %v; want the first run's output", out, err)
	}
	third, err := flow.Start(ctx, e, wf, "c", &flow.StartOptions{UniqueKey: "order-7"})
	if err != nil {
		t.Fatal(err)
	}
	if third.Existing() || third.ID() == first.ID() {
		t.Fatalf("start after the holder finished: run %s (existing %v), want a new run", third.ID(), third.Existing())
	}
	if out, err := third.Result(ctx); err != nil || out != "done c" {
		t.Fatalf("third Result = %q, %v", out, err)
	}
	if n := ran.Load(); n != 2 {
		t.Fatalf("body ran %d times, want 2", n)
	}
}

// UniqueStates keep the key past the end, as for jobs: a completed run
// holds it for good.
func TestStartUniqueStatesKeepTheKeyAfterCompletion(t *testing.T) {
	t.Parallel()
	e, wf, _ := dedupEngine(t)
	startEngine(t, e)
	ctx := waitCtx(t)
	opts := &flow.StartOptions{UniqueKey: "once", UniqueStates: riverDefault()}
	first, err := flow.Start(ctx, e, wf, "a", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Result(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := flow.Start(ctx, e, wf, "b", opts)
	if err != nil || again.ID() != first.ID() || !again.Existing() {
		t.Fatalf("start after completion = %v, %v; want the completed holder %s", again, err, first.ID())
	}
}

// RefuseDuplicate fails a start whose key another run holds with a
// *DuplicateError naming the holder, and records nothing; a start that
// names the holder's own ID is the same start tried again and returns it.
func TestStartRefuseDuplicate(t *testing.T) {
	t.Parallel()
	e, wf, _ := dedupEngine(t)
	ctx := waitCtx(t)
	opts := func(id string) *flow.StartOptions {
		return &flow.StartOptions{RunID: id, UniqueKey: "invoice-1", OnDuplicate: flow.RefuseDuplicate}
	}
	first, err := flow.Start(ctx, e, wf, "a", opts("first"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = flow.Start(ctx, e, wf, "b", opts("second"))
	var dup *flow.DuplicateError
	if !errors.As(err, &dup) || !errors.Is(err, flow.ErrDuplicate) {
		t.Fatalf("duplicate start: %v, want a *DuplicateError matching ErrDuplicate", err)
	}
	if dup.HolderID != "first" || dup.HolderStatus != flow.StatusPending || dup.UniqueKey != "invoice-1" || dup.RunID != "second" {
		t.Errorf("DuplicateError = %+v", *dup)
	}
	for _, want := range []string{"invoice-1", "first", "second"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := e.Inspect(ctx, "second"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Errorf("Inspect of the refused run: %v, want ErrRunNotFound", err)
	}
	if n := totalRuns(t, e); n != 1 {
		t.Errorf("%d runs recorded, want 1", n)
	}
	retry, err := flow.Start(ctx, e, wf, "a", opts("first"))
	if err != nil || retry.ID() != first.ID() || !retry.Existing() {
		t.Fatalf("the first start tried again = %v, %v; want its run", retry, err)
	}
	// The same refusal for a job.
	rec := &recorder{}
	job := emailJob(rec)
	flow.RegisterJob(e, job)
	jopts := &flow.EnqueueOptions{UniqueKey: "k", OnDuplicate: flow.RefuseDuplicate}
	held := enqueue(t, e, job, email{To: "a"}, jopts)
	if _, err := flow.Enqueue(ctx, e, job, email{To: "b"}, jopts); !errors.As(err, &dup) || dup.HolderID != held.ID() {
		t.Fatalf("duplicate enqueue: %v, want a *DuplicateError naming %s", err, held.ID())
	}
}

// Starts racing on one key under RefuseDuplicate: one run, and every
// other start refused, on either backend.
func TestStartRefuseDuplicateRace(t *testing.T) {
	t.Parallel()
	e, wf, _ := dedupEngine(t)
	startEngine(t, e)
	ctx := waitCtx(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	ids := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := flow.Start(ctx, e, wf, fmt.Sprint(i), &flow.StartOptions{UniqueKey: "race", OnDuplicate: flow.RefuseDuplicate})
			errs[i] = err
			if err == nil {
				ids[i] = r.ID()
			}
		}()
	}
	wg.Wait()
	started, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			started++
		case errors.Is(err, flow.ErrDuplicate):
			refused++
		default:
			t.Errorf("start %d: %v", i, err)
		}
	}
	// A start may also find the first run already finished and the key
	// free again, so more than one may start, each after the previous
	// holder finished; never two at once, which the body count bounds.
	if started < 1 || started+refused != n {
		t.Fatalf("%d started and %d refused of %d", started, refused, n)
	}
	if started > 1 {
		t.Logf("%d starts found the key free again after its holder finished", started)
	}
}

// Bad dedup options fail the start with a clear error and record nothing.
func TestStartDedupBadOptions(t *testing.T) {
	t.Parallel()
	e, wf, _ := dedupEngine(t)
	ctx := context.Background()
	for _, tc := range []struct {
		opts flow.StartOptions
		want string
	}{
		{flow.StartOptions{OnDuplicate: flow.RefuseDuplicate}, "refusing duplicates needs a unique key"},
		{flow.StartOptions{UniquePeriod: time.Hour}, "a unique period needs a unique key"},
		{flow.StartOptions{UniqueStates: riverDefault()}, "unique states need a unique key"},
		{flow.StartOptions{UniqueKey: "k", UniquePeriod: -time.Second}, "negative unique period"},
		{flow.StartOptions{UniqueKey: "k", UniqueStates: []flow.RunStatus{flow.StatusCompleted}}, "unique states lack"},
		{flow.StartOptions{UniqueKey: "k", OnDuplicate: flow.DuplicatePolicy(7)}, "unknown duplicate policy 7"},
	} {
		if _, err := flow.Start(ctx, e, wf, "x", &tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	rec := &recorder{}
	job := emailJob(rec)
	flow.RegisterJob(e, job)
	if _, err := flow.Enqueue(ctx, e, job, email{}, &flow.EnqueueOptions{OnDuplicate: flow.RefuseDuplicate}); err == nil || !strings.Contains(err.Error(), "RefuseDuplicate needs UniqueKey") {
		t.Errorf("Enqueue with RefuseDuplicate and no key = %v", err)
	}
	if n := totalRuns(t, e); n != 0 {
		t.Fatalf("%d runs recorded, want none", n)
	}
}

// In a batch, an item refused as a duplicate fails the whole batch with
// an *ItemError naming it, and nothing of the batch is recorded.
func TestStartManyRefuseDuplicate(t *testing.T) {
	t.Parallel()
	e, wf, _ := dedupEngine(t)
	ctx := waitCtx(t)
	held, err := flow.Start(ctx, e, wf, "held", &flow.StartOptions{UniqueKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	refuse := &flow.StartOptions{UniqueKey: "k", OnDuplicate: flow.RefuseDuplicate}
	_, err = flow.StartMany(ctx, e, wf, []flow.StartItem[string]{{In: "a"}, {In: "b", Opts: refuse}, {In: "c"}})
	var item *flow.ItemError
	var dup *flow.DuplicateError
	if !errors.As(err, &item) || item.Index != 1 || !errors.As(err, &dup) || dup.HolderID != held.ID() {
		t.Fatalf("StartMany = %v, want an ItemError for item 1 wrapping a DuplicateError naming %s", err, held.ID())
	}
	if n := totalRuns(t, e); n != 1 {
		t.Fatalf("%d runs recorded, want only the holder", n)
	}
}

// riverDefault is River's default uniqueness: completed runs keep their
// key, failed and cancelled ones free it.
func riverDefault() []flow.RunStatus {
	return flow.UniqueStatesExcept(flow.StatusFailed, flow.StatusCancelled)
}

// failingRecorder fails, for good, the emails whose subject is "fail".
func failingRecorder() *recorder {
	return &recorder{fail: func(m email) error {
		if m.Subject == "fail" {
			return flow.Permanent(errors.New("refused"))
		}
		return nil
	}}
}

// With River's default states, a completed run keeps its key for good and
// a failed or cancelled one frees it; the zero UniqueStates keeps the
// original rule (only unfinished runs hold the key).
func TestUniqueStatesCompletedHoldsFailedAndCancelledFree(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	rec := failingRecorder()
	job := emailJob(rec)
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)
	opts := &flow.EnqueueOptions{UniqueKey: "k", UniqueStates: riverDefault()}

	ok := email{To: "a", Subject: "ok"}
	first := enqueue(t, e, job, ok, opts)
	if _, err := first.Result(ctx); err != nil {
		t.Fatal(err)
	}
	again := enqueue(t, e, job, ok, opts)
	if !again.Existing() || again.ID() != first.ID() {
		t.Errorf("enqueue after completion: run %s (existing %v), want the completed %s", again.ID(), again.Existing(), first.ID())
	}
	// A later enqueue without states meets the completed holder too: the
	// states are the holder's.
	if r := enqueue(t, e, job, ok, &flow.EnqueueOptions{UniqueKey: "k"}); r.ID() != first.ID() {
		t.Errorf("enqueue without states: run %s, want the completed holder %s", r.ID(), first.ID())
	}

	failOpts := &flow.EnqueueOptions{UniqueKey: "f", UniqueStates: riverDefault()}
	bad := email{To: "a", Subject: "fail"}
	failed := enqueue(t, e, job, bad, failOpts)
	if _, err := failed.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("failing job: %v, want rolled back", err)
	}
	retried := enqueue(t, e, job, bad, failOpts)
	if retried.Existing() || retried.ID() == failed.ID() {
		t.Errorf("enqueue after failure: run %s (existing %v), want a new run", retried.ID(), retried.Existing())
	}
	_, _ = retried.Result(ctx)

	cancelOpts := &flow.EnqueueOptions{UniqueKey: "c", UniqueStates: riverDefault(), Delay: time.Hour}
	later := enqueue(t, e, job, ok, cancelOpts)
	if err := e.Cancel(ctx, later.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := later.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("cancelled job: %v", err)
	}
	if r := enqueue(t, e, job, ok, cancelOpts); r.Existing() || r.ID() == later.ID() {
		t.Errorf("enqueue after cancellation: run %s (existing %v), want a new run", r.ID(), r.Existing())
	}

	// The zero UniqueStates: a completed run frees its key.
	plain := &flow.EnqueueOptions{UniqueKey: "plain"}
	p1 := enqueue(t, e, job, ok, plain)
	_, _ = p1.Result(ctx)
	if p2 := enqueue(t, e, job, ok, plain); p2.Existing() {
		t.Errorf("zero UniqueStates: enqueue after completion returned the completed run %s", p2.ID())
	}
}

// With every state listed, a failed run keeps its key; requeueing it passes
// the key to the new run, which re-enqueues then return.
func TestUniqueStatesFailedHoldsUntilRequeued(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	job := emailJob(failingRecorder())
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)
	opts := &flow.EnqueueOptions{UniqueKey: "k", UniqueStates: flow.UniqueStatesExcept()}
	bad := email{To: "a", Subject: "fail"}
	failed := enqueue(t, e, job, bad, opts)
	_, _ = failed.Result(ctx)
	if r := enqueue(t, e, job, bad, opts); r.ID() != failed.ID() {
		t.Fatalf("enqueue after failure: run %s, want the failed holder %s", r.ID(), failed.ID())
	}
	newID, err := e.Requeue(ctx, failed.ID())
	if err != nil {
		t.Fatalf("requeue a failed run holding its key: %v", err)
	}
	if r := enqueue(t, e, job, bad, opts); r.ID() != newID {
		t.Errorf("enqueue after requeue: run %s, want the requeued run %s", r.ID(), newID)
	}
}

// With a period, a finished run in a listed state holds its key only within
// the period after its enqueue; a failed run (not listed) frees it at once.
func TestUniqueStatesWithPeriod(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.Clock = clk
	cfg.LeaseTimeout = 1000 * time.Hour
	e := openEngine(t, dbPath(t), cfg)
	job := emailJob(failingRecorder())
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)
	opts := &flow.EnqueueOptions{UniqueByArgs: true, UniqueStates: riverDefault(), UniquePeriod: time.Hour}

	ok := email{To: "a", Subject: "ok"}
	first := enqueue(t, e, job, ok, opts)
	_, _ = first.Result(ctx)
	clk.Advance(59 * time.Minute)
	if r := enqueue(t, e, job, ok, opts); r.ID() != first.ID() {
		t.Errorf("within the period: run %s, want the completed %s", r.ID(), first.ID())
	}
	clk.Advance(time.Minute)
	if r := enqueue(t, e, job, ok, opts); r.Existing() {
		t.Errorf("after the period: the completed run %s still holds the key", r.ID())
	}

	bad := email{To: "a", Subject: "fail"}
	failed := enqueue(t, e, job, bad, opts)
	_, _ = failed.Result(ctx)
	clk.Advance(time.Minute)
	if r := enqueue(t, e, job, bad, opts); r.Existing() {
		t.Errorf("within the period: the failed run %s holds the key, want it freed", r.ID())
	}
}

// UniqueByQueue compares keys within the run's queue.
func TestUniqueByQueue(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil) // not started: the runs stay pending
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	m := email{To: "a"}
	a1 := enqueue(t, e, job, m, &flow.EnqueueOptions{UniqueKey: "k", UniqueByQueue: true, Queue: "a"})
	b1 := enqueue(t, e, job, m, &flow.EnqueueOptions{UniqueKey: "k", UniqueByQueue: true, Queue: "b"})
	if b1.Existing() {
		t.Errorf("by queue: the run in queue b got queue a's run %s", b1.ID())
	}
	if a2 := enqueue(t, e, job, m, &flow.EnqueueOptions{UniqueKey: "k", UniqueByQueue: true, Queue: "a"}); a2.ID() != a1.ID() {
		t.Errorf("by queue: second enqueue in queue a started %s, want %s", a2.ID(), a1.ID())
	}
	// Alone, UniqueByQueue makes the job unique in its queue.
	q1 := enqueue(t, e, job, email{To: "x"}, &flow.EnqueueOptions{UniqueByQueue: true, Queue: "c"})
	if q2 := enqueue(t, e, job, email{To: "y"}, &flow.EnqueueOptions{UniqueByQueue: true, Queue: "c"}); q2.ID() != q1.ID() {
		t.Errorf("UniqueByQueue alone: second enqueue started %s, want %s", q2.ID(), q1.ID())
	}
	// Without it, the key is compared across queues.
	x1 := enqueue(t, e, job, m, &flow.EnqueueOptions{UniqueKey: "x", Queue: "a"})
	if x2 := enqueue(t, e, job, m, &flow.EnqueueOptions{UniqueKey: "x", Queue: "b"}); x2.ID() != x1.ID() {
		t.Errorf("across queues: enqueue in queue b started %s, want %s", x2.ID(), x1.ID())
	}
	if n := totalRuns(t, e); n != 4 {
		t.Errorf("%d runs recorded, want 4", n)
	}
}

// Bad unique states are refused with an error naming them, and record
// nothing.
func TestUniqueStatesRejectsBadInput(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	tests := []struct {
		name string
		opts flow.EnqueueOptions
		want []string
	}{
		{"unknown state", flow.EnqueueOptions{UniqueKey: "k", UniqueStates: append(riverDefault(), "done", "Completed")}, []string{`"done"`, `"Completed"`, "unknown"}},
		{"missing unfinished states", flow.EnqueueOptions{UniqueKey: "k", UniqueStates: []flow.RunStatus{flow.StatusPending, flow.StatusRunning, flow.StatusCompleted}}, []string{"lack waiting, compensating, suspended"}},
		{"states without a key", flow.EnqueueOptions{UniqueStates: riverDefault()}, []string{"UniqueStates needs UniqueKey, UniqueByArgs or UniqueByQueue"}},
		{"period without a key", flow.EnqueueOptions{UniquePeriod: time.Hour}, []string{"UniquePeriod needs UniqueKey, UniqueByArgs or UniqueByQueue"}},
	}
	for _, tt := range tests {
		_, err := flow.Enqueue(context.Background(), e, job, email{}, &tt.opts)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
	}
	if n := totalRuns(t, e); n != 0 {
		t.Errorf("%d runs recorded, want none", n)
	}
}

// Two engines on one file enqueueing the same key at once, with River's
// default states, start one run: while it is unfinished, once it failed
// (one new run), and once it completed (no new run).
func TestUniqueStatesRaceAcrossEngines(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	rec := failingRecorder()
	job := emailJob(rec)
	engines := []*flow.Engine{openEngine(t, path, nil), openEngine(t, path, nil)}
	for _, e := range engines {
		flow.RegisterJob(e, job)
	}
	ctx := waitCtx(t)
	// The queue is paused during a race, so that no run finishes (and frees
	// its key) while it lasts.
	race := func(m email) map[string]int {
		t.Helper()
		if err := engines[0].PauseQueue(ctx, flow.DefaultQueue); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := engines[0].ResumeQueue(ctx, flow.DefaultQueue); err != nil {
				t.Fatal(err)
			}
		}()
		var mu sync.Mutex
		ids := make(map[string]int)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, e := range engines {
			for range 16 {
				wg.Go(func() {
					<-start
					run, err := flow.Enqueue(ctx, e, job, m, &flow.EnqueueOptions{UniqueKey: m.Subject, UniqueStates: riverDefault()})
					if err != nil {
						t.Errorf("enqueue: %v", err)
						return
					}
					mu.Lock()
					ids[run.ID()]++
					mu.Unlock()
				})
			}
		}
		close(start)
		wg.Wait()
		return ids
	}
	settle := func(ids map[string]int) {
		t.Helper()
		for id := range ids {
			eventually(t, "run "+id+" finished", func() bool {
				info, err := engines[0].Inspect(ctx, id)
				return err == nil && info.Status.Finished()
			})
		}
	}
	started := false
	for _, subject := range []string{"fail", "ok"} {
		m := email{To: "a", Subject: subject}
		first := race(m)
		if len(first) != 1 {
			t.Fatalf("%s: %d distinct runs %v, want 1", subject, len(first), first)
		}
		if !started {
			startEngine(t, engines[0])
			started = true
		}
		settle(first)
		second := race(m)
		if len(second) != 1 {
			t.Fatalf("%s, after the run finished: %d distinct runs %v, want 1", subject, len(second), second)
		}
		_, same := second[firstKey(first)]
		if want := subject == "ok"; same != want {
			t.Errorf("%s: the finished run returned: %v, want %v", subject, same, want)
		}
		settle(second)
	}
	// fail: the first run and the one after it; ok: one run.
	if n := totalRuns(t, engines[0]); n != 3 {
		t.Errorf("%d runs recorded, want 3", n)
	}
	if got := rec.count(); got != 3 {
		t.Errorf("handler called %d times, want 3", got)
	}
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}
