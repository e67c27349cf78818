package flow_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// waiter waits for the signal "go" and returns its payload.
var waiter = flow.Workflow[int, int]{Name: "waiter", Run: func(wc flow.Context, _ int) (int, error) {
	return flow.Receive[int](wc, "go", 0)
}}

// A detached child outlives its parent's cancellation, where an attached
// sibling is cancelled with it; it inherits no deadline from the parent,
// and still names it as its parent.
func TestDetachedChildOutlivesItsParentsCancellation(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	parent := flow.Workflow[int, int]{Name: "detaching-parent", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/attached"}); err != nil {
			return 0, err
		}
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/detached", Detached: true}); err != nil {
			return 0, err
		}
		return flow.Receive[int](wc, "never", 0)
	}}
	flow.Register(e, waiter)
	flow.Register(e, parent)
	startEngine(t, e)
	ctx := waitCtx(t)
	p, err := flow.Start(ctx, e, parent, 1, &flow.StartOptions{RunID: "p", Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p/attached", "p/detached"} {
		eventually(t, id+" waiting", func() bool {
			info, err := e.Inspect(ctx, id)
			return err == nil && info.Status == flow.StatusWaiting
		})
	}
	attached, _ := e.Inspect(ctx, "p/attached")
	detached, _ := e.Inspect(ctx, "p/detached")
	if attached.Deadline.IsZero() || !detached.Deadline.IsZero() {
		t.Errorf("deadlines: attached %s, detached %s; want the parent's and none", attached.Deadline, detached.Deadline)
	}
	if !detached.Detached || attached.Detached || detached.ParentID != "p" {
		t.Errorf("detached child: Detached %v, parent %q; attached child: Detached %v", detached.Detached, detached.ParentID, attached.Detached)
	}
	if err := e.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	var cancelled *flow.CancelledError
	if _, err := p.Result(ctx); !errors.As(err, &cancelled) {
		t.Fatalf("parent = %v, want cancelled", err)
	}
	eventually(t, "the attached child cancelled", func() bool {
		info, err := e.Inspect(ctx, "p/attached")
		return err == nil && info.Status == flow.StatusCancelled
	})
	if info, _ := e.Inspect(ctx, "p/detached"); info.Status != flow.StatusWaiting || info.CancelRequested {
		t.Fatalf("detached child after the parent's cancellation: %s (cancel requested %v), want waiting on", info.Status, info.CancelRequested)
	}
	if _, err := flow.Signal(ctx, e, "p/detached", "go", 42, nil); err != nil {
		t.Fatal(err)
	}
	child, err := flow.Lookup(ctx, e, waiter, "p/detached")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := child.Result(ctx); err != nil || out != 42 {
		t.Fatalf("detached child = %d, %v; want it to complete on its own", out, err)
	}
	if d := historyOf(t, e, "p/detached")[0].Detail; !strings.Contains(d, "detached from parent p") {
		t.Errorf("run_started detail %q does not say the child is detached", d)
	}
}

// A parent that fails and compensates cancels its attached children, not
// its detached ones.
func TestDetachedChildOutlivesItsParentsFailure(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	parent := flow.Workflow[int, int]{Name: "failing-parent", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/detached", Detached: true}); err != nil {
			return 0, err
		}
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/attached"}); err != nil {
			return 0, err
		}
		return 0, errors.New("give up")
	}}
	flow.Register(e, waiter)
	flow.Register(e, parent)
	startEngine(t, e)
	ctx := waitCtx(t)
	p, err := flow.Start(ctx, e, parent, 1, &flow.StartOptions{RunID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("parent = %v, want rolled back", err)
	}
	eventually(t, "the attached child cancelled", func() bool {
		info, err := e.Inspect(ctx, "f/attached")
		return err == nil && info.Status == flow.StatusCancelled
	})
	if info, _ := e.Inspect(ctx, "f/detached"); info.Status.Finished() || info.CancelRequested {
		t.Fatalf("detached child after the parent failed: %s (cancel requested %v)", info.Status, info.CancelRequested)
	}
	if err := e.Cancel(ctx, "f/detached"); err != nil {
		t.Fatal(err)
	}
}
