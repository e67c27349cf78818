package flow_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// historyLoop is a workflow that makes n calls of step "tick", each with
// an output of pad bytes of padding; ran counts the bodies that ran.
func historyLoop(ran *atomic.Int64, pad int) flow.Workflow[int, int] {
	tick := flow.Step[int, string]{Name: "tick", Run: func(_ context.Context, i int) (string, error) {
		ran.Add(1)
		return strings.Repeat("x", pad), nil
	}}
	return flow.Workflow[int, int]{Name: "history_loop", Run: func(wc flow.Context, n int) (int, error) {
		for i := range n {
			if _, err := flow.Do(wc, tick, i); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
}

// A run whose history reaches Config.MaxHistoryCalls is suspended before
// the call past the limit, with a reason naming the run, the count, the
// limit and the remedy; a warning is logged once on the way; an engine
// with a higher limit resumes it to the end, and no step ran twice.
func TestHistoryCallLimitSuspendsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	logs := &syncBuffer{}
	cfg := testConfig()
	cfg.MaxHistoryCalls = 10
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	var ran atomic.Int64
	wf := historyLoop(&ran, 1)

	e1 := openEngine(t, path, cfg)
	flow.Register(e1, wf)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, wf, 15, &flow.StartOptions{RunID: "endless"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(ctx)
	var suspended *flow.SuspendedError
	if !errors.As(err, &suspended) {
		t.Fatalf("Result = %v, want the run suspended", err)
	}
	for _, want := range []string{"run endless", "10 calls", "Config.MaxHistoryCalls", "is 10", "child workflows"} {
		if !strings.Contains(suspended.Reason, want) {
			t.Errorf("reason %q does not say %q", suspended.Reason, want)
		}
	}
	if n := ran.Load(); n != 10 {
		t.Errorf("%d step bodies ran, want 10 (the limit)", n)
	}
	info, err := e1.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusSuspended || len(info.Steps) != 10 {
		t.Errorf("run is %s with %d records, want suspended with 10", info.Status, len(info.Steps))
	}
	if n := logs.count("run history nears its limit"); n != 1 {
		t.Errorf("logged the warning %d times, want once (at 8 of 10 calls):\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "calls=8") {
		t.Errorf("the warning does not come at 8 calls:\n%s", logs)
	}
	if err := e1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e1.Close()

	raised := testConfig()
	raised.MaxHistoryCalls = 100
	e2 := openEngine(t, path, raised)
	flow.Register(e2, wf)
	startEngine(t, e2)
	if err := e2.Resume(ctx, run.ID()); err != nil {
		t.Fatal(err)
	}
	handle, err := flow.Lookup(ctx, e2, wf, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := handle.Result(ctx); err != nil || out != 15 {
		t.Fatalf("after raising the limit: %d, %v; want 15", out, err)
	}
	if n := ran.Load(); n != 15 {
		t.Errorf("%d step bodies ran in all, want 15", n)
	}
}

// Config.MaxHistoryBytes counts the recorded inputs and outputs.
func TestHistoryByteLimitSuspendsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.MaxHistoryBytes = 4 << 10
	e := openEngine(t, dbPath(t), cfg)
	var ran atomic.Int64
	wf := historyLoop(&ran, 1000) // each record: an input of 1 byte, an output of 1002
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(ctx)
	var suspended *flow.SuspendedError
	if !errors.As(err, &suspended) {
		t.Fatalf("Result = %v, want the run suspended", err)
	}
	for _, want := range []string{"bytes", "Config.MaxHistoryBytes", fmt.Sprint(4 << 10)} {
		if !strings.Contains(suspended.Reason, want) {
			t.Errorf("reason %q does not say %q", suspended.Reason, want)
		}
	}
	// Four records hold 4012 bytes, under 4096: the fifth call is admitted
	// and passes the limit; the sixth is refused.
	if n := ran.Load(); n != 5 {
		t.Errorf("%d step bodies ran, want 5", n)
	}
}
