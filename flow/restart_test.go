package flow_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// A run waiting for a signal while no engine works the database can be
// signalled, cancelled, or pass its deadline; the next engine acts on it.
func TestWaitingRunActedOnWhileNoEngineRuns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		opts     *flow.StartOptions
		between  func(ctx context.Context, e *flow.Engine, clk *clock.Manual, runID string) error
		wantOut  string
		wantErr  error
		wantUndo []string
	}{
		{
			name: "signal",
			between: func(ctx context.Context, e *flow.Engine, _ *clock.Manual, runID string) error {
				_, err := flow.Signal(ctx, e, runID, "go", "+signal", nil)
				return err
			},
			wantOut: "in+reserve+signal+after",
		},
		{
			name: "cancel",
			between: func(ctx context.Context, e *flow.Engine, _ *clock.Manual, runID string) error {
				return e.Cancel(ctx, runID)
			},
			wantErr: flow.ErrCancelled, wantUndo: []string{"reserve"},
		},
		{
			name: "deadline",
			opts: &flow.StartOptions{Deadline: epoch.Add(time.Hour)},
			between: func(_ context.Context, _ *flow.Engine, clk *clock.Manual, _ string) error {
				clk.Advance(2 * time.Hour)
				return nil
			},
			wantErr: flow.ErrCancelled, wantUndo: []string{"reserve"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := waitCtx(t)
			path := dbPath(t)
			clk := clock.NewManual(epoch)
			var c counter
			var u undoLog
			reserve, after := compensable(&c, &u, "reserve"), countedStep(&c, "after")
			wf := flow.Workflow[string, string]{Name: "wait-across-restart", Run: func(wc flow.Context, in string) (string, error) {
				s, err := flow.Do(wc, reserve, in)
				if err != nil {
					return "", err
				}
				v, err := flow.Receive[string](wc, "go", 0)
				if err != nil {
					return "", err
				}
				return flow.Do(wc, after, s+v)
			}}
			register := func(e *flow.Engine) { flow.Register(e, wf) }
			e1, close1 := engineSession(t, path, manualConfig(clk), register)
			run, err := flow.Start(ctx, e1, wf, "in", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			awaitStatus(t, e1, run.ID(), flow.StatusWaiting)
			close1()

			e2 := openEngine(t, path, manualConfig(clk))
			register(e2)
			if err := tc.between(ctx, e2, clk, run.ID()); err != nil {
				t.Fatal(err)
			}
			startEngine(t, e2)
			out, err := handle(t, e2, wf, run.ID()).Result(ctx)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("result err = %v, want %v", err, tc.wantErr)
				}
			} else if err != nil || out != tc.wantOut {
				t.Fatalf("result = %q, %v; want %q", out, err, tc.wantOut)
			}
			if got := u.list(); !slices.Equal(got, tc.wantUndo) {
				t.Fatalf("compensated %v, want %v", got, tc.wantUndo)
			}
			if c.get("reserve") != 1 {
				t.Fatalf("reserve ran %d times, want 1", c.get("reserve"))
			}
		})
	}
}

// greeter returns version v of a workflow whose versions call different
// steps, then wait for a signal.
func greeter(v int, c *counter) flow.Workflow[string, string] {
	steps := map[int]flow.Step[string, string]{1: countedStep(c, "greet-v1"), 2: countedStep(c, "greet-v2")}
	return flow.Workflow[string, string]{Name: "greeter", Version: v, Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, steps[v], in)
		if err != nil {
			return "", err
		}
		name, err := flow.Receive[string](wc, "name", 0)
		return s + " " + name, err
	}}
}

// Two versions of a workflow live side by side: a run finishes on the
// version it started with even after a newer one is registered, new runs
// started with the newer value take it, and an engine that lacks a run's
// version leaves the run alone and reports it through Waiting.
func TestRunsFinishOnTheVersionTheyStartedWith(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var c counter
	v1, v2 := greeter(1, &c), greeter(2, &c)

	// An engine that knows only v1 starts a run, which waits for a signal.
	e1, close1 := engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, v1) })
	old, err := flow.Start(ctx, e1, v1, "old", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e1, old.ID(), flow.StatusWaiting)
	close1()

	// An engine that knows only v2 runs new runs and leaves the v1 run alone,
	// even once a signal made it due.
	e2, close2 := engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, v2) })
	if _, err := flow.Signal(ctx, e2, old.ID(), "name", "ada", nil); err != nil {
		t.Fatal(err)
	}
	fresh, err := flow.Start(ctx, e2, v2, "fresh", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e2, fresh.ID(), "name", "bob", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := fresh.Result(ctx); err != nil || out != "fresh+greet-v2 bob" {
		t.Fatalf("v2 run: %q, %v", out, err)
	}
	if _, err := flow.Start(ctx, e2, v1, "refused", nil); !errors.Is(err, flow.ErrUnknownWorkflow) {
		t.Fatalf("start v1 on an engine without it: %v, want ErrUnknownWorkflow", err)
	}
	waiting, err := e2.Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waiting, []flow.WaitingWorkflow{{Workflow: "greeter", Version: 1, Runs: 1}}) {
		t.Fatalf("waiting = %+v, want the v1 run", waiting)
	}
	if info := inspect(t, e2, old.ID()); info.Status != flow.StatusWaiting || info.Version != 1 {
		t.Fatalf("v1 run is %s on version %d, want waiting on 1", info.Status, info.Version)
	}
	if n := countKind(t, e2, old.ID(), flow.EventRunClaimed); n != 1 {
		t.Fatalf("v1 run claimed %d times, want only by the v1 engine", n)
	}
	close2()

	// An engine with both finishes the v1 run on v1.
	e3, _ := engineSession(t, path, nil, func(e *flow.Engine) {
		flow.Register(e, v1)
		flow.Register(e, v2)
	})
	if out, err := handle(t, e3, v1, old.ID()).Result(ctx); err != nil || out != "old+greet-v1 ada" {
		t.Fatalf("v1 run: %q, %v", out, err)
	}
	newer, err := flow.Start(ctx, e3, v2, "newer", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e3, newer.ID(), "name", "cy", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := newer.Result(ctx); err != nil || out != "newer+greet-v2 cy" {
		t.Fatalf("second v2 run: %q, %v", out, err)
	}
	if info := inspect(t, e3, newer.ID()); info.Version != 2 {
		t.Fatalf("run started with the v2 value is on version %d", info.Version)
	}
	if c.get("greet-v1") != 1 || c.get("greet-v2") != 2 {
		t.Fatalf("greet-v1 ran %d, greet-v2 %d times; want 1 and 2", c.get("greet-v1"), c.get("greet-v2"))
	}
	if waiting, err := e3.Waiting(ctx); err != nil || len(waiting) != 0 {
		t.Fatalf("waiting = %+v, %v; want none", waiting, err)
	}
}
