package flow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// counted is a set of steps that count their calls and fail while told to.
type counted struct {
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]bool
}

func newCounted() *counted { return &counted{calls: map[string]int{}, fail: map[string]bool{}} }

func (c *counted) step(name string) flow.Step[int, int] {
	return flow.Step[int, int]{Name: name, Run: func(_ context.Context, in int) (int, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.calls[name]++
		if c.fail[name] {
			return 0, flow.Permanent(errors.New(name + " refused"))
		}
		return in + 1, nil
	}}
}

func (c *counted) set(name string, fail bool) {
	c.mu.Lock()
	c.fail[name] = fail
	c.mu.Unlock()
}

func (c *counted) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[name]
}

// chain is a workflow of the steps a, b and c in turn.
func chain(c *counted, name string) flow.Workflow[int, int] {
	a, b, cc := c.step("a"), c.step("b"), c.step("c")
	return flow.Workflow[int, int]{Name: name, Run: func(wc flow.Context, in int) (int, error) {
		v, err := flow.Do(wc, a, in)
		if err != nil {
			return 0, err
		}
		if v, err = flow.Do(wc, b, v); err != nil {
			return 0, err
		}
		return flow.Do(wc, cc, v)
	}}
}

func stepNames(info flow.RunInfo) []string {
	var out []string
	for _, s := range info.Steps {
		out = append(out, s.Name+"="+s.Status)
	}
	return out
}

func lastEvent(t *testing.T, e *flow.Engine, id string) flow.Event {
	t.Helper()
	h, err := e.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h[len(h)-1]
}

// lastOf returns the last event of kind in the run's history: an engine
// may have claimed the run since.
func lastOf(t *testing.T, e *flow.Engine, id, kind string) flow.Event {
	t.Helper()
	h, err := e.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == kind {
			return h[i]
		}
	}
	t.Fatalf("run %s has no %s event", id, kind)
	return flow.Event{}
}

// A dead letter reset from its second step keeps the first step's record,
// runs the others again, and completes; time travel shows it before and
// after the reset.
func TestResetFailedRunFromAStep(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	wf := chain(c, "reset-chain")
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)

	c.set("c", true)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("first execution: %v, want ErrRolledBack", err)
	}
	failedAt := lastEvent(t, e, run.ID())

	c.set("c", false)
	if err := e.Reset(ctx, run.ID(), "b#0"); err != nil {
		t.Fatalf("reset: %v", err)
	}
	ev := lastOf(t, e, run.ID(), flow.EventRunReset)
	if ev.Kind != flow.EventRunReset || !strings.Contains(ev.Detail, "from b#0") || !strings.HasSuffix(ev.Detail, `; discarded: ["b#0","c#0"]`) {
		t.Errorf("reset event %s %q", ev.Kind, ev.Detail)
	}
	out, err := run.Result(ctx)
	if err != nil || out != 4 {
		t.Fatalf("after reset: %d, %v; want 4", out, err)
	}
	if got := []int{c.count("a"), c.count("b"), c.count("c")}; !slices.Equal(got, []int{1, 2, 2}) {
		t.Errorf("calls of a, b, c: %v, want [1 2 2]", got)
	}
	info, _ := e.Inspect(ctx, run.ID())
	if info.Status != flow.StatusCompleted || !slices.Equal(stepNames(info), []string{"a=completed", "b=completed", "c=completed"}) {
		t.Errorf("after reset: %s %v", info.Status, stepNames(info))
	}

	// Time travel: failed with three calls before the reset, pending with
	// one right after it, completed now.
	before, err := e.InspectAfter(ctx, run.ID(), failedAt.ID)
	if err != nil {
		t.Fatal(err)
	}
	if before.Run.Status != flow.StatusFailed || !slices.Equal(stepNames(before.Run), []string{"a=completed", "b=completed", "c=failed"}) {
		t.Errorf("before the reset: %s %v", before.Run.Status, stepNames(before.Run))
	}
	for _, s := range before.Run.Steps {
		if s.Name == "b" && s.Output != nil {
			t.Errorf("before the reset, b shows output %s, which its re-run wrote", s.Output)
		}
	}
	after, err := e.InspectAfter(ctx, run.ID(), ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Run.Status != flow.StatusPending || after.Run.Error != "" || !slices.Equal(stepNames(after.Run), []string{"a=completed"}) {
		t.Errorf("right after the reset: %s %q %v", after.Run.Status, after.Run.Error, stepNames(after.Run))
	}
	if now, _ := e.InspectAt(ctx, run.ID(), time.Now().Add(time.Hour)); now.Run.Status != flow.StatusCompleted || len(now.Run.Steps) != 3 || string(now.Run.Output) != "4" {
		t.Errorf("now: %s %v %s", now.Run.Status, stepNames(now.Run), now.Run.Output)
	}

	// The change feed carries the reset.
	var fed bool
	for ch, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		fed = fed || (ch.RunID == run.ID() && ch.Kind == flow.EventRunReset)
	}
	if !fed {
		t.Error("the change feed lacks the reset")
	}
}

// A fork of a failed run starts from the chosen call with the records
// before it, leaves the original as it was, and takes the next free ID.
func TestForkFromAStep(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	wf := chain(c, "fork-chain")
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)

	c.set("c", true)
	run, err := flow.Start(ctx, e, wf, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("first execution: %v", err)
	}
	c.set("c", false)
	forkID, err := e.Fork(ctx, run.ID(), "c")
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	if forkID != run.ID()+"/fork-1" {
		t.Errorf("fork ID %q, want %s/fork-1", forkID, run.ID())
	}
	fork, err := flow.Lookup(ctx, e, wf, forkID)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := fork.Result(ctx); err != nil || out != 13 {
		t.Fatalf("fork: %d, %v; want 13", out, err)
	}
	if got := []int{c.count("a"), c.count("b"), c.count("c")}; !slices.Equal(got, []int{1, 1, 2}) {
		t.Errorf("calls of a, b, c: %v, want [1 1 2]", got)
	}
	orig, _ := e.Inspect(ctx, run.ID())
	if orig.Status != flow.StatusFailed || !slices.Equal(stepNames(orig), []string{"a=completed", "b=completed", "c=failed"}) {
		t.Errorf("the original changed: %s %v", orig.Status, stepNames(orig))
	}
	if ev := lastEvent(t, e, run.ID()); ev.Kind != flow.EventRunForked || !strings.Contains(ev.Detail, "as "+forkID+" from c#0") {
		t.Errorf("original's last event %s %q", ev.Kind, ev.Detail)
	}
	h, _ := e.History(ctx, forkID)
	if h[0].Kind != flow.EventRunStarted || !strings.Contains(h[0].Detail, "fork of "+run.ID()) {
		t.Errorf("fork's first event %s %q", h[0].Kind, h[0].Detail)
	}
	// Time travel on the fork: its copied records from its first event on.
	first, err := e.InspectAfter(ctx, forkID, h[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(stepNames(first.Run), []string{"a=completed", "b=completed"}) {
		t.Errorf("the fork at its start: %v", stepNames(first.Run))
	}
	// A fork of a running or finished run alike; the next one is /fork-2.
	if id, err := e.Fork(ctx, run.ID(), "a#0"); err != nil || id != run.ID()+"/fork-2" {
		t.Errorf("second fork: %q, %v", id, err)
	}
}

// Revive brings a cancelled run back to the wait it was cancelled in, and
// a dead letter back to its first compensated step, under their own IDs.
func TestRevive(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	a, b := c.step("a"), c.step("b")
	waiter := flow.Workflow[int, int]{Name: "revive-wait", Run: func(wc flow.Context, in int) (int, error) {
		v, err := flow.Do(wc, a, in)
		if err != nil {
			return 0, err
		}
		got, err := flow.Receive[int](wc, "go", 0)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, b, v+got)
	}}
	var undone atomic.Int32
	reserve := flow.Step[int, int]{Name: "reserve", Run: func(_ context.Context, in int) (int, error) {
		c.mu.Lock()
		c.calls["reserve"]++
		c.mu.Unlock()
		return in, nil
	}, Compensate: func(context.Context, int, int) error { undone.Add(1); return nil }}
	charge := c.step("charge")
	saga := flow.Workflow[int, int]{Name: "revive-saga", Run: func(wc flow.Context, in int) (int, error) {
		v, err := flow.Do(wc, reserve, in)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, charge, v)
	}}
	flow.Register(e, waiter)
	flow.Register(e, saga)
	startEngine(t, e)
	ctx := waitCtx(t)

	run, err := flow.Start(ctx, e, waiter, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits for its signal", func() bool {
		info, _ := e.Inspect(ctx, run.ID())
		return info.Status == flow.StatusWaiting
	})
	if err := e.Cancel(ctx, run.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if err := e.Revive(ctx, run.ID()); err != nil {
		t.Fatalf("revive a cancelled run: %v", err)
	}
	if ev := lastOf(t, e, run.ID(), flow.EventRunReset); !strings.Contains(ev.Detail, "revived (it was cancelled) from flow.receive:go#0") {
		t.Errorf("revive event %s %q", ev.Kind, ev.Detail)
	}
	eventually(t, "the revived run waits again", func() bool {
		info, _ := e.Inspect(ctx, run.ID())
		return info.Status == flow.StatusWaiting
	})
	if _, err := flow.Signal(ctx, e, run.ID(), "go", 5, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 8 {
		t.Fatalf("revived run: %d, %v; want 8", out, err)
	}
	if c.count("a") != 1 {
		t.Errorf("a ran %d times, want once: its record stood", c.count("a"))
	}

	// A dead letter whose reserve was compensated goes back to reserve.
	c.set("charge", true)
	dead, err := flow.Start(ctx, e, saga, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Result(ctx); !errors.Is(err, flow.ErrRolledBack) || undone.Load() != 1 {
		t.Fatalf("saga: %v, %d compensations", err, undone.Load())
	}
	c.set("charge", false)
	if err := e.Revive(ctx, dead.ID()); err != nil {
		t.Fatalf("revive a dead letter: %v", err)
	}
	if out, err := dead.Result(ctx); err != nil || out != 8 {
		t.Fatalf("revived dead letter: %d, %v; want 8", out, err)
	}
	if c.count("reserve") != 2 || c.count("charge") != 2 {
		t.Errorf("reserve ran %d times, charge %d; want 2 and 2", c.count("reserve"), c.count("charge"))
	}
	if letters, _ := e.DeadLetters(ctx, flow.DeadLetterFilter{}); len(letters) != 0 {
		t.Errorf("dead letters after revive: %d", len(letters))
	}
}

// Bad input and runs in the wrong state are refused with clear errors and
// change nothing.
func TestResetRefusals(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	c := newCounted()
	wf := chain(c, "reset-refusals")
	release := make(chan struct{})
	blocking := flow.Workflow[int, int]{Name: "reset-blocking", Run: func(wc flow.Context, in int) (int, error) {
		return flow.Do(wc, flow.Step[int, int]{Name: "block", Run: func(context.Context, int) (int, error) { <-release; return 1, nil }}, in)
	}}
	parallel := flow.Workflow[int, int]{Name: "reset-parallel", Run: func(wc flow.Context, in int) (int, error) {
		vs, err := flow.All(wc, func(wc flow.Context) (int, error) { return flow.Do(wc, c.step("p"), in) })
		if err != nil {
			return 0, err
		}
		return vs[0], nil
	}}
	var compensated atomic.Int32
	saga := flow.Workflow[int, int]{Name: "reset-saga", Run: func(wc flow.Context, in int) (int, error) {
		v, err := flow.Do(wc, flow.Step[int, int]{Name: "hold", Run: func(_ context.Context, in int) (int, error) { return in, nil },
			Compensate: func(context.Context, int, int) error { compensated.Add(1); return nil }}, in)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, c.step("x"), v)
	}}
	flow.Register(e, wf)
	flow.Register(e, blocking)
	flow.Register(e, parallel)
	flow.Register(e, saga)
	startEngine(t, e)
	ctx := waitCtx(t)

	done, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Result(ctx); err != nil {
		t.Fatal(err)
	}
	par, err := flow.Start(ctx, e, parallel, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := par.Result(ctx); err != nil {
		t.Fatal(err)
	}
	c.set("x", true)
	failed, err := flow.Start(ctx, e, saga, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failed.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatal(err)
	}
	busy, err := flow.Start(ctx, e, blocking, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	eventually(t, "the blocking run executes", func() bool {
		info, _ := e.Inspect(ctx, busy.ID())
		return info.Status == flow.StatusRunning && len(info.Steps) == 1
	})

	cases := []struct {
		name, id string
		do       func() error
		want     error
		says     string
	}{
		{"never reached", done.ID(), func() error { return e.Reset(ctx, done.ID(), "d") }, flow.ErrStepNotFound, "never reached step d#0: its calls are a#0, b#0, c#0"},
		{"other occurrence", done.ID(), func() error { return e.Reset(ctx, done.ID(), "a#1") }, flow.ErrStepNotFound, "never reached step a#1"},
		{"fork never reached", done.ID(), func() error { _, err := e.Fork(ctx, done.ID(), "d"); return err }, flow.ErrStepNotFound, "never reached"},
		{"unknown run", "", func() error { return e.Reset(ctx, "no-such-run", "a") }, flow.ErrRunNotFound, "no-such-run"},
		{"unknown fork", "", func() error { _, err := e.Fork(ctx, "no-such-run", "a"); return err }, flow.ErrRunNotFound, "no-such-run"},
		{"unknown revive", "", func() error { return e.Revive(ctx, "no-such-run") }, flow.ErrRunNotFound, "no-such-run"},
		{"running", busy.ID(), func() error { return e.Reset(ctx, busy.ID(), "block") }, flow.ErrConflict, "leased by"},
		{"revive running", busy.ID(), func() error { return e.Revive(ctx, busy.ID()) }, flow.ErrConflict, "run is running, not cancelled or failed"},
		{"revive completed", done.ID(), func() error { return e.Revive(ctx, done.ID()) }, flow.ErrConflict, "reset it from one of its calls"},
		{"in a branch", par.ID(), func() error { return e.Reset(ctx, par.ID(), "all0.0/p") }, flow.ErrConflict, "branch of a parallel call"},
		{"past a compensated step", failed.ID(), func() error { return e.Reset(ctx, failed.ID(), "x") }, flow.ErrConflict, "step hold#0 before x#0 was compensated"},
		{"empty step", done.ID(), func() error { return e.Reset(ctx, done.ID(), "") }, nil, "empty step name"},
	}
	for _, tc := range cases {
		var before []string
		var info flow.RunInfo
		if tc.id != "" {
			before = eventKinds(t, e, tc.id)
			info, _ = e.Inspect(ctx, tc.id)
		}
		err := tc.do()
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
		if tc.id == "" {
			continue
		}
		if got := eventKinds(t, e, tc.id); !slices.Equal(got, before) {
			t.Errorf("%s: a refusal changed the history: %v", tc.name, got[len(before):])
		}
		if after, _ := e.Inspect(ctx, tc.id); after.Status != info.Status || len(after.Steps) != len(info.Steps) {
			t.Errorf("%s: a refusal changed the run", tc.name)
		}
	}
	// Going back to the compensated step itself is allowed: it runs again.
	c.set("x", false)
	if err := e.Reset(ctx, failed.ID(), "hold"); err != nil {
		t.Fatalf("reset from the compensated step: %v", err)
	}
	if _, err := failed.Result(ctx); err != nil {
		t.Fatalf("after reset: %v", err)
	}
	// A parallel call before the reset point is kept whole.
	if err := e.Reset(ctx, par.ID(), "all0.0/p#0"); err == nil {
		t.Error("reset from a branch call accepted")
	}
}

// An operator resetting waiting runs while an engine wakes and claims
// them: each reset either applies before the claim or is refused, the run
// completes, and no run ever executes twice at once.
func TestResetRacingClaims(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	var inflight, overlap atomic.Int32
	var firsts atomic.Int32
	first := flow.Step[int, int]{Name: "first", Run: func(_ context.Context, in int) (int, error) { firsts.Add(1); return in, nil }}
	last := flow.Step[int, int]{Name: "last", Run: func(_ context.Context, in int) (int, error) {
		if inflight.Add(1) > 1 {
			overlap.Add(1)
		}
		time.Sleep(2 * time.Millisecond)
		inflight.Add(-1)
		return in, nil
	}}
	wf := flow.Workflow[int, int]{Name: "reset-race", Run: func(wc flow.Context, in int) (int, error) {
		v, err := flow.Do(wc, first, in)
		if err != nil {
			return 0, err
		}
		got, err := flow.Receive[int](wc, "go", 0)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, last, v+got)
	}}
	engines := make([]*flow.Engine, 2)
	for i := range engines {
		engines[i] = openEngine(t, path, nil)
		flow.Register(engines[i], wf)
		startEngine(t, engines[i])
	}
	ctx := waitCtx(t)
	const n = 20
	reset, refused := 0, 0
	for i := range n {
		run, err := flow.Start(ctx, engines[0], wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the run waits", func() bool {
			info, _ := engines[1].Inspect(ctx, run.ID())
			return info.Status == flow.StatusWaiting
		})
		done := make(chan error, 1)
		go func() {
			_, err := flow.Signal(ctx, engines[0], run.ID(), "go", 1, nil)
			done <- err
		}()
		switch err := engines[1].Reset(ctx, run.ID(), "flow.receive:go"); {
		case err == nil:
			reset++
		case errors.Is(err, flow.ErrConflict):
			refused++
		default:
			t.Fatalf("reset %s: %v", run.ID(), err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if out, err := run.Result(ctx); err != nil || out != i+1 {
			t.Fatalf("run %s: %d, %v; want %d", run.ID(), out, err, i+1)
		}
	}
	if overlap.Load() != 0 {
		t.Errorf("a step ran %d times while another execution ran it", overlap.Load())
	}
	if firsts.Load() != n {
		t.Errorf("first ran %d times, want %d: its record is kept by every reset", firsts.Load(), n)
	}
	t.Logf("%d resets applied, %d refused", reset, refused)
}

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
