package flowtest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A test reads what a run wrote to a stream, from its body and its steps,
// in order.
func TestStreamReadsARunsStream(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	lines := flow.Step[int, int]{Name: "emit_lines", Run: func(ctx context.Context, n int) (int, error) {
		for i := 1; i <= n; i++ {
			if err := flow.WriteStreamCtx(ctx, "log", fmt.Sprintf("line %d", i)); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "export_log", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.WriteStream(wc, "log", "begin"); err != nil {
			return 0, err
		}
		return flow.Do(wc, lines, n)
	}}
	run := flowtest.Start(env, wf, 2, nil)
	if _, err := flowtest.Await(env, run); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(flowtest.Stream[string](env, run.ID(), "log"))
	if got != "[begin line 1 line 2]" {
		t.Fatalf("Stream = %s, want [begin line 1 line 2]", got)
	}
	if got := flowtest.Stream[string](env, run.ID(), "none"); len(got) != 0 {
		t.Fatalf("Stream of an unwritten stream = %v, want none", got)
	}
}

// A recorded history with stream writes of the body and of a step replays
// cleanly: the writes are recorded calls, and a replay writes nothing.
func TestReplayFileOfARunThatWroteStreams(t *testing.T) {
	t.Parallel()
	lines := flow.Step[int, int]{Name: "emit", Run: func(ctx context.Context, n int) (int, error) {
		return n, flow.WriteStreamCtx(ctx, "log", n)
	}}
	wf := flow.Workflow[int, int]{Name: "replayed_log", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.WriteStream(wc, "log", "begin"); err != nil {
			return 0, err
		}
		out, err := flow.Do(wc, lines, n)
		if err != nil {
			return 0, err
		}
		return out, flow.CloseStream(wc, "log")
	}}
	env := flowtest.New(t, nil)
	run := flowtest.Start(env, wf, 4, nil)
	if _, err := flowtest.Await(env, run); err != nil {
		t.Fatal(err)
	}
	h, err := env.Engine.ExportHistory(context.Background(), run.ID())
	if err != nil {
		t.Fatal(err)
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
	replayEnv := flowtest.New(t, nil)
	rep, err := flowtest.ReplayFile(replayEnv, wf, path)
	if err != nil || !rep.Returned || rep.Calls != 3 {
		t.Fatalf("replay: %+v, %v; want 3 calls and a body that returned", rep, err)
	}
	runs, err := replayEnv.Engine.ListRuns(context.Background(), flow.RunFilter{})
	if err != nil || len(runs) != 0 {
		t.Fatalf("replay recorded runs %v (%v), want none", runs, err)
	}
}
