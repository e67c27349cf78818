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

type quote struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type priced struct {
	SKU   string `json:"sku"`
	Cents int    `json:"cents"`
}

var priceStep = flow.Step[quote, priced]{Name: "price", Run: func(_ context.Context, q quote) (priced, error) {
	return priced{SKU: q.SKU, Cents: q.Qty * 250}, nil
}}

var pricer = flow.Workflow[quote, priced]{Name: "pricer", Run: func(wc flow.Context, q quote) (priced, error) {
	return flow.Do(wc, priceStep, q)
}}

// A child's typed result reaches its parent, through StartChild and
// Child.Result or through Call; the child records its parent.
func TestChildResultIsTyped(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	parent := flow.Workflow[[]quote, []priced]{Name: "order-pricer", Run: func(wc flow.Context, qs []quote) ([]priced, error) {
		var children []*flow.Child[priced]
		for _, q := range qs[1:] {
			c, err := flow.StartChild(wc, pricer, q, nil)
			if err != nil {
				return nil, err
			}
			children = append(children, c)
		}
		first, err := flow.Call(wc, pricer, qs[0], &flow.ChildOptions{RunID: wc.RunID() + "/first"})
		if err != nil {
			return nil, err
		}
		out := []priced{first}
		for _, c := range children {
			p, err := c.Result(wc)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}}
	flow.Register(e, pricer)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, []quote{{"a", 1}, {"b", 2}, {"c", 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run.Result(ctx)
	want := []priced{{"a", 250}, {"b", 500}, {"c", 750}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("result = %+v, %v; want %+v", got, err, want)
	}
	children, err := e.ListRuns(ctx, flow.RunFilter{Workflow: "pricer"})
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 3 {
		t.Fatalf("%d child runs, want 3", len(children))
	}
	for _, c := range children {
		if c.ParentID != run.ID() || c.Status != flow.StatusCompleted {
			t.Fatalf("child %s: parent %q, status %s", c.ID, c.ParentID, c.Status)
		}
	}
	if _, err := e.Inspect(ctx, run.ID()+"/first"); err != nil {
		t.Fatalf("child with the chosen run ID: %v", err)
	}
	for kind, want := range map[string]int{flow.EventChildStarted: 3, flow.EventChildFinished: 3} {
		if n := countKind(t, e, run.ID(), kind); n != want {
			t.Fatalf("%d %s events, want %d", n, kind, want)
		}
	}
}

// A child that fails is compensated and reaches its parent as a
// *flow.ChildError matching ErrRolledBack, which the parent may handle.
func TestChildFailureReachesParentAsChildError(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	var u undoLog
	hold := compensable(&c, &u, "hold")
	charge := flow.Step[string, string]{Name: "charge", Run: func(context.Context, string) (string, error) {
		return "", flow.Permanent(errors.New("card declined"))
	}}
	child := flow.Workflow[string, string]{Name: "payment", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, hold, in)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, charge, s)
	}}
	var mu sync.Mutex
	var seen *flow.ChildError
	parent := flow.Workflow[string, string]{Name: "checkout", Run: func(wc flow.Context, in string) (string, error) {
		out, err := flow.Call(wc, child, in, nil)
		var ce *flow.ChildError
		switch {
		case errors.As(err, &ce) && errors.Is(err, flow.ErrRolledBack):
			mu.Lock()
			seen = ce
			mu.Unlock()
			return "handled: " + string(ce.Status), nil
		case err != nil:
			return "", err
		}
		return out, nil
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, "order", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != "handled: failed" {
		t.Fatalf("result = %q, %v", out, err)
	}
	mu.Lock()
	ce := seen
	mu.Unlock()
	if ce == nil || ce.Status != flow.StatusFailed || !strings.Contains(ce.Cause, "card declined") || errors.Is(ce, flow.ErrCancelled) {
		t.Fatalf("child error = %+v", ce)
	}
	info := inspect(t, e, ce.RunID)
	if info.Status != flow.StatusFailed || info.ParentID != run.ID() {
		t.Fatalf("child %s is %s with parent %q", ce.RunID, info.Status, info.ParentID)
	}
	if got := u.list(); !slices.Equal(got, []string{"hold"}) {
		t.Fatalf("compensated %v, want [hold]", got)
	}
}

// Cancelling a parent while its child runs a step cancels the child: its
// step sees ErrCancelled through its context at once (not at the next
// heartbeat), both runs are compensated and end cancelled.
func TestCancelParentCancelsRunningChild(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.LeaseTimeout = time.Hour // heartbeats far apart: only a direct cancel reaches the step
	e := openEngine(t, dbPath(t), cfg)
	var c counter
	var u undoLog
	h := newHolds()
	childHold, parentHold := compensable(&c, &u, "child-hold"), compensable(&c, &u, "parent-hold")
	child := flow.Workflow[string, string]{Name: "cancel-child", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, childHold, in)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, h.blocking, s)
	}}
	parent := flow.Workflow[string, string]{Name: "cancel-parent", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, parentHold, in)
		if err != nil {
			return "", err
		}
		return flow.Call(wc, child, s, nil)
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, "in", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child's step to run and the parent to wait", func() bool {
		return h.inside.Load() && inspect(t, e, run.ID()).Status == flow.StatusWaiting
	})
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("parent result err = %v, want ErrCancelled", err)
	}
	children, err := e.ListRuns(ctx, flow.RunFilter{Workflow: child.Name})
	if err != nil || len(children) != 1 {
		t.Fatalf("child runs: %v, %v", children, err)
	}
	childRun, err := flow.Lookup(ctx, e, child, children[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := childRun.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("child result err = %v, want ErrCancelled", err)
	}
	if cause := h.cause(); !errors.Is(cause, flow.ErrCancelled) {
		t.Fatalf("child step's context cause = %v, want ErrCancelled", cause)
	}
	for _, id := range []string{run.ID(), childRun.ID()} {
		if st := inspect(t, e, id).Status; st != flow.StatusCancelled {
			t.Fatalf("run %s is %s, want cancelled", id, st)
		}
	}
	got := u.list()
	slices.Sort(got)
	if !slices.Equal(got, []string{"child-hold", "parent-hold"}) {
		t.Fatalf("compensated %v, want child-hold and parent-hold", got)
	}
}

// A parent waiting for its child survives an engine restart, is woken once
// when the child finishes on the next engine, and neither re-runs its steps
// nor starts the child again.
func TestParentWaitingForChildSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var c counter
	before, after := countedStep(&c, "before"), countedStep(&c, "after")
	child := flow.Workflow[string, string]{Name: "slow-child", Run: func(wc flow.Context, in string) (string, error) {
		v, err := flow.Receive[string](wc, "finish", 0)
		return in + "+" + v, err
	}}
	parent := flow.Workflow[string, string]{Name: "patient-parent", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, before, in)
		if err != nil {
			return "", err
		}
		if s, err = flow.Call(wc, child, s, nil); err != nil {
			return "", err
		}
		return flow.Do(wc, after, s)
	}}
	register := func(e *flow.Engine) {
		flow.Register(e, child)
		flow.Register(e, parent)
	}
	e1, close1 := engineSession(t, path, nil, register)
	run, err := flow.Start(ctx, e1, parent, "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	var childID string
	eventually(t, "parent and child to wait", func() bool {
		children, err := e1.ListRuns(ctx, flow.RunFilter{Workflow: child.Name})
		if err != nil || len(children) != 1 || children[0].Status != flow.StatusWaiting {
			return false
		}
		childID = children[0].ID
		return inspect(t, e1, run.ID()).Status == flow.StatusWaiting
	})
	close1()

	e2, _ := engineSession(t, path, nil, register)
	if _, err := flow.Signal(ctx, e2, childID, "finish", "done", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := handle(t, e2, parent, run.ID()).Result(ctx); err != nil || out != "p+before+done+after" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if c.get("before") != 1 || c.get("after") != 1 {
		t.Fatalf("before ran %d, after %d times; want once each", c.get("before"), c.get("after"))
	}
	children, err := e2.ListRuns(ctx, flow.RunFilter{Workflow: child.Name})
	if err != nil || len(children) != 1 {
		t.Fatalf("child runs: %v, %v; want one", children, err)
	}
	for kind, want := range map[string]int{
		flow.EventChildStarted: 1, flow.EventChildWaiting: 1, flow.EventChildFinished: 1,
		// Claimed when started, then once more when the child finished.
		flow.EventRunClaimed: 2,
	} {
		if n := countKind(t, e2, run.ID(), kind); n != want {
			t.Fatalf("parent has %d %s events, want %d: %v", n, kind, want, eventKinds(t, e2, run.ID()))
		}
	}
}
