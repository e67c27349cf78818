// Package pgtest gives tests a fresh PostgreSQL schema each, so that the
// behaviour suites of flow and flowtest, and the adapter's own tests, run
// on PostgreSQL without sharing state, and one place decides which backend
// a test run uses.
//
// The backend is chosen by the environment: FLOWLITE_TEST_BACKEND=postgres
// selects PostgreSQL (anything else, or nothing, SQLite). The server is
// the database FLOWLITE_PG_DSN names, by default the postgres database on
// 127.0.0.1:5432 as user postgres. A test that asked for PostgreSQL fails
// when the server cannot be reached: a suite that silently fell back to
// SQLite, or skipped, would report a PostgreSQL run that never happened.
//
// A package whose TestMain calls OwnDatabase runs in a database of its own,
// created on that server when a test first asks for PostgreSQL and dropped
// when the package's tests end. Each Schema is created by the engine or
// store that opens it and dropped, with everything in it, when the test
// ends. The pool Schema uses for the
// drop lives only for the drop, so tests that check for leaked goroutines
// (goleak) see none of its connections.
//
// It imports flow/flowpg, for the pgx database/sql driver it registers,
// and the standard library; only tests and flow/flowtest import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowlite/flowlite/flow/flowpg"
)

// Environment variables read by this package, and only here.
const (
	// BackendEnv chooses the backend of the behaviour suites: "postgres"
	// or empty (SQLite).
	BackendEnv = "FLOWLITE_TEST_BACKEND"
	// DSNEnv names the PostgreSQL database tests create their schemas in.
	DSNEnv = "FLOWLITE_PG_DSN"
	// PoolerEnv says what stands between DSNEnv and the server: empty or
	// "none", "session" or "transaction" (a PgBouncer's pool_mode); the
	// suites open their engines and stores with that flowpg.Pooler.
	PoolerEnv = "FLOWLITE_PG_POOLER"
	// DirectDSNEnv, when DSNEnv is a pooler's, names the same server
	// reached directly: the engines' DirectDSN, and where this package
	// creates and drops databases and schemas.
	DirectDSNEnv = "FLOWLITE_PG_DIRECT_DSN"
	// HistoryPartitionsEnv, a duration, has the suites' engines keep their
	// history in partitions of that span (flowpg.Options.HistoryPartitions).
	HistoryPartitionsEnv = "FLOWLITE_PG_HISTORY_PARTITIONS"
)

// StandbyDSNEnv names a streaming standby of the server DSNEnv's database
// is on (a hot standby, read-only), for the tests of reads from a replica.
const StandbyDSNEnv = "FLOWLITE_PG_STANDBY_DSN"

// StandbyDSN returns the database DSN names on the standby StandbyDSNEnv
// names, or "" when it names none.
func StandbyDSN() (string, error) {
	standby := os.Getenv(StandbyDSNEnv)
	if standby == "" {
		return "", nil
	}
	u, err := url.Parse(DSN())
	if err != nil {
		return "", fmt.Errorf("%s: %w", DSNEnv, err)
	}
	return WithDatabase(standby, strings.TrimPrefix(u.Path, "/"))
}

// AwaitStandby waits, up to timeout, until the standby standbyDSN names
// has replayed schema at this binary's version and caught up with what it
// received, as flowpg.Inspect reads it there: a test that wrote on the
// primary then reads the same on the standby. It returns why not when the
// time runs out.
func AwaitStandby(ctx context.Context, standbyDSN, schema string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		info, err := flowpg.Inspect(ctx, standbyDSN, &flowpg.Options{Schema: schema})
		if err == nil && info.Exists && info.Flowlite && !info.Pending() && info.Standby && info.CaughtUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby did not replay schema %s within %s: %+v, %v", schema, timeout, info, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Pooler returns PoolerEnv: what stands between DSN and the server.
func Pooler() string { return os.Getenv(PoolerEnv) }

// DirectDSN returns the database DSN names reached without the pooler, or
// "" when DirectDSNEnv is not set.
func DirectDSN() string {
	DSN() // creates the package's database first, which sets DirectDSNEnv to it
	return os.Getenv(DirectDSNEnv)
}

// Options returns the flowpg options of an engine of the suites in
// schema: PoolerEnv's pooler, DirectDSN, and HistoryPartitionsEnv's span.
// An unknown PoolerEnv or a bad span panics: the environment of the run is
// wrong.
func Options(schema string) *flowpg.Options {
	pooler, err := flowpg.ParsePooler(Pooler())
	if err != nil {
		panic(fmt.Sprintf("pgtest: %s: %v", PoolerEnv, err))
	}
	var span time.Duration
	if v := os.Getenv(HistoryPartitionsEnv); v != "" {
		if span, err = time.ParseDuration(v); err != nil {
			panic(fmt.Sprintf("pgtest: %s: %v", HistoryPartitionsEnv, err))
		}
	}
	return &flowpg.Options{Schema: schema, Pooler: pooler, DirectDSN: DirectDSN(), HistoryPartitions: span}
}

// adminDSN is where this package creates and drops: the server itself when
// DirectDSNEnv names it, else DSN.
func adminDSN() string {
	if d := DirectDSN(); d != "" {
		return d
	}
	return DSN()
}

// DefaultDSN is the database tests use when DSNEnv is not set: the local
// server CI starts, with trust authentication.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// TB is the part of testing.TB that pgtest uses, so that flowtest's TB
// satisfies it too.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

// Postgres reports whether the environment selects PostgreSQL for the
// behaviour suites.
func Postgres() bool { return os.Getenv(BackendEnv) == "postgres" }

// ownedEnv names the database OwnDatabase created, in the environment of
// the process and its children (worker processes of the crash and network
// suites), so that a child uses its parent's database instead of creating
// one of its own.
const ownedEnv = "FLOWLITE_PG_TEST_DATABASE"

// DSN returns the database tests run in: the package's own, once
// OwnDatabase created it, else DSNEnv, or DefaultDSN.
func DSN() string {
	if own.enabled {
		own.once.Do(createOwnDatabase)
	}
	if dsn := os.Getenv(DSNEnv); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// own is the database of a test process that called OwnDatabase.
var own struct {
	enabled bool
	once    sync.Once
	name    string // created, to drop at the end
	admin   string // the DSN it was created from
	err     error  // why it was not
}

// OwnDatabase makes the tests of the calling package run in a PostgreSQL
// database of their own, created on the server DSNEnv names the first time
// a test asks for PostgreSQL (a package that runs on SQLite creates none),
// and returns the function that drops it once the tests ended, for
// goleak.Cleanup, which hands it the tests' exit code to exit with:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase())) }
//
// So no package sees another's schemas, sessions or leftovers. The role
// of DSNEnv needs CREATEDB. The database is named in the process's
// environment: child processes the tests start use it, and neither create
// nor drop one. A failed drop fails the run; a test binary that panics or
// is killed by -timeout leaves its flowlite_test_… database behind. When
// the database cannot be created, Reachable and Schema report why, and
// DSN stays the admin database.
func OwnDatabase() (drop func(exitCode int)) {
	if os.Getenv(ownedEnv) == "" {
		own.enabled = true
	}
	return func(code int) {
		if own.name != "" {
			if err := dropOwnDatabase(); err != nil {
				fmt.Fprintln(os.Stderr, "pgtest:", err)
				if code == 0 {
					code = 1
				}
			}
		}
		os.Exit(code)
	}
}

// createOwnDatabase creates the process's database and points DSNEnv at
// it. When it cannot, DSN stays the admin database and Reachable reports
// why.
func createOwnDatabase() {
	own.admin = os.Getenv(DSNEnv)
	if own.admin == "" {
		own.admin = DefaultDSN
	}
	direct := os.Getenv(DirectDSNEnv)
	if direct != "" {
		own.admin = direct
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "flowlite_test_" + hex.EncodeToString(b)
	dsn, err := WithDatabase(own.admin, name)
	if err != nil {
		own.err = err
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	own.err = withDSN(ctx, own.admin, func(db *sql.DB) error {
		_, err := db.ExecContext(ctx, "CREATE DATABASE "+name)
		return err
	})
	if own.err != nil {
		own.err = fmt.Errorf("create the package's test database %s (the role needs CREATEDB): %w", name, own.err)
		return
	}
	own.name = name
	if direct != "" {
		pooled, err := WithDatabase(os.Getenv(DSNEnv), name)
		if err != nil {
			own.err = err
			return
		}
		os.Setenv(DirectDSNEnv, dsn)
		dsn = pooled
	}
	os.Setenv(DSNEnv, dsn)
	os.Setenv(ownedEnv, name)
}

// dropOwnDatabase drops the process's database, ending any session left
// in it.
func dropOwnDatabase() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := withDSN(ctx, own.admin, func(db *sql.DB) error {
		_, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+own.name+" WITH (FORCE)")
		return err
	})
	if err != nil {
		return fmt.Errorf("drop the package's test database %s: %w", own.name, err)
	}
	return nil
}

// WithDatabase returns dsn with its database replaced by name. A URL keeps
// its form (the network suite reads the host from it); a key=value DSN
// gets a dbname that overrides any earlier one.
func WithDatabase(dsn, name string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " dbname=" + name, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%s: %w", DSNEnv, err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

var reach struct {
	once sync.Once
	err  error
}

// Reachable connects to DSN once per process and returns why it could not.
func Reachable() error {
	reach.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dsn := DSN()
		if own.err != nil {
			reach.err = own.err
			return
		}
		reach.err = withDSN(ctx, dsn, func(db *sql.DB) error { return db.PingContext(ctx) })
		if reach.err != nil {
			reach.err = fmt.Errorf("PostgreSQL at %s=%q: %w", DSNEnv, DSN(), reach.err)
		}
	})
	return reach.err
}

// prefix makes the schemas of one test process distinct from those of
// other processes running against the same server at the same time.
var prefix = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "flowlite_t" + hex.EncodeToString(b) + "_"
}()

var schemas atomic.Int64

// Schema returns the DSN and the name of a schema no other test uses, and
// drops the schema when t ends. It does not create it: flowpg.Open does.
// Call it before opening the engine or store on it, so that t.Cleanup,
// which runs last-registered first, closes the engine before the drop.
// It fails t when the server cannot be reached.
func Schema(t TB) (dsn, schema string) {
	t.Helper()
	if err := Reachable(); err != nil {
		t.Fatalf("%s=postgres (or FLOWLITE_PG_TEST=1) but no PostgreSQL server: %v", BackendEnv, err)
	}
	schema = fmt.Sprintf("%s%d", prefix, schemas.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := withDB(ctx, func(db *sql.DB) error {
			_, err := db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			return err
		})
		if err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return DSN(), schema
}

// withDB runs f on a pool of DSN that lives only for the call.
func withDB(ctx context.Context, f func(db *sql.DB) error) error {
	return withDSN(ctx, adminDSN(), f)
}

// withDSN runs f on a pool of dsn that lives only for the call.
func withDSN(ctx context.Context, dsn string, f func(db *sql.DB) error) error {
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return f(db)
}
