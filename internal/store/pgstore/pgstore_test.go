package pgstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/internal/pgtest"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
	"github.com/flowlite/flowlite/internal/store/storetest"
)

// The tests need a PostgreSQL server. TestMain creates a database of its
// own on it (flowlite_test_<random>, through the admin database that
// FLOWLITE_PG_DSN names, by default the postgres database on
// 127.0.0.1:5432) and drops it when the tests end; each store under test
// gets a fresh schema in it. When the server cannot be reached, the tests
// skip, unless FLOWLITE_PG_TEST=1 (CI sets it) makes that a failure.

// base is the clock of the tests: times are Unix milliseconds.
const base = int64(1_700_000_000_000)

var testDB struct {
	dsn string // the test database
	err error  // why there is none
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cleanup, err := createTestDatabase()
	if err != nil {
		testDB.err = err
		return m.Run()
	}
	code := m.Run()
	if err := cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, "pgstore tests:", err)
		if code == 0 {
			code = 1
		}
	}
	if code == 0 {
		// Checked only after the database's pools are closed.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "pgstore tests: goroutines leaked:", err)
			code = 1
		}
	}
	return code
}

func createTestDatabase() (cleanup func() error, err error) {
	// The same server, and the same variable, as the flow suites'.
	cfg, err := pgx.ParseConfig(pgtest.DSN())
	if err != nil {
		return nil, fmt.Errorf("FLOWLITE_PG_DSN: %w", err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	admin := stdlib.OpenDB(*cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("PostgreSQL at %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "flowlite_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create test database: %w", err)
	}
	testDB.dsn = fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, name)
	if cfg.Password != "" {
		testDB.dsn += " password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(cfg.Password) + "'"
	}
	return func() error {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop test database %s: %w", name, err)
		}
		return nil
	}, nil
}

// needPG returns the test database's DSN, or skips (fails, with
// FLOWLITE_PG_TEST=1) when there is none.
func needPG(t testing.TB) string {
	t.Helper()
	if testDB.err != nil {
		if os.Getenv("FLOWLITE_PG_TEST") == "1" {
			t.Fatalf("FLOWLITE_PG_TEST=1 but no PostgreSQL test database: %v", testDB.err)
		}
		t.Skipf("no PostgreSQL server (%v); start one, or set FLOWLITE_PG_DSN to an admin database (FLOWLITE_PG_TEST=1 fails instead of skipping)", testDB.err)
	}
	return testDB.dsn
}

var schemas atomic.Int64

// freshSchema returns the name of a schema no other test uses.
func freshSchema() string { return fmt.Sprintf("t%d", schemas.Add(1)) }

// openStore opens a store in a fresh schema of the test database and
// closes it when the test ends.
func openStore(t *testing.T, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	dsn := needPG(t)
	if opts.Schema == "" {
		opts.Schema = freshSchema()
	}
	s, err := pgstore.Open(t.Context(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	needPG(t)
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s, err := pgstore.Open(t.Context(), needPG(t), pgstore.Options{Schema: freshSchema(), MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestConformanceOpenDB runs the suite on stores over one pool the caller
// opened, each in its own schema: the stores share connections whose
// search_path none of them changes.
func TestConformanceOpenDB(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s, err := pgstore.OpenDB(t.Context(), db, pgstore.Options{Schema: freshSchema()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func mustParse(t *testing.T, dsn string) pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return *cfg
}
