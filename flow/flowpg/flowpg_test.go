package flowpg_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// schema returns a fresh schema on the test server, skipping the test
// when there is no server unless FLOWLITE_PG_TEST=1 or
// FLOWLITE_TEST_BACKEND=postgres asks for one, which makes it a failure.
func schema(t *testing.T) (dsn, schema string) {
	t.Helper()
	if err := pgtest.Reachable(); err != nil && os.Getenv("FLOWLITE_PG_TEST") != "1" && !pgtest.Postgres() {
		t.Skipf("no PostgreSQL server: %v (FLOWLITE_PG_TEST=1 fails instead)", err)
	}
	return pgtest.Schema(t)
}

var double = flow.Step[int, int]{Name: "double", Run: func(_ context.Context, n int) (int, error) { return 2 * n, nil }}

var twice = flow.Workflow[int, int]{Name: "twice", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	m, err := flow.Do(wc, double, n)
	if err != nil {
		return 0, err
	}
	return flow.Do(wc, double, m)
}}

func runTwice(t *testing.T, e *flow.Engine) {
	t.Helper()
	flow.Register(e, twice)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	r, err := flow.Start(ctx, e, twice, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Result(ctx); err != nil || out != 12 {
		t.Fatalf("result %d, %v; want 12", out, err)
	}
}

func TestOpenRunsAWorkflow(t *testing.T) {
	t.Parallel()
	dsn, s := schema(t)
	e, err := flowpg.Open(t.Context(), dsn, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowpg.Options{Schema: s, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	runTwice(t, e)
}

// TestNewOnCallersPool: New uses the caller's pool and leaves it open.
func TestNewOnCallersPool(t *testing.T) {
	t.Parallel()
	dsn, s := schema(t)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := flowpg.New(t.Context(), db, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowpg.Options{Schema: s})
	if err != nil {
		t.Fatal(err)
	}
	runTwice(t, e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+s+".runs").Scan(&n); err != nil || n != 1 {
		t.Errorf("runs in the caller's pool after Close: %d, %v; want 1", n, err)
	}
	if _, err := flowpg.New(t.Context(), nil, nil, nil); err == nil {
		t.Error("New accepted a nil pool")
	}
}

// TestFileOperationsNotSupported: the SQLite file operations of
// flow.Engine say ErrNotSupported on PostgreSQL rather than pretend.
func TestFileOperationsNotSupported(t *testing.T) {
	t.Parallel()
	dsn, s := schema(t)
	e, err := flowpg.Open(t.Context(), dsn, nil, &flowpg.Options{Schema: s, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := t.Context()
	if _, err := e.FileHealth(ctx); !errors.Is(err, flow.ErrNotSupported) {
		t.Errorf("FileHealth: %v, want ErrNotSupported", err)
	}
	if _, err := e.Checkpoint(ctx, flowtype.CheckpointPassive); !errors.Is(err, flow.ErrNotSupported) {
		t.Errorf("Checkpoint: %v, want ErrNotSupported", err)
	}
	dst := filepath.Join(t.TempDir(), "backup.db")
	if err := e.Backup(ctx, dst); !errors.Is(err, flow.ErrNotSupported) {
		t.Errorf("Backup: %v, want ErrNotSupported", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Backup left %s: %v", dst, err)
	}
	if _, err := e.Check(ctx); !errors.Is(err, flow.ErrNotSupported) {
		t.Errorf("Check: %v, want ErrNotSupported", err)
	}
}

func TestOpenRefusesBadInput(t *testing.T) {
	t.Parallel()
	dsn, _ := schema(t)
	ctx := t.Context()
	if e, err := flowpg.Open(ctx, dsn, nil, &flowpg.Options{Schema: "Bad-Name"}); err == nil {
		e.Close()
		t.Error("Open accepted schema Bad-Name")
	}
	if e, err := flowpg.Open(ctx, "postgres://postgres@127.0.0.1:5432/flowlite_no_such_db?sslmode=disable", nil, nil); !errors.Is(err, flow.ErrNotDatabase) {
		if e != nil {
			e.Close()
		}
		t.Errorf("Open of a missing database: %v, want ErrNotDatabase", err)
	}
	if _, err := flowpg.Open(ctx, dsn, &flow.Config{LeaseTimeout: time.Second, HeartbeatInterval: 2 * time.Second}, nil); err == nil {
		t.Error("Open accepted a heartbeat interval longer than the lease")
	}
}

// TestOpenDerivesNetworkTimeoutsFromTheLease: the server ends a session of
// Open's pool that sits idle in a transaction for one lease (at least 1s,
// at most 30s), so that a worker that vanishes mid-transaction does not
// keep its runs' rows locked from the others; a RunTx step reads the
// setting in the engine's own transaction.
func TestOpenDerivesNetworkTimeoutsFromTheLease(t *testing.T) {
	t.Parallel()
	show := flow.Step[int, string]{Name: "show", RunTx: func(ctx context.Context, tx *sql.Tx, _ int) (string, error) {
		var v string
		err := tx.QueryRowContext(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&v)
		return v, err
	}}
	wf := flow.Workflow[int, string]{Name: "show", Run: func(wc flow.Context, n int) (string, error) {
		return flow.Do(wc, show, n)
	}}
	for _, tc := range []struct {
		lease time.Duration
		want  string
	}{{0, "30s"}, {3 * time.Second, "3s"}, {300 * time.Millisecond, "1s"}, {time.Hour, "30s"}} {
		dsn, s := schema(t)
		e, err := flowpg.Open(t.Context(), dsn, &flow.Config{LeaseTimeout: tc.lease, PollInterval: 10 * time.Millisecond},
			&flowpg.Options{Schema: s, MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		flow.Register(e, wf)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := flow.Start(ctx, e, wf, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := r.Result(ctx); err != nil || got != tc.want {
			t.Errorf("lease %s: idle_in_transaction_session_timeout %q, %v; want %s", tc.lease, got, err, tc.want)
		}
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
		cancel()
		e.Close()
	}
}
