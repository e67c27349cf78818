package flow_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// fastRetry makes retries quick enough for tests.
var fastRetry = flow.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}

func testConfig() *flow.Config {
	return &flow.Config{PollInterval: 10 * time.Millisecond, DefaultRetry: fastRetry}
}

// openEngine opens an engine on path, closing it when the test ends.
func openEngine(t *testing.T, path string, cfg *flow.Config) *flow.Engine {
	t.Helper()
	return openEngineOpts(t, path, cfg, nil)
}

// openEngineOpts is openEngine with SQLite options.
func openEngineOpts(t *testing.T, path string, cfg *flow.Config, opts *flowsqlite.Options) *flow.Engine {
	t.Helper()
	if cfg == nil {
		cfg = testConfig()
	}
	e, err := flowsqlite.Open(context.Background(), path, cfg, opts)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func startEngine(t *testing.T, e *flow.Engine) {
	t.Helper()
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("start engine: %v", err)
	}
}

// runToEnd starts a run of wf with input n on e and waits for its result.
func runToEnd(t *testing.T, ctx context.Context, e *flow.Engine, wf flow.Workflow[int, int], n int) int {
	t.Helper()
	r, err := flow.Start(ctx, e, wf, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "flow.db") }

// rawDB opens the database file for assertions and tampering that the API
// deliberately does not offer.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the test times out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func eventKinds(t *testing.T, e *flow.Engine, runID string) []string {
	t.Helper()
	events, err := e.History(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	kinds := make([]string, len(events))
	for i, ev := range events {
		kinds[i] = ev.Kind
	}
	return kinds
}
