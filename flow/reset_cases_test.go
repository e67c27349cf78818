package flow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// A reset from a receive delivers the signal it took again, so the re-run
// receives it without a new one.
func TestResetRedeliversSignals(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	b := c.step("b")
	wf := flow.Workflow[int, int]{Name: "reset-signal", Run: func(wc flow.Context, in int) (int, error) {
		got, err := flow.Receive[int](wc, "go", 0)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, b, in+got)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "go", 5, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 7 {
		t.Fatalf("first execution: %d, %v", out, err)
	}
	if err := e.Reset(ctx, run.ID(), "flow.receive:go#0"); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 7 {
		t.Fatalf("after reset: %d, %v; want 7 from the same signal", out, err)
	}
	if c.count("b") != 2 {
		t.Errorf("b ran %d times, want 2", c.count("b"))
	}
}

// A parallel call before the reset point replays whole; one after it runs
// again whole.
func TestResetAroundAParallelCall(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	a, x, y, z := c.step("a"), c.step("x"), c.step("y"), c.step("z")
	wf := flow.Workflow[int, int]{Name: "reset-parallel-call", Run: func(wc flow.Context, in int) (int, error) {
		v, err := flow.Do(wc, a, in)
		if err != nil {
			return 0, err
		}
		vs, err := flow.All(wc,
			func(wc flow.Context) (int, error) { return flow.Do(wc, x, v) },
			func(wc flow.Context) (int, error) { return flow.Do(wc, y, v) })
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, z, vs[0]+vs[1])
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 7 {
		t.Fatalf("first execution: %d, %v", out, err)
	}
	if err := e.Reset(ctx, run.ID(), "z"); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 7 {
		t.Fatalf("after reset from z: %d, %v", out, err)
	}
	counts := func() []int { return []int{c.count("a"), c.count("x"), c.count("y"), c.count("z")} }
	if got := counts(); !slices.Equal(got, []int{1, 1, 1, 2}) {
		t.Errorf("after reset from z, calls of a, x, y, z: %v, want [1 1 1 2]", got)
	}
	if err := e.Reset(ctx, run.ID(), "a"); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 7 {
		t.Fatalf("after reset from a: %d, %v", out, err)
	}
	if got := counts(); !slices.Equal(got, []int{2, 2, 2, 3}) {
		t.Errorf("after reset from a, calls of a, x, y, z: %v, want [2 2 2 3]", got)
	}
}

// finishedUniqueJob starts an engine with a job of the given name that
// does nothing, and returns a run of it enqueued with the unique key,
// waited for to its end.
func finishedUniqueJob(t *testing.T, name, key string) (*flow.Engine, context.Context, flow.Job[email], *flow.Run[struct{}]) {
	t.Helper()
	e := openEngine(t, dbPath(t), nil)
	job := flow.Job[email]{Name: name, Handler: func(context.Context, email) error { return nil }}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)
	first, err := flow.Enqueue(ctx, e, job, email{To: "a"}, &flow.EnqueueOptions{UniqueKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Result(ctx); err != nil {
		t.Fatal(err)
	}
	return e, ctx, job, first
}

// A finished run whose unique key another run took since cannot take it
// back: the reset is refused until the key is free.
func TestResetRefusesATakenUniqueKey(t *testing.T) {
	t.Parallel()
	e, ctx, job, first := finishedUniqueJob(t, "reset-unique", "k")
	second, err := flow.Enqueue(ctx, e, job, email{To: "b"}, &flow.EnqueueOptions{UniqueKey: "k", Queue: "nobody-works-it"})
	if err != nil || second.Existing() {
		t.Fatalf("second run: %v, existing %v", err, second.Existing())
	}
	info, _ := e.Inspect(ctx, first.ID())
	step := info.Steps[0].Name + "#0"
	before := eventKinds(t, e, first.ID())
	if err := e.Reset(ctx, first.ID(), step); !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "holds its unique key") {
		t.Fatalf("reset while another run holds the key: %v", err)
	}
	if !slices.Equal(eventKinds(t, e, first.ID()), before) {
		t.Error("the refused reset changed the history")
	}
	if err := e.Cancel(ctx, second.ID()); err != nil {
		t.Fatal(err)
	}
	if err := e.Reset(ctx, first.ID(), step); err != nil {
		t.Fatalf("reset once the key is free: %v", err)
	}
	if _, err := first.Result(ctx); err != nil {
		t.Fatal(err)
	}
}

// On a sharded engine the calls find the run in its shard, and a fork
// stays there with it.
func TestResetForkReviveSharded(t *testing.T) {
	t.Parallel()
	e := openShards(t, shardPaths(t, 3), nil)
	c := newCounted()
	wf := chain(c, "reset-sharded")
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	c.set("c", true)
	var runs []*flow.Run[int]
	for i := range e.Shards() {
		run, err := flow.Start(ctx, e, wf, i, &flow.StartOptions{RunID: idIn(t, e, i, "sharded")})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for _, run := range runs {
		if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
			t.Fatal(err)
		}
	}
	c.set("c", false)
	for i, run := range runs {
		forkID, err := e.Fork(ctx, run.ID(), "c")
		if err != nil {
			t.Fatalf("fork on shard %d: %v", i, err)
		}
		if _, err := e.Shard(i).Inspect(ctx, forkID); err != nil {
			t.Errorf("fork %s is not in its run's shard %d: %v", forkID, i, err)
		}
		if err := e.Revive(ctx, run.ID()); err != nil {
			t.Fatalf("revive on shard %d: %v", i, err)
		}
		if _, err := run.Result(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Reset(ctx, run.ID(), "b"); err != nil {
			t.Fatalf("reset on shard %d: %v", i, err)
		}
		if _, err := run.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A finished run cannot take back a unique key that another run's unique
// period holds, even once that run finished.
func TestResetRefusesAKeyHeldForAPeriod(t *testing.T) {
	t.Parallel()
	e, ctx, job, first := finishedUniqueJob(t, "reset-unique-period", "p")
	second, err := flow.Enqueue(ctx, e, job, email{To: "b"}, &flow.EnqueueOptions{UniqueKey: "p", UniquePeriod: time.Hour})
	if err != nil || second.Existing() {
		t.Fatalf("second run: %v, existing %v", err, second.Existing())
	}
	if _, err := second.Result(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ := e.Inspect(ctx, first.ID())
	err = e.Reset(ctx, first.ID(), info.Steps[0].Name)
	if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "run "+second.ID()+" holds its unique key") {
		t.Fatalf("reset while another run's period holds the key: %v", err)
	}
}

// The exported history of a run that was reset and of its fork replays
// against the workflow's code like any other.
func TestResetAndForkReplay(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	wf := chain(c, "reset-replay")
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Reset(ctx, run.ID(), "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	forkID, err := e.Fork(ctx, run.ID(), "c")
	if err != nil {
		t.Fatal(err)
	}
	fork, _ := flow.Lookup(ctx, e, wf, forkID)
	if _, err := fork.Result(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{run.ID(), forkID} {
		h, err := e.ExportHistory(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.Replay(ctx, h)
		if err != nil || !rep.Returned || rep.Calls != 3 {
			t.Errorf("replay of %s: %+v, %v; want 3 calls and a return", id, rep, err)
		}
	}
}

// A fork keeps the run's timeout and context values, and a reset run gets
// its whole timeout again.
func TestForkAndResetKeepStartOptions(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var seen sync.Map // run ID → tenant the step saw
	step := flow.Step[int, int]{Name: "tenant", Run: func(ctx context.Context, in int) (int, error) {
		v, _ := flow.Value(ctx, "tenant")
		info, _ := flow.Attempt(ctx)
		seen.Store(info.RunID, v)
		return in, nil
	}}
	wf := flow.Workflow[int, int]{Name: "reset-options", Run: func(wc flow.Context, in int) (int, error) {
		return flow.Do(wc, step, in)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	run, err := flow.Start(flow.WithValue(ctx, "tenant", "acme"), e, wf, 1, &flow.StartOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	forkID, err := e.Fork(ctx, run.ID(), "tenant")
	if err != nil {
		t.Fatal(err)
	}
	fork, _ := flow.Lookup(ctx, e, wf, forkID)
	if _, err := fork.Result(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ := e.Inspect(ctx, forkID)
	if info.Timeout != time.Hour || info.Values["tenant"] != "acme" {
		t.Errorf("fork: timeout %s, values %v; want 1h and the tenant", info.Timeout, info.Values)
	}
	if v, _ := seen.Load(forkID); v != "acme" {
		t.Errorf("the fork's step saw tenant %v, want acme", v)
	}
	if left := time.Until(info.Deadline); left < 50*time.Minute || left > time.Hour {
		t.Errorf("fork's deadline in %s, want about an hour from its first claim", left)
	}
	if err := e.Reset(ctx, run.ID(), "tenant"); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.Inspect(ctx, run.ID()); time.Until(info.Deadline) < 59*time.Minute {
		t.Errorf("reset run's deadline in %s, want its whole timeout again", time.Until(info.Deadline))
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
}

// Going back past the start of a child whose run exists is refused, naming
// the child; once the child is deleted, the re-run starts it again. A fork
// starts a child of its own.
func TestResetPastAChildStart(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	child := chain(c, "reset-child")
	parent := flow.Workflow[int, int]{Name: "reset-child-parent", Run: func(wc flow.Context, in int) (int, error) {
		ch, err := flow.StartChild(wc, child, in, nil)
		if err != nil {
			return 0, err
		}
		return ch.Result(wc)
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)
	ctx := waitCtx(t)
	run, err := flow.Start(ctx, e, parent, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	info, _ := e.Inspect(ctx, run.ID())
	start := info.Steps[0]
	childID := strings.Trim(string(start.Output), `"`)
	before := eventKinds(t, e, run.ID())
	err = e.Reset(ctx, run.ID(), start.Name)
	if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "started child run "+childID+", which is completed") {
		t.Fatalf("reset past a child's start: %v", err)
	}
	if !slices.Equal(eventKinds(t, e, run.ID()), before) {
		t.Error("the refused reset changed the history")
	}
	forkID, err := e.Fork(ctx, run.ID(), start.Name)
	if err != nil {
		t.Fatalf("fork past a child's start: %v", err)
	}
	fork, _ := flow.Lookup(ctx, e, parent, forkID)
	if out, err := fork.Result(ctx); err != nil || out != 4 {
		t.Fatalf("fork: %d, %v", out, err)
	}
	if err := e.DeleteRun(ctx, childID); err != nil {
		t.Fatal(err)
	}
	if err := e.Reset(ctx, run.ID(), start.Name); err != nil {
		t.Fatalf("reset once the child is deleted: %v", err)
	}
	if out, err := run.Result(ctx); err != nil || out != 4 {
		t.Fatalf("after reset: %d, %v", out, err)
	}
	if c.count("a") != 3 {
		t.Errorf("the child's first step ran %d times, want 3 (first run, fork, reset)", c.count("a"))
	}
}
