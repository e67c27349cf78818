package flowtest_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A test reads the last progress of a run's steps, per attempt.
func TestProgressReadsARunsSteps(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var bodies atomic.Int64
	export := flow.Step[int, int]{Name: "export", Run: func(ctx context.Context, n int) (int, error) {
		bodies.Add(1)
		for i := 1; i <= n; i++ {
			if err := flow.SetProgress(ctx, flow.Progress{Done: int64(i), Total: int64(n), Message: "rows"}); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "export_progress", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, export, n)
	}}
	env.FailStep("export", 1, nil)
	run := flowtest.Start(env, wf, 50, nil)
	if _, err := flowtest.Await(env, run); err != nil {
		t.Fatal(err)
	}
	got := env.Progress(run.ID())
	if len(got) != 1 || got[0].Step != "export" || got[0].Attempt != 2 || got[0].Done != 50 || got[0].Total != 50 {
		t.Fatalf("Progress = %+v, want attempt 2 of export at 50/50 (the injected failure skipped attempt 1's body)", got)
	}
	if p := env.Inspect(run.ID()).Steps[0].Progress; p == nil || p.Done != 50 {
		t.Fatalf("Inspect's step progress = %+v, want 50", p)
	}

	// The history holds the progress, and a replay of it runs no body:
	// progress is an effect of the step, not a call of the workflow.
	h, err := env.Engine.ExportHistory(context.Background(), run.ID())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range h.Events {
		if ev.Kind == flow.EventStepProgress {
			n++
		}
	}
	if n == 0 {
		t.Fatal("the exported history holds no step_progress event")
	}
	path := filepath.Join(t.TempDir(), "history.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ran := bodies.Load()
	rep, err := flowtest.ReplayFile(flowtest.New(t, nil), wf, path)
	if err != nil || !rep.Returned || rep.Calls != 1 {
		t.Fatalf("replay of a history with progress: %+v, %v; want a clean replay of one call", rep, err)
	}
	if bodies.Load() != ran {
		t.Fatal("the replay ran the step body")
	}
}
