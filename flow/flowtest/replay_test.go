package flowtest_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowhistory"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// sideEffects counts the step bodies, compensations and RunTx steps that
// ran, so a test can tell that a replay ran none.
type sideEffects struct{ bodies, txs atomic.Int64 }

// replayWorkflow is an order saga with a transactional step, a sleep and a
// signal. calls names its step calls in order: each variant of a test
// changes them.
func replayWorkflow(fx *sideEffects, calls ...string) flow.Workflow[int, int] {
	step := func(name string) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name,
			Run: func(_ context.Context, n int) (int, error) {
				fx.bodies.Add(1)
				return n + len(name), nil
			},
			Compensate: func(context.Context, int, int) error { fx.bodies.Add(1); return nil },
		}
	}
	ledger := flow.Step[int, int]{Name: "ledger", RunTx: func(_ context.Context, _ *sql.Tx, n int) (int, error) {
		fx.txs.Add(1)
		return n * 10, nil
	}}
	return flow.Workflow[int, int]{Name: "replayed_order", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		for _, c := range calls {
			var err error
			switch c {
			case "ledger":
				n, err = flow.Do(wc, ledger, n)
			case "sleep":
				err = flow.Sleep(wc, time.Hour)
			case "receive":
				var d int
				d, err = flow.Receive[int](wc, "approve", 0)
				n += d
			default:
				n, err = flow.Do(wc, step(c), n)
			}
			if err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
}

var recordedCalls = []string{"reserve", "ledger", "sleep", "charge", "ship"}

// recordHistory runs the recorded version of the workflow to the end and
// exports its history through a file, as flowlite history --export does.
func recordHistory(t *testing.T) (*flowhistory.History, string) {
	t.Helper()
	env := flowtest.New(t, nil)
	fx := &sideEffects{}
	out, run, err := flowtest.RunWorkflow(env, replayWorkflow(fx, recordedCalls...), 1)
	if err != nil || out != (1+7)*10+6+4 {
		t.Fatalf("recorded run: %d, %v", out, err)
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
	return h, path
}

// replay replays the history file against a variant of the workflow, in an
// Env of its own, and checks that no step body, compensation or RunTx ran
// and that the Env's database recorded nothing.
func replay(t *testing.T, path string, calls ...string) (flow.ReplayReport, error) {
	t.Helper()
	env := flowtest.New(t, nil)
	fx := &sideEffects{}
	rep, err := flowtest.ReplayFile(env, replayWorkflow(fx, calls...), path)
	if fx.bodies.Load() != 0 || fx.txs.Load() != 0 {
		t.Errorf("replay of %v ran %d step bodies and %d RunTx steps, want none", calls, fx.bodies.Load(), fx.txs.Load())
	}
	runs, lerr := env.Engine.ListRuns(context.Background(), flow.RunFilter{})
	if lerr != nil || len(runs) != 0 {
		t.Errorf("replay of %v recorded runs %v (%v), want none", calls, runs, lerr)
	}
	return rep, err
}

func TestReplayOfTheSameCodeIsClean(t *testing.T) {
	t.Parallel()
	h, path := recordHistory(t)
	rep, err := replay(t, path, recordedCalls...)
	if err != nil {
		t.Fatalf("replay against the recording code: %v", err)
	}
	if !rep.Returned || rep.Calls != len(recordedCalls) || rep.RunID != h.Run.ID {
		t.Errorf("report %+v, want %d calls and a body that returned", rep, len(recordedCalls))
	}
}

func TestReplayDivergences(t *testing.T) {
	t.Parallel()
	_, path := recordHistory(t)
	for _, tt := range []struct {
		name     string
		calls    []string
		position int
		recorded string
		replayed string
	}{
		{"calls another step", []string{"reserve", "ledger", "sleep", "refund", "ship"}, 3, `step "charge"`, `step "refund"`},
		{"skips a call", []string{"reserve", "ledger", "sleep", "ship"}, 3, `step "charge"`, `step "ship"`},
		{"skips the last call", []string{"reserve", "ledger", "sleep", "charge"}, 4, `step "ship"`, ""},
		{"changes the order", []string{"reserve", "sleep", "ledger", "charge", "ship"}, 1, `step "ledger"`, "sleep"},
		{"adds a call at the end", []string{"reserve", "ledger", "sleep", "charge", "ship", "notify"}, 5, "no call", `step "notify"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := replay(t, path, tt.calls...)
			var nd *flow.NonDeterminismError
			if !errors.As(err, &nd) {
				t.Fatalf("replay: %v, want a *flow.NonDeterminismError", err)
			}
			if nd.Position != tt.position || !strings.Contains(nd.Recorded, tt.recorded) || nd.Replayed != tt.replayed {
				t.Errorf("divergence at %d: recorded %q, replayed %q; want %d, %q, %q", nd.Position, nd.Recorded, nd.Replayed,
					tt.position, tt.recorded, tt.replayed)
			}
			if want := "call " + string(rune('1'+tt.position)); !strings.Contains(err.Error(), want) {
				t.Errorf("message %q does not name %s", err, want)
			}
		})
	}
}

// A body that makes every recorded call but returns something else
// diverges too.
func TestReplayOfAnotherOutputFails(t *testing.T) {
	t.Parallel()
	h, _ := recordHistory(t)
	env := flowtest.New(t, nil)
	fx := &sideEffects{}
	wf := replayWorkflow(fx, recordedCalls...)
	inner := wf.Run
	wf.Run = func(wc flow.Context, n int) (int, error) {
		out, err := inner(wc, n)
		return out + 1, err
	}
	_, err := flowtest.Replay(env, wf, h)
	var oe *flow.ReplayOutcomeError
	if !errors.As(err, &oe) || oe.Recorded != "output 90" || oe.Replayed != "output 91" {
		t.Fatalf("replay: %v, want a *flow.ReplayOutcomeError from output 90 to 91", err)
	}
}

// A run exported while it waits replays up to its open wait, which is where
// the run stands, not a divergence.
func TestReplayOfAWaitingRunStopsAtItsOpenWait(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	fx := &sideEffects{}
	calls := []string{"reserve", "receive", "ship"}
	run := flowtest.Start(env, replayWorkflow(fx, calls...), 1, nil)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for env.Inspect(run.ID()).Status != flow.StatusWaiting {
		if time.Now().After(deadline) {
			t.Fatalf("run never waited: %+v", env.Inspect(run.ID()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	h, err := env.Engine.ExportHistory(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	env2 := flowtest.New(t, nil)
	fx2 := &sideEffects{}
	rep, err := flowtest.Replay(env2, replayWorkflow(fx2, calls...), h)
	if err != nil || rep.Returned || rep.Frontier != `receive of signal "approve"` {
		t.Fatalf("replay of a waiting run: %+v, %v; want it stopped at the receive", rep, err)
	}
	if fx2.bodies.Load() != 0 {
		t.Errorf("replay ran %d step bodies", fx2.bodies.Load())
	}
	// Code that calls another step before the wait diverges all the same.
	env3 := flowtest.New(t, nil)
	_, err = flowtest.Replay(env3, replayWorkflow(&sideEffects{}, "hold", "receive", "ship"), h)
	var nd *flow.NonDeterminismError
	if !errors.As(err, &nd) || nd.Position != 0 {
		t.Fatalf("replay with another first step: %v, want a divergence at call 1", err)
	}
}

func TestReplayFileRefusesBadFiles(t *testing.T) {
	t.Parallel()
	h, path := recordHistory(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tt := range []struct{ name, content, want string }{
		{"not json", "{oops", "not a JSON object"},
		{"another format", `{"format": "temporal", "version": 1}`, `format "temporal", want "flowlite-history"`},
		{"no version", `{"format": "flowlite-history"}`, `no "version" field`},
		{"newer version", strings.Replace(string(good), `"version": 1,`, `"version": 2,`, 1), "format version 2 is not supported (this flowlite reads version 1)"},
		{"no run id", strings.Replace(string(good), `"id": "`+h.Run.ID+`"`, `"id": ""`, 1), "run.id is empty"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
		if err := os.WriteFile(file, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		env := flowtest.New(t, nil)
		_, err := flowtest.ReplayFile(env, replayWorkflow(&sideEffects{}, recordedCalls...), file)
		if !errors.Is(err, flowhistory.ErrFormat) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: %v, want flowhistory.ErrFormat naming the file and saying %q", tt.name, err, tt.want)
		}
	}
	env := flowtest.New(t, nil)
	other := replayWorkflow(&sideEffects{}, recordedCalls...)
	other.Version = 2
	if _, err := flowtest.ReplayFile(env, other, path); err == nil || !strings.Contains(err.Error(), "version 1, not replayed_order version 2") {
		t.Errorf("replay against version 2: %v, want an error naming both versions", err)
	}
}

// Branches of All and First and child workflows replay from their records
// too, and a branch that calls another step diverges naming its branch.
func TestReplayOfBranchesAndChildren(t *testing.T) {
	t.Parallel()
	fx := &sideEffects{}
	step := func(name string) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name, Run: func(_ context.Context, n int) (int, error) {
			fx.bodies.Add(1)
			return n + 1, nil
		}}
	}
	child := flow.Workflow[int, int]{Name: "replayed_child", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, step("inner"), n)
	}}
	build := func(second string) flow.Workflow[int, int] {
		return flow.Workflow[int, int]{Name: "replayed_branches", Run: func(wc flow.Context, n int) (int, error) {
			ns, err := flow.All(wc,
				func(wc flow.Context) (int, error) { return flow.Do(wc, step("left"), n) },
				func(wc flow.Context) (int, error) { return flow.Do(wc, step(second), n) })
			if err != nil {
				return 0, err
			}
			won, _, err := flow.First(wc, func(wc flow.Context) (int, error) { return flow.Do(wc, step("fast"), ns[0]) })
			if err != nil {
				return 0, err
			}
			return flow.Call(wc, child, won+ns[1], nil)
		}}
	}
	env := flowtest.New(t, nil)
	wf := build("right")
	flowtest.Register(env, child) // the child run executes in the recording Env only
	out, run, err := flowtest.RunWorkflow(env, wf, 1)
	if err != nil || out != 6 {
		t.Fatalf("recorded run: %d, %v", out, err)
	}
	h, err := env.Engine.ExportHistory(context.Background(), run.ID())
	if err != nil {
		t.Fatal(err)
	}
	fx.bodies.Store(0)
	if rep, err := flowtest.Replay(flowtest.New(t, nil), build("right"), h); err != nil || !rep.Returned {
		t.Fatalf("replay against the same code: %+v, %v", rep, err)
	}
	_, err = flowtest.Replay(flowtest.New(t, nil), build("wrong"), h)
	var nd *flow.NonDeterminismError
	if !errors.As(err, &nd) || nd.Branch != "all0.1" || nd.Position != 0 || nd.Recorded != `step "right"` {
		t.Fatalf("replay with another step in a branch: %v, want a divergence in branch all0.1", err)
	}
	if n := fx.bodies.Load(); n != 0 {
		t.Errorf("the replays ran %d step bodies, want none", n)
	}
}
