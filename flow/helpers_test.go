package flow_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// fastRetry makes retries quick enough for tests.
var fastRetry = flow.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}

func testConfig() *flow.Config {
	return &flow.Config{PollInterval: 10 * time.Millisecond, DefaultRetry: fastRetry}
}

// openEngine opens an engine on the database of path, closing it when the
// test ends. The backend is the suite's (see pgtest): a SQLite file at
// path by default, and with FLOWLITE_TEST_BACKEND=postgres a PostgreSQL
// schema of its own for each path, so that a test that opens path again
// (a restart, several engines on one database) finds the same runs.
func openEngine(t testing.TB, path string, cfg *flow.Config) *flow.Engine {
	t.Helper()
	if cfg == nil {
		cfg = testConfig()
	}
	if _, sqlite := sqlitePaths.Load(path); sqlite || !pgtest.Postgres() {
		return openSQLiteEngine(t, path, cfg, nil)
	}
	schema, ok := pgSchemas.Load(path)
	if !ok {
		// The first test to open path owns its schema: pgtest drops it
		// when that test ends, after the engines opened below are closed.
		_, s := pgtest.Schema(t)
		schema, _ = pgSchemas.LoadOrStore(path, s)
	}
	e, err := flowpg.Open(context.Background(), pgtest.DSN(), cfg, pgOptions(schema.(string)))
	if err != nil {
		t.Fatalf("open engine on PostgreSQL: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// pgSchemas maps the database path of a test to its PostgreSQL schema
// when the suite runs on PostgreSQL.
var pgSchemas sync.Map // path → schema

// sqlitePaths holds the paths of sqlitePath and openSQLiteEngine: SQLite
// files whatever the suite's backend, which rawDB may read.
var sqlitePaths sync.Map // path → struct{}

// openSQLiteEngine opens an engine on the SQLite file at path with SQLite
// options, whatever backend the suite runs on: for the tests of what only
// SQLite has (its file, WAL, busy timeout, raw SQL through rawDB, damaged
// files), which stay on SQLite when FLOWLITE_TEST_BACKEND=postgres.
func openSQLiteEngine(t testing.TB, path string, cfg *flow.Config, opts *flowsqlite.Options) *flow.Engine {
	t.Helper()
	if cfg == nil {
		cfg = testConfig()
	}
	sqlitePaths.Store(path, struct{}{})
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

// sqlitePath is dbPath for a test that stays on SQLite when the suite runs
// on PostgreSQL, because it reads or changes the file behind the API's
// back (rawDB: raw SQL, damaged values, SQLite's own errors) or hands the
// engine a *sql.DB of its own. openEngine opens such a path with SQLite.
// `grep -n 'sqlitePath(t)' flow/*_test.go` lists the tests that use it.
// A test that only needs rows written or counted behind the API's back can
// use tableDB on either backend instead.
func sqlitePath(t *testing.T) string {
	path := dbPath(t)
	sqlitePaths.Store(path, struct{}{})
	return path
}

// skipOnPostgres skips a test of a feature only the SQLite backend has
// when the suite runs on PostgreSQL: the file operations (Backup, Check,
// FileHealth, Checkpoint, which flowpg answers with flow.ErrNotSupported,
// as flow/flowpg's tests check), the WAL and its watch, and the busy
// timeout of SQLite's single write lock. Each caller names its feature.
func skipOnPostgres(t *testing.T, feature string) {
	t.Helper()
	if pgtest.Postgres() {
		t.Skipf("%s: SQLite only, nothing to test on PostgreSQL", feature)
	}
}

// rawDB opens the database file for assertions and tampering that the API
// deliberately does not offer.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	if _, ok := sqlitePaths.Load(path); pgtest.Postgres() && !ok {
		// Without this the test would read an empty SQLite file beside the
		// PostgreSQL schema it meant, and fail (or pass) for the wrong reason.
		t.Fatalf("rawDB(%s): the suite runs on PostgreSQL; a test that reads the file must open it with openSQLiteEngine", path)
	}
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// tableDB opens the database of path on the backend openEngine chose for
// it, for the tests that read or write rows behind the API's back on
// either backend, and returns how to name a table or view there:
// flowlite_NAME on SQLite, SCHEMA.NAME on PostgreSQL (openEngine must have
// opened path first, creating its schema).
func tableDB(t testing.TB, path string) (*sql.DB, func(name string) string) {
	t.Helper()
	if _, sqlite := sqlitePaths.Load(path); sqlite || !pgtest.Postgres() {
		return rawDB(t, path), func(name string) string { return "flowlite_" + name }
	}
	schema, ok := pgSchemas.Load(path)
	if !ok {
		t.Fatalf("no PostgreSQL schema for %s: open an engine on it first", path)
	}
	// Straight to the server when the suite runs through a pooler: this
	// pool is database/sql's own, with pgx's prepared statements, which a
	// transaction pooler loses between transactions.
	dsn := pgtest.DirectDSN()
	if dsn == "" {
		dsn = pgtest.DSN()
	}
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, func(name string) string { return fmt.Sprintf("%q.%s", schema, name) }
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slowBound(20*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// slowBound stretches a test's time bound under the race detector, which
// slows the engine five to ten times on two shared cores: the bounds guard
// against hangs, not against a slow machine.
func slowBound(d time.Duration) time.Duration {
	if raceEnabled {
		return 4 * d
	}
	return d
}

// eventually polls cond until it holds or the test times out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(slowBound(15 * time.Second))
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

// pgOptions are the options of an engine of the suite in schema, with the
// pooler the environment names (pgtest.Options), and a small pool.
func pgOptions(schema string) *flowpg.Options {
	o := pgtest.Options(schema)
	o.MaxConns = 4
	return o
}
