package flow_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// loopState is the state a counting loop carries from one execution to the
// next.
type loopState struct {
	Count  int `json:"count"`
	Target int `json:"target"`
}

// countingLoop counts to its input's Target with a step per iteration,
// continuing as new every `every` iterations; ticks counts the step bodies
// that ran.
func countingLoop(ticks *atomic.Int64, every int) flow.Workflow[loopState, int] {
	tick := flow.Step[int, int]{Name: "tick", Run: func(_ context.Context, n int) (int, error) {
		ticks.Add(1)
		return n + 1, nil
	}}
	return flow.Workflow[loopState, int]{Name: "counting_loop", Run: func(wc flow.Context, c loopState) (int, error) {
		for range every {
			if c.Count == c.Target {
				return c.Count, nil
			}
			n, err := flow.Do(wc, tick, c.Count)
			if err != nil {
				return 0, err
			}
			c.Count = n
		}
		return 0, flow.ContinueAsNew(wc, c)
	}}
}

// A loop that continues as new every 3 iterations counts to its target
// exactly once per iteration, through 10 executions of one run ID; the
// history limit (5 calls) counts only the current execution, so it never
// suspends the run; the run reports its last execution, whose records are
// the only ones left, and the history has a continued_as_new per execution.
func TestContinueAsNewCarriesStateAcrossExecutions(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.MaxHistoryCalls = 5
	e := openEngine(t, dbPath(t), cfg)
	var ticks atomic.Int64
	wf := countingLoop(&ticks, 3)
	flow.Register(e, wf)
	startEngine(t, e)

	run, err := flow.Start(ctx, e, wf, loopState{Target: 28}, &flow.StartOptions{RunID: "loop"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(ctx)
	if err != nil || out != 28 {
		t.Fatalf("Result = %d, %v; want 28", out, err)
	}
	if got := ticks.Load(); got != 28 {
		t.Errorf("the step ran %d times, want 28 (once per iteration)", got)
	}
	info, err := e.Inspect(ctx, "loop")
	if err != nil {
		t.Fatal(err)
	}
	if info.Execution != 10 || info.ContinuedAt.IsZero() {
		t.Errorf("Execution = %d (continued at %v), want 10", info.Execution, info.ContinuedAt)
	}
	if len(info.Steps) != 1 {
		t.Errorf("the last execution holds %d step records, want 1: %+v", len(info.Steps), info.Steps)
	}
	var continued int
	for _, k := range eventKinds(t, e, "loop") {
		if k == flow.EventContinuedAsNew {
			continued++
		}
	}
	if continued != 9 {
		t.Errorf("%d continued_as_new events, want 9", continued)
	}
	// The exported history holds the last execution, with the events of
	// all: a replay of it returns the recorded output.
	h, err := e.ExportHistory(ctx, "loop")
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := e.Replay(ctx, h); err != nil || !rep.Returned || rep.Calls != 1 {
		t.Errorf("Replay = %+v, %v; want the last execution's one call replayed to its output", rep, err)
	}
}

// Signals sent before the run waits for them stay with the run across
// executions: each execution receives one, and every signal is received
// exactly once.
func TestContinueAsNewKeepsPendingSignals(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), testConfig())
	wf := flow.Workflow[loopState, int]{Name: "signal_sum", Run: func(wc flow.Context, c loopState) (int, error) {
		add, err := flow.Receive[int](wc, "add", 0)
		if err != nil {
			return 0, err
		}
		c.Count += add
		if c.Target--; c.Target == 0 {
			return c.Count, nil
		}
		return 0, flow.ContinueAsNew(wc, c)
	}}
	flow.Register(e, wf)
	run, err := flow.Start(ctx, e, wf, loopState{Target: 5}, &flow.StartOptions{RunID: "sum"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := flow.Signal(ctx, e, "sum", "add", i, nil); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, e)
	out, err := run.Result(ctx)
	if err != nil || out != 15 {
		t.Fatalf("Result = %d, %v; want 15 (1+2+3+4+5, each signal once)", out, err)
	}
	info, err := e.Inspect(ctx, "sum")
	if err != nil || info.Execution != 5 {
		t.Fatalf("Execution = %d, %v; want 5", info.Execution, err)
	}
}

// ContinueAsNew with a value of another type than the workflow's input
// fails the run, saying so, rather than starting an execution that cannot
// decode its input.
func TestContinueAsNewWithAnotherTypeFails(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), testConfig())
	wf := flow.Workflow[int, int]{Name: "wrong_type", Run: func(wc flow.Context, n int) (int, error) {
		return 0, flow.ContinueAsNew(wc, "not an int")
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(ctx)
	if err == nil || !strings.Contains(err.Error(), "continue as new with a string") {
		t.Fatalf("Result = %v, want the run failed for the input's type", err)
	}
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) {
		t.Errorf("Result = %T, want a *flow.RolledBackError", err)
	}
}

// A saga that fails after continuing as new compensates only the steps of
// its last execution: the earlier executions' records are gone.
func TestContinueAsNewCompensatesOnlyTheLastExecution(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), testConfig())
	var undone atomic.Int64
	charge := flow.Step[int, int]{
		Name:       "charge",
		Run:        func(_ context.Context, n int) (int, error) { return n, nil },
		Compensate: func(_ context.Context, n int, _ int) error { undone.Add(1); return nil },
	}
	wf := flow.Workflow[int, int]{Name: "saga_loop", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.Do(wc, charge, n); err != nil {
			return 0, err
		}
		if n < 3 {
			return 0, flow.ContinueAsNew(wc, n+1)
		}
		return 0, errors.New("refused")
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rb *flow.RolledBackError
	if _, err := run.Result(ctx); !errors.As(err, &rb) {
		t.Fatalf("Result = %v, want the run rolled back", err)
	}
	if got := undone.Load(); got != 1 {
		t.Errorf("%d compensations ran, want 1 (the last execution's charge)", got)
	}
}
