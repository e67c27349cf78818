package flow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// reuseChild doubles its input, and fails for good on a negative one.
var reuseChild = flow.Workflow[int, int]{Name: "reuse-child", Run: func(wc flow.Context, n int) (int, error) {
	return flow.Do(wc, flow.Step[int, int]{Name: "double", Run: func(_ context.Context, n int) (int, error) {
		if n < 0 {
			return 0, flow.Permanent(errors.New("negative"))
		}
		return 2 * n, nil
	}}, n)
}}

// reuseParent starts a child under one ID for each input in turn, with
// the policy policy, and collects the outputs, or the error of the first
// start that fails.
func reuseParent(policy flow.IDReusePolicy) flow.Workflow[[]int, []string] {
	return flow.Workflow[[]int, []string]{Name: "reuse-parent-" + policy.String(), Run: func(wc flow.Context, ns []int) ([]string, error) {
		var out []string
		for _, n := range ns {
			c, err := flow.StartChild(wc, reuseChild, n, &flow.ChildOptions{RunID: wc.RunID() + "/the-child", IDReuse: policy})
			if err != nil {
				return append(out, "start: "+err.Error()), nil
			}
			v, err := c.Result(wc)
			if err != nil {
				out = append(out, "failed")
				continue
			}
			out = append(out, strings.Repeat("x", v))
		}
		return out, nil
	}}
}

// Under ReuseFinished a parent starts a child again under the ID of its
// finished child, as go-workflows allows; under the default the second
// start fails with ErrRunExists, as before; under ReuseFailed only a
// failed (or cancelled) child gives its ID up.
func TestChildIDReuse(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, reuseChild)
	for _, p := range []flow.IDReusePolicy{flow.ReuseNever, flow.ReuseFinished, flow.ReuseFailed} {
		flow.Register(e, reuseParent(p))
	}
	startEngine(t, e)
	ctx := waitCtx(t)
	for _, tc := range []struct {
		policy flow.IDReusePolicy
		in     []int
		want   []string // outputs; "start: …" is a refused start's error
	}{
		{flow.ReuseFinished, []int{1, 2, -1, 3}, []string{"xx", "xxxx", "failed", "xxxxxx"}},
		{flow.ReuseNever, []int{1, 2}, []string{"xx", "start: "}},
		{flow.ReuseFailed, []int{-1, 2, 3}, []string{"failed", "xxxx", "start: "}},
	} {
		run, err := flow.Start(ctx, e, reuseParent(tc.policy), tc.in, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := run.Result(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.policy, err)
		}
		if len(out) != len(tc.want) {
			t.Fatalf("%s: outputs %q, want %q", tc.policy, out, tc.want)
		}
		for i := range out {
			if out[i] != tc.want[i] && !(strings.HasPrefix(tc.want[i], "start: ") && strings.Contains(out[i], "run ID") && strings.Contains(out[i], "taken")) {
				t.Errorf("%s: output %d = %q, want %q", tc.policy, i, out[i], tc.want[i])
			}
		}
		child, err := e.Inspect(ctx, run.ID()+"/the-child")
		if err != nil {
			t.Fatal(err)
		}
		// The ID names the last child the policy let start.
		if tc.policy == flow.ReuseFinished && string(child.Input) != "3" {
			t.Errorf("%s: the child under the ID has input %s, want the last one, 3", tc.policy, child.Input)
		}
		if tc.policy == flow.ReuseFinished {
			detail := historyOf(t, e, child.ID)[0].Detail
			if !strings.Contains(detail, "reusing the ID of a failed run of reuse-child version 1 (deleted)") {
				t.Errorf("the reusing child's run_started says %q", detail)
			}
		}
	}
}

// A top-level Start under ReuseFinished starts again a run whose ID
// finished; the default returns the finished run; an unfinished holder,
// and a finished child of an unfinished parent, are never replaced.
func TestStartIDReuse(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, reuseChild)
	holder := flow.Workflow[int, int]{Name: "holder", Run: func(wc flow.Context, n int) (int, error) {
		c, err := flow.StartChild(wc, reuseChild, n, &flow.ChildOptions{RunID: "held-child"})
		if err != nil {
			return 0, err
		}
		if _, err := c.Result(wc); err != nil {
			return 0, err
		}
		return flow.Receive[int](wc, "go", 0)
	}}
	flow.Register(e, holder)
	startEngine(t, e)
	ctx := waitCtx(t)
	first, err := flow.Start(ctx, e, reuseChild, 1, &flow.StartOptions{RunID: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := first.Result(ctx); err != nil || out != 2 {
		t.Fatalf("first = %d, %v", out, err)
	}
	if again, err := flow.Start(ctx, e, reuseChild, 5, &flow.StartOptions{RunID: "r"}); err != nil || !again.Existing() {
		t.Fatalf("default Start of a finished ID = %v, %v; want the finished run", again, err)
	}
	second, err := flow.Start(ctx, e, reuseChild, 5, &flow.StartOptions{RunID: "r", IDReuse: flow.ReuseFinished})
	if err != nil || second.Existing() {
		t.Fatalf("Start with ReuseFinished = %v, %v; want a new run", second, err)
	}
	if out, err := second.Result(ctx); err != nil || out != 10 {
		t.Fatalf("second = %d, %v; want the new run's output 10", out, err)
	}
	// ReuseFailed keeps a completed run.
	if kept, err := flow.Start(ctx, e, reuseChild, 7, &flow.StartOptions{RunID: "r", IDReuse: flow.ReuseFailed}); err != nil || !kept.Existing() {
		t.Fatalf("Start with ReuseFailed of a completed ID = %v, %v; want the completed run", kept, err)
	}
	// An unfinished holder is never replaced.
	pending, err := flow.Start(ctx, e, reuseChild, 1, &flow.StartOptions{RunID: "p", Queue: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := flow.Start(ctx, e, reuseChild, 2, &flow.StartOptions{RunID: "p", Queue: "nobody", IDReuse: flow.ReuseFinished}); err != nil || !again.Existing() || again.ID() != pending.ID() {
		t.Fatalf("Start with ReuseFinished of a pending ID = %v, %v; want the pending run", again, err)
	}
	// A finished child whose parent may still read it keeps its ID.
	parent, err := flow.Start(ctx, e, holder, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the held child finished", func() bool {
		info, err := e.Inspect(ctx, "held-child")
		return err == nil && info.Status == flow.StatusCompleted
	})
	if again, err := flow.Start(ctx, e, reuseChild, 9, &flow.StartOptions{RunID: "held-child", IDReuse: flow.ReuseFinished}); err != nil || !again.Existing() {
		t.Fatalf("Start with ReuseFinished of a child of an unfinished parent = %v, %v; want the child kept", again, err)
	}
	if _, err := flow.Signal(ctx, e, parent.ID(), "go", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := parent.Result(ctx); err != nil {
		t.Fatal(err)
	}
	// Bad input changes nothing.
	if _, err := flow.Start(ctx, e, reuseChild, 1, &flow.StartOptions{RunID: "r", IDReuse: flow.IDReusePolicy(9)}); err == nil || !strings.Contains(err.Error(), "unknown run ID reuse policy 9") {
		t.Fatalf("Start with policy 9 = %v", err)
	}
	if info, err := e.Inspect(ctx, "r"); err != nil || string(info.Input) != "5" {
		t.Fatalf("run r after the refused start: input %s, %v; want the second run's", info.Input, err)
	}
}
