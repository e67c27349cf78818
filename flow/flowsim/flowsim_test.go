package flowsim_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsim"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// engine opens a started engine on clk.
func engine(t *testing.T, clk *flowsim.Clock, wfs ...flow.Workflow[int, time.Time]) *flow.Engine {
	t.Helper()
	e, err := flowsqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sim.db"), &flow.Config{Clock: clk, PollInterval: 20 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	for _, wf := range wfs {
		flow.Register(e, wf)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e
}

// sleeper sleeps n hours, then returns the simulated time it woke at.
var sleeper = flow.Workflow[int, time.Time]{Name: "sleeper", Run: func(wc flow.Context, hours int) (time.Time, error) {
	if err := flow.Sleep(wc, time.Duration(hours)*time.Hour); err != nil {
		return time.Time{}, err
	}
	return flow.Now(wc)
}}

func simCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Run jumps from due time to due time until every run finished, and each
// run wakes exactly when it is due.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx := simCtx(t)
	clk := flowsim.New(start)
	e := engine(t, clk, sleeper)
	var runs []*flow.Run[time.Time]
	for _, h := range []int{48, 1, 5} {
		r, err := flow.Start(ctx, e, sleeper, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if err := clk.Run(ctx, e); err != nil {
		t.Fatal(err)
	}
	for i, h := range []int{48, 1, 5} {
		woke, err := runs[i].Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := start.Add(time.Duration(h) * time.Hour); !woke.Equal(want) {
			t.Errorf("run sleeping %dh woke at %v, want %v", h, woke, want)
		}
	}
	if clk.Elapsed() != 48*time.Hour {
		t.Errorf("elapsed %s, want 48h: the clock goes no further than the last due time", clk.Elapsed())
	}
}

// AdvanceTo stops at every due time on the way to its target.
func TestAdvanceTo(t *testing.T) {
	t.Parallel()
	ctx := simCtx(t)
	clk := flowsim.New(start)
	e := engine(t, clk, sleeper)
	r, err := flow.Start(ctx, e, sleeper, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := clk.AdvanceTo(ctx, e, start.Add(5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if clk.Elapsed() != 5*time.Hour {
		t.Errorf("elapsed %s, want 5h", clk.Elapsed())
	}
	woke, err := r.Result(ctx)
	if err != nil || !woke.Equal(start.Add(time.Hour)) {
		t.Errorf("woke at %v, %v; want the 1h due time, not the target", woke, err)
	}
}

// Runs that wait for no time stop Run with ErrStuck instead of hanging.
func TestRunStuck(t *testing.T) {
	t.Parallel()
	ctx := simCtx(t)
	listener := flow.Workflow[int, time.Time]{Name: "listener", Run: func(wc flow.Context, _ int) (time.Time, error) {
		_, err := flow.Receive[string](wc, "never-sent", 0)
		return time.Time{}, err
	}}
	clk := flowsim.New(start)
	e := engine(t, clk, listener)
	if _, err := flow.Start(ctx, e, listener, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := clk.Run(ctx, e); !errors.Is(err, flowsim.ErrStuck) {
		t.Errorf("Run: %v, want ErrStuck", err)
	}
	if clk.Elapsed() != 0 {
		t.Errorf("elapsed %s, want 0: nothing was due", clk.Elapsed())
	}
}
