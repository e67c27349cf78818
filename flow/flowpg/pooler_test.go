package flowpg_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// behindTransactionPooler returns a fresh schema's DSN through the
// transaction pooler of the environment (FLOWLITE_PG_POOLER=transaction,
// FLOWLITE_PG_DSN its address, FLOWLITE_PG_DIRECT_DSN the server's), the
// same database reached directly, and the schema; it skips the test in
// any other environment: `.ci/run` starts a PgBouncer for it.
func behindTransactionPooler(t *testing.T) (pooled, direct, schema string) {
	t.Helper()
	if pgtest.Pooler() != "transaction" || pgtest.DirectDSN() == "" {
		t.Skipf("needs %s=transaction and %s (a PgBouncer in transaction mode, and the server behind it)", pgtest.PoolerEnv, pgtest.DirectDSNEnv)
	}
	pooled, schema = pgtest.Schema(t)
	return pooled, pgtest.DirectDSN(), schema
}

// syncBuffer is a log destination safe for the engine's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestTransactionPoolerWithoutDirectDSN: behind a transaction pooler with
// no direct connection, a schema that needs migrating is refused with
// ErrMigrateThroughPooler and nothing is created; once migrated over the
// server itself, engines open through the pooler, say that they find
// other processes' work by polling, and run what another engine started.
func TestTransactionPoolerWithoutDirectDSN(t *testing.T) {
	pooled, direct, schema := behindTransactionPooler(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := &flowpg.Options{Schema: schema, Pooler: flowpg.TransactionPooler, MaxConns: 2}
	_, err := flowpg.Open(ctx, pooled, nil, opts)
	if !errors.Is(err, flowpg.ErrMigrateThroughPooler) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("open of a missing schema through the pooler: %v, want ErrMigrateThroughPooler naming the missing schema", err)
	}
	db, err := sql.Open(flowpg.DriverName, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("the refused open created schema %s", schema)
	}

	migrated, err := flowpg.Open(ctx, direct, nil, &flowpg.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatalf("migrate over the server itself: %v", err)
	}
	migrated.Close()

	var logs syncBuffer
	cfg := &flow.Config{PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	worker, err := flowpg.Open(ctx, pooled, cfg, opts)
	if err != nil {
		t.Fatalf("open through the pooler on a current schema: %v", err)
	}
	defer worker.Close()
	starter, err := flowpg.Open(ctx, pooled, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	flow.Register(worker, twice)
	flow.Register(starter, twice) // starts the run elsewhere: the worker finds it by polling
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer worker.Stop(ctx)
	r, err := flow.Start(ctx, starter, twice, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Result(ctx); err != nil || out != 20 {
		t.Fatalf("run started by another engine: %d, %v; want 20", out, err)
	}
	if !strings.Contains(logs.String(), "transaction pooler") {
		t.Errorf("the engine did not say why it polls for other processes' work; its log:\n%s", logs.String())
	}
}

// TestTransactionPoolerWithDirectDSN: with a direct connection, an engine
// behind a transaction pooler migrates a fresh schema over it and listens
// there, so a run another process starts wakes it at once, well before
// its (long) poll.
func TestTransactionPoolerWithDirectDSN(t *testing.T) {
	pooled, direct, schema := behindTransactionPooler(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := &flowpg.Options{Schema: schema, Pooler: flowpg.TransactionPooler, DirectDSN: direct, MaxConns: 2}
	worker, err := flowpg.Open(ctx, pooled, &flow.Config{PollInterval: time.Hour}, opts)
	if err != nil {
		t.Fatalf("open through the pooler with a direct DSN: %v", err)
	}
	defer worker.Close()
	flow.Register(worker, twice)
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer worker.Stop(ctx)
	starter, err := flowpg.Open(ctx, pooled, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	flow.Register(starter, twice)
	// The worker's listener may still be connecting: a wake sent before it
	// listens is lost, and the poll is an hour away. Start runs until one
	// finishes, each waiting a few seconds.
	for try := 0; ; try++ {
		r, err := flow.Start(ctx, starter, twice, try, nil)
		if err != nil {
			t.Fatal(err)
		}
		wait, cancelWait := context.WithTimeout(ctx, 3*time.Second)
		out, err := r.Result(wait)
		cancelWait()
		if err == nil {
			if out != 4*try {
				t.Fatalf("run %d: %d, want %d", try, out, 4*try)
			}
			return
		}
		if try == 5 {
			t.Fatalf("no run started by another engine ran within 3s of its start (its wake goes through the direct listener): %v", err)
		}
	}
}

// TestPoolerOptions: a pooler in the way of an engine that was not told
// so is named in the error; an unknown pooler is refused.
func TestPoolerOptions(t *testing.T) {
	pooled, _, schema := behindTransactionPooler(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := flowpg.Open(ctx, pooled, nil, &flowpg.Options{Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "Options.Pooler") {
		t.Errorf("open through PgBouncer with NoPooler: %v, want an error naming Options.Pooler", err)
	}
	if _, err := flowpg.Open(ctx, pooled, nil, &flowpg.Options{Schema: schema, Pooler: flowpg.Pooler(7)}); err == nil || !strings.Contains(err.Error(), "unknown pooler") {
		t.Errorf("open with Pooler(7): %v, want unknown pooler", err)
	}
	for _, name := range []string{"", "none", "session", "transaction"} {
		p, err := flowpg.ParsePooler(name)
		if err != nil || (name != "" && p.String() != name) {
			t.Errorf("ParsePooler(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := flowpg.ParsePooler("statement"); err == nil {
		t.Error(`ParsePooler("statement") accepted a mode flowlite cannot run behind`)
	}
}
