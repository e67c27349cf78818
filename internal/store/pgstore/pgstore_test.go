package pgstore_test

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
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

// The tests need a PostgreSQL server. They run in a database of their own
// on it (pgtest.OwnDatabase: created through the admin database that
// FLOWLITE_PG_DSN names, by default the postgres database on
// 127.0.0.1:5432, and dropped when the tests end); each store under test
// gets a fresh schema in it. When the server cannot be reached, the tests
// skip, unless FLOWLITE_PG_TEST=1 (CI sets it) makes that a failure. The
// goroutine check runs after the database's pools are closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase())) }

// base is the clock of the tests: times are Unix milliseconds.
const base = int64(1_700_000_000_000)

// needPG returns the test database's DSN, or skips (fails, with
// FLOWLITE_PG_TEST=1) when there is none.
func needPG(t testing.TB) string {
	t.Helper()
	if err := pgtest.Reachable(); err != nil {
		if os.Getenv("FLOWLITE_PG_TEST") == "1" {
			t.Fatalf("FLOWLITE_PG_TEST=1 but no PostgreSQL test database: %v", err)
		}
		t.Skipf("no PostgreSQL server (%v); start one, or set FLOWLITE_PG_DSN to an admin database (FLOWLITE_PG_TEST=1 fails instead of skipping)", err)
	}
	testDSN.once.Do(func() {
		cfg, err := pgx.ParseConfig(pgtest.DSN())
		if err != nil {
			testDSN.err = err
			return
		}
		// A key=value DSN, so that tests can append settings to it.
		testDSN.dsn = fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", cfg.Host, cfg.Port, cfg.User, cfg.Database)
		if cfg.Password != "" {
			testDSN.dsn += " password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(cfg.Password) + "'"
		}
	})
	if testDSN.err != nil {
		t.Fatalf("FLOWLITE_PG_DSN: %v", testDSN.err)
	}
	return testDSN.dsn
}

// testDSN is the test database's DSN in key=value form.
var testDSN struct {
	once sync.Once
	dsn  string
	err  error
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

// TestConformancePartitioned runs the suite on stores whose history is
// partitioned (Options.HistoryPartitions): every read and write of events
// behaves as on one table.
func TestConformancePartitioned(t *testing.T) {
	if raceEnabled {
		t.Skip("the suite's Go code runs under the race detector in TestConformance")
	}
	t.Parallel()
	needPG(t)
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s, err := pgstore.Open(t.Context(), needPG(t), pgstore.Options{Schema: freshSchema(), MaxConns: 4, HistoryPartitions: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
