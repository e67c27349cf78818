package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestOpenTwiceAndDefaultSchema opens the default schema twice, the second
// time on a migrated schema, and checks both stores see the same data.
// It is the only test in the schema flowlite.
func TestOpenTwiceAndDefaultSchema(t *testing.T) {
	t.Parallel()
	a := openStore(t, pgstore.Options{Schema: pgstore.DefaultSchema})
	if a.Schema() != "flowlite" {
		t.Fatalf("schema %q, want flowlite", a.Schema())
	}
	insertRuns(t, a, "q", "r1")
	b := openStore(t, pgstore.Options{}) // a fresh schema: sees nothing
	if _, err := b.Reader().RunGet(t.Context(), "r1"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("run of another schema: %v, want ErrRunNotFound", err)
	}
	c := openStore(t, pgstore.Options{Schema: pgstore.DefaultSchema})
	if _, err := c.Reader().RunGet(t.Context(), "r1"); err != nil {
		t.Errorf("reopened default schema: %v", err)
	}
}

// TestSchemaTooNew: a schema migrated by a newer flowlite is refused and
// left as it is.
func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{})
	schema := s.Schema()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "INSERT INTO "+schema+"."+pgstore.VersionTable+" (version_id, is_applied) VALUES (9999, true)"); err != nil {
		t.Fatal(err)
	}
	_, err := pgstore.Open(t.Context(), needPG(t), pgstore.Options{Schema: schema})
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("open newer schema: %v, want ErrSchemaTooNew", err)
	}
	var v int64
	if err := db.QueryRowContext(t.Context(), "SELECT max(version_id) FROM "+schema+"."+pgstore.VersionTable).Scan(&v); err != nil || v != 9999 {
		t.Errorf("version after refusal: %d, %v; want 9999", v, err)
	}
}

func TestBadSchemaName(t *testing.T) {
	t.Parallel()
	dsn := needPG(t)
	for _, name := range []string{"Flow", "1abc", "a-b", `x"; DROP TABLE y; --`, "pg_flowlite", strings.Repeat("a", 64)} {
		if s, err := pgstore.Open(t.Context(), dsn, pgstore.Options{Schema: name}); err == nil {
			s.Close()
			t.Errorf("schema %q accepted", name)
		}
	}
}

// TestWriteInCallersTx runs the store's writes in a transaction of the
// caller's own pool, whose search_path finds an application table named
// runs in public: the store's queries name their schema, so they never
// touch it, and the application's unqualified writes never reach
// flowlite's table. Both commit, or roll back, together.
func TestWriteInCallersTx(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{})
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	defer db.Close()
	ctx := t.Context()
	const app = "runs" // the only test of the package to create it
	if _, err := db.ExecContext(ctx, "CREATE TABLE public."+app+" (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE public."+app) })

	for _, commit := range []bool{true, false} {
		id := "committed"
		if !commit {
			id = "rolled-back"
		}
		sqlTx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sqlTx.ExecContext(ctx, "INSERT INTO "+app+" (id) VALUES ($1)", id); err != nil {
			t.Fatal(err)
		}
		err = s.WriteInTx(ctx, sqlTx, func(tx store.Tx) error {
			if tx.SQL() != sqlTx {
				t.Error("SQL() is not the caller's transaction")
			}
			ok, err := tx.RunInsert(ctx, store.RunInsertParams{ID: id, Workflow: order1, Queue: "q", Input: []byte(`{}`), RunAt: base, Now: base})
			if err != nil || !ok {
				t.Errorf("insert in caller's tx: %v, %v", ok, err)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			err = sqlTx.Commit()
		} else {
			err = sqlTx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		_, getErr := s.Reader().RunGet(ctx, id)
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+app+" WHERE id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if commit && (getErr != nil || n != 1) {
			t.Errorf("committed: run %v, application rows %d; want both", getErr, n)
		}
		if !commit && (!errors.Is(getErr, flowtype.ErrRunNotFound) || n != 0) {
			t.Errorf("rolled back: run %v, application rows %d; want neither", getErr, n)
		}
	}
}

// TestClosed: after Close, writes and reads fail with flowtype.ErrClosed,
// also on a store over the caller's pool, which stays open.
func TestClosed(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	defer db.Close()
	for name, open := range map[string]func() (*pgstore.Store, error){
		"Open": func() (*pgstore.Store, error) {
			return pgstore.Open(t.Context(), needPG(t), pgstore.Options{Schema: freshSchema()})
		},
		"OpenDB": func() (*pgstore.Store, error) {
			return pgstore.OpenDB(t.Context(), db, pgstore.Options{Schema: freshSchema()})
		},
	} {
		s, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
		if err := s.Write(t.Context(), func(store.Tx) error { return nil }); !errors.Is(err, flowtype.ErrClosed) {
			t.Errorf("%s: write after close: %v, want ErrClosed", name, err)
		}
		if _, err := s.Reader().RunGet(t.Context(), "x"); !errors.Is(err, flowtype.ErrClosed) {
			t.Errorf("%s: RunGet after close: %v, want ErrClosed", name, err)
		}
		if _, err := s.Reader().RunList(t.Context(), store.RunListParams{}); !errors.Is(err, flowtype.ErrClosed) {
			t.Errorf("%s: RunList after close: %v, want ErrClosed", name, err)
		}
	}
	if err := db.PingContext(t.Context()); err != nil {
		t.Errorf("the caller's pool after the store closed: %v", err)
	}
}

// TestReadWhoseDeadlinePassesWhileDialingReportsTheDeadline: a read whose
// deadline passes while pgx dials a new connection fails with an error
// that errors.Is matches to context.DeadlineExceeded. The dialer's timer
// can fire before the context's: pgx then sees no context error and
// reports a dial timeout (net's i/o timeout), which Run.Result took for a
// database failure, so flowtest's Await, polling a waiting run in short
// slices on PostgreSQL, returned it instead of waiting on. lateCtx holds
// that moment still: its deadline has passed, its Err is still nil.
func TestReadWhoseDeadlinePassesWhileDialingReportsTheDeadline(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, needPG(t))
	var stall atomic.Bool
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dl, ok := ctx.Deadline(); ok && stall.Load() {
			time.Sleep(time.Until(dl))
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrDeadlineExceeded}
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	db := sql.OpenDB(stdlib.GetConnector(cfg))
	defer db.Close()
	db.SetMaxIdleConns(0) // every statement dials
	s, err := pgstore.OpenDB(t.Context(), db, pgstore.Options{Schema: freshSchema()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stall.Store(true)
	ctx := lateCtx{Context: t.Context(), deadline: time.Now().Add(50 * time.Millisecond)}
	if _, err := s.Reader().RunGet(ctx, "r1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("RunGet past its deadline: %v, want context.DeadlineExceeded", err)
	}
}

// lateCtx is a context whose deadline passes before it says so.
type lateCtx struct {
	context.Context
	deadline time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// TestApplicationName: the sessions Open makes, the pool's and the wake
// listener's, carry an application_name that tells them from the
// application's in pg_stat_activity: Options.ApplicationName, else the
// DSN's, else "flowlite".
func TestApplicationName(t *testing.T) {
	t.Parallel()
	dsn := needPG(t)
	admin := sql.OpenDB(stdlib.GetConnector(mustParse(t, dsn)))
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	for _, c := range []struct {
		name, dsn string
		opt, want string
	}{
		{"default", dsn, "", pgstore.DefaultApplicationName},
		{"option", dsn, "billing-engine", "billing-engine"},
		{"dsn", dsn + " application_name=from_dsn", "", "from_dsn"},
		{"option over dsn", dsn + " application_name=from_dsn", "billing-engine", "billing-engine"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := pgstore.Open(t.Context(), c.dsn, pgstore.Options{Schema: freshSchema(), MaxConns: 2, ApplicationName: c.opt})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			ctx := t.Context()
			var pooled string
			err = s.Write(ctx, func(tx store.Tx) error {
				return tx.SQL().QueryRowContext(ctx, "SELECT current_setting('application_name')").Scan(&pooled)
			})
			if err != nil || pooled != c.want {
				t.Errorf("pooled session's application_name = %q, %v; want %q", pooled, err, c.want)
			}
			listen(t, s) // returns once the listener listens
			var names []string
			rows, err := admin.QueryContext(ctx, `
				SELECT application_name FROM pg_stat_activity
				WHERE datname = current_database() AND query = 'LISTEN "' || $1 || '_wake"'`, s.Schema())
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				names = append(names, n)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(names) != 1 || names[0] != c.want {
				t.Errorf("listener sessions' application_name = %q, want [%q]", names, c.want)
			}
		})
	}
}

// The error of a DSN that names a primary and its standbys names every
// server it tried, not only the first.
func TestOpenErrorNamesEveryHost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := pgstore.Open(ctx, "postgres://u@127.0.0.1:1,127.0.0.1:2/db?sslmode=disable&connect_timeout=2&target_session_attrs=read-write", pgstore.Options{})
	if err == nil || !strings.Contains(err.Error(), "postgres u@127.0.0.1:1,127.0.0.1:2/db") {
		t.Fatalf("Open of two closed ports = %v; want an error naming both", err)
	}
}
