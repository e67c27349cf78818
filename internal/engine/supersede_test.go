package engine

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// supersedeEngine returns an engine of cfg on a SQLite file of the test's,
// and a raw connection to the file, which plays the lost claim.
func supersedeEngine(t *testing.T, cfg Config) (*Engine, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "engine.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	raw, err := sql.Open("sqlite", sqlitestore.DSN(path, sqlitestore.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	e, err := New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, raw
}

// A database that loses a claim (a failover to an asynchronous standby that
// had not received it) makes the run ready again while the engine that
// claimed it still executes it, and that engine may claim it again with
// the same fence and owner, which every fenced write accepts. The engine
// must end its earlier execution before it starts the new one: the step
// body must never run twice at once. The lost claim is played here by
// putting the run's row back as it was before the claim.
func TestReclaimOfARunStillExecutingHereSupersedesIt(t *testing.T) {
	t.Parallel()
	logs := &syncLog{}
	e, raw := supersedeEngine(t, Config{
		PollInterval: 10 * time.Millisecond, WorkerID: "w1",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	var inBody, maxInBody, bodies atomic.Int32
	entered := make(chan struct{}, 10)
	err := e.Register(Workflow{Key: jobKey, Run: func(rc *RunContext, _ []byte) ([]byte, error) {
		return rc.Step(Step{Name: "work", Input: []byte(`{}`), Run: func(ctx context.Context, _ *sql.Tx) ([]byte, error) {
			n := inBody.Add(1)
			defer inBody.Add(-1)
			for m := maxInBody.Load(); n > m && !maxInBody.CompareAndSwap(m, n); m = maxInBody.Load() {
			}
			first := bodies.Add(1) == 1
			entered <- struct{}{}
			if first {
				<-ctx.Done() // works until its execution ends
				return nil, context.Cause(ctx)
			}
			time.Sleep(50 * time.Millisecond)
			return []byte(`"done"`), nil
		}})
	}})
	if err != nil {
		t.Fatal(err)
	}
	startTestEngine(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := e.StartRun(ctx, StartParams{ID: "r", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	<-entered
	// The claim is lost: the row is ready again, one fence back.
	if _, err := raw.ExecContext(ctx, `UPDATE flowlite_runs SET status = 'pending', lease_owner = NULL,
		lease_expires_at = NULL, fence = fence - 1, run_at = 0 WHERE id = 'r'`); err != nil {
		t.Fatal(err)
	}
	e.Wake(DefaultQueue)
	run, err := e.Wait(ctx, "r")
	if err != nil || run.Status != flowtype.StatusCompleted {
		t.Fatalf("Wait = %s, %v; want completed", run.Status, err)
	}
	if n := maxInBody.Load(); n != 1 {
		t.Errorf("%d step bodies ran at once, want 1", n)
	}
	if logs.count("ending the earlier execution first") != 1 {
		t.Errorf("no warning of the superseded execution; logs:\n%s", logs)
	}
}

// A superseded execution whose body ignores its end and returns anyway
// must record nothing: its step's checkpoint and the run's outcome ride in
// the batched outcome write, which the database would take (same fence and
// owner). The run ends with what the newer execution recorded.
func TestSupersededExecutionRecordsNothing(t *testing.T) {
	t.Parallel()
	e, raw := supersedeEngine(t, Config{PollInterval: 10 * time.Millisecond, WorkerID: "w1", Logger: slog.New(slog.DiscardHandler)})
	var bodies atomic.Int32
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	err := e.Register(Workflow{Key: jobKey, Run: func(rc *RunContext, _ []byte) ([]byte, error) {
		out, err := rc.Step(Step{Name: "work", Input: []byte(`{}`), Run: func(context.Context, *sql.Tx) ([]byte, error) {
			return []byte(`"checkpointed"`), nil
		}})
		if err != nil {
			return nil, err
		}
		entered <- struct{}{}
		if bodies.Add(1) == 1 {
			<-release // a body that blocks, and returns after it was superseded
			return []byte(`"stale"`), nil
		}
		return out, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	startTestEngine(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := e.StartRun(ctx, StartParams{ID: "r", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	<-entered
	if _, err := raw.ExecContext(ctx, `UPDATE flowlite_runs SET status = 'pending', lease_owner = NULL,
		lease_expires_at = NULL, fence = fence - 1, run_at = 0 WHERE id = 'r'`); err != nil {
		t.Fatal(err)
	}
	// The newer claim supersedes the first execution, which must return
	// before the newer one starts: let its body return now.
	e.Wake(DefaultQueue)
	time.Sleep(50 * time.Millisecond)
	close(release)
	run, err := e.Wait(ctx, "r")
	if err != nil || run.Status != flowtype.StatusCompleted {
		t.Fatalf("Wait = %s, %v; want completed", run.Status, err)
	}
	if string(run.Output) != `"checkpointed"` {
		t.Errorf("run output %s, want the newer execution's \"checkpointed\"", run.Output)
	}
	var completions int
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM flowlite_events WHERE run_id = 'r' AND kind = 'step_completed'`).Scan(&completions); err != nil {
		t.Fatal(err)
	}
	if completions != 1 {
		t.Errorf("%d step_completed events, want 1 (the newer execution's)", completions)
	}
}
