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
