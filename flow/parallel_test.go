package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// barrier lets n callers through only once all n are waiting in it.
type barrier struct {
	n       int32
	arrived atomic.Int32
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: int32(n), all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	if b.arrived.Add(1) == b.n {
		close(b.all)
	}
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return flow.Permanent(errors.New("the other branches never reached the barrier: branches do not run concurrently"))
	}
}

// All runs its branches at once: each branch's step waits in a barrier that
// opens only when every branch is inside its step. The results come back in
// branch order, whatever order the branches finished in.
func TestAllRunsBranchesConcurrentlyInOrder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	const n = 3
	b := newBarrier(n)
	var c counter
	meet := flow.Step[int, int]{Name: "meet", Run: func(ctx context.Context, i int) (int, error) {
		c.inc(fmt.Sprint("meet", i))
		if err := b.wait(ctx); err != nil {
			return 0, err
		}
		// Later branches finish first.
		time.Sleep(time.Duration(n-i) * 10 * time.Millisecond)
		return i * 10, nil
	}}
	wf := flow.Workflow[int, []string]{Name: "fan-out", Run: func(wc flow.Context, _ int) ([]string, error) {
		branches := make([]func(flow.Context) (string, error), n)
		for i := range branches {
			branches[i] = func(wc flow.Context) (string, error) {
				v, err := flow.Do(wc, meet, i)
				return fmt.Sprintf("branch %d: %d", i, v), err
			}
		}
		return flow.All(wc, branches...)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run.Result(ctx)
	want := []string{"branch 0: 0", "branch 1: 10", "branch 2: 20"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("result = %q, %v; want %q", got, err, want)
	}
	for i := range n {
		if k := c.get(fmt.Sprint("meet", i)); k != 1 {
			t.Fatalf("branch %d's step ran %d times, want 1", i, k)
		}
	}
}

// When a branch fails, All returns its error after the other branches
// returned; the workflow fails and the compensations undo exactly the steps
// that completed, in any branch, in reverse completion order.
func TestAllFailedBranchCompensatesCompletedStepsInReverseOrder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	var u undoLog
	a1, a2 := compensable(&c, &u, "a1"), compensable(&c, &u, "a2")
	b1, b3 := compensable(&c, &u, "b1"), compensable(&c, &u, "b3")
	c1, c2 := countedStep(&c, "c1"), compensable(&c, &u, "c2")
	after := compensable(&c, &u, "after")
	b1Done := make(chan struct{})
	var b1Once sync.Once
	b2 := flow.Step[string, string]{Name: "b2", Run: func(context.Context, string) (string, error) {
		c.inc("b2")
		return "", flow.Permanent(errors.New("out of stock"))
	}}
	// a2 runs after b1 completed, so completions interleave across branches.
	a2.Run = func(ctx context.Context, s string) (string, error) {
		select {
		case <-b1Done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		c.inc("a2")
		return s + "+a2", nil
	}
	seq := func(steps ...flow.Step[string, string]) func(flow.Context) (string, error) {
		return func(wc flow.Context) (string, error) {
			s := "in"
			for _, st := range steps {
				var err error
				if s, err = flow.Do(wc, st, s); err != nil {
					return "", err
				}
				if st.Name == "b1" {
					b1Once.Do(func() { close(b1Done) })
				}
			}
			return s, nil
		}
	}
	wf := flow.Workflow[string, string]{Name: "fan-out-fails", Run: func(wc flow.Context, in string) (string, error) {
		if _, err := flow.All(wc, seq(a1, a2), seq(b1, b2, b3), seq(c1, c2)); err != nil {
			return "", err
		}
		return flow.Do(wc, after, in)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "in", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(ctx)
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) || !strings.Contains(rb.Cause, "branch 1") || !strings.Contains(rb.Cause, "out of stock") {
		t.Fatalf("result err = %v, want rolled back by branch 1's out of stock", err)
	}
	if !strings.HasSuffix(rb.Step, "b2") || rb.Attempts != 1 {
		t.Errorf("rolled back by step %q after %d attempts, want branch 1's b2 after 1", rb.Step, rb.Attempts)
	}
	for name, want := range map[string]int{"a1": 1, "a2": 1, "b1": 1, "b2": 1, "b3": 0, "c1": 1, "c2": 1, "after": 0} {
		if got := c.get(name); got != want {
			t.Fatalf("step %s ran %d times, want %d", name, got, want)
		}
	}

	events, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var completed, compensated []string
	for _, ev := range events {
		short := ev.Step[strings.LastIndex(ev.Step, "/")+1:]
		switch {
		case ev.Kind == flow.EventStepCompleted && short != "c1":
			completed = append(completed, short)
		case ev.Kind == flow.EventCompensationCompleted:
			compensated = append(compensated, short)
		}
	}
	slices.Reverse(completed)
	if !slices.Equal(compensated, completed) {
		t.Fatalf("compensations ran in order %v, want the reverse completion order %v", compensated, completed)
	}
	if got := u.list(); !slices.Equal(got, compensated) {
		t.Fatalf("compensation hooks ran %v, history says %v", got, compensated)
	}
	slices.Sort(compensated)
	if !slices.Equal(compensated, []string{"a1", "a2", "b1", "c2"}) {
		t.Fatalf("compensated %v, want exactly a1, a2, b1, c2", compensated)
	}
}

// An engine closed while a fan-out's branches are inside steps leaves the
// run to the next engine, which replays it: no completed branch step runs
// again, the interrupted ones run again, and the result is right.
func TestAllResumesAfterRestartMidFanOut(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var c counter
	var block atomic.Bool
	block.Store(true)
	var inside atomic.Int32
	second := flow.Step[string, string]{Name: "second", Run: func(ctx context.Context, s string) (string, error) {
		c.inc("second " + s)
		if block.Load() {
			inside.Add(1)
			<-ctx.Done()
			return "", ctx.Err()
		}
		return s + "+second", nil
	}}
	first := flow.Step[string, string]{Name: "first", Run: func(_ context.Context, s string) (string, error) {
		c.inc("first " + s)
		return s, nil
	}}
	wf := flow.Workflow[string, []string]{Name: "fan-out-restart", Run: func(wc flow.Context, in string) ([]string, error) {
		branch := func(name string) func(flow.Context) (string, error) {
			return func(wc flow.Context) (string, error) {
				s, err := flow.Do(wc, first, name)
				if err != nil {
					return "", err
				}
				return flow.Do(wc, second, s)
			}
		}
		return flow.All(wc, branch("left"), branch("right"))
	}}
	register := func(e *flow.Engine) { flow.Register(e, wf) }

	e1, close1 := engineSession(t, path, nil, register)
	run, err := flow.Start(ctx, e1, wf, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both branches to be inside their second step", func() bool { return inside.Load() == 2 })
	close1()

	block.Store(false)
	e2 := openEngine(t, path, nil)
	register(e2)
	info := inspect(t, e2, run.ID())
	if info.Status != flow.StatusPending {
		t.Fatalf("after close the run is %s, want pending (released)", info.Status)
	}
	startEngine(t, e2)
	got, err := handle(t, e2, wf, run.ID()).Result(ctx)
	if err != nil || !slices.Equal(got, []string{"left+second", "right+second"}) {
		t.Fatalf("result = %q, %v", got, err)
	}
	for _, side := range []string{"left", "right"} {
		if n := c.get("first " + side); n != 1 {
			t.Fatalf("completed step first of %s ran %d times, want 1", side, n)
		}
		if n := c.get("second " + side); n != 2 {
			t.Fatalf("interrupted step second of %s ran %d times, want 2", side, n)
		}
	}
	if n := countKind(t, e2, run.ID(), flow.EventStepFailed); n != 0 {
		t.Fatalf("%d step_failed events: an interrupted attempt must not count as a failure", n)
	}
}
