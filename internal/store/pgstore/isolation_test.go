package pgstore_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/pgtest"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestStrongerDefaultIsolation opens stores on a database whose sessions
// default to SERIALIZABLE, as some servers, databases or roles are set
// up: the store's locking is designed for READ COMMITTED, and under a
// stronger level concurrent claims fail with serialization errors. Both a
// store that opens its own pool (which sets its sessions' default) and
// one on the caller's pool (whose sessions keep theirs) run every write at
// READ COMMITTED, and eight claimers draining 300 runs get no error and
// never share a run.
func TestStrongerDefaultIsolation(t *testing.T) {
	t.Parallel()
	dsn := needPG(t)
	admin := stdlib.OpenDB(mustParse(t, dsn))
	t.Cleanup(func() { admin.Close() })
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "iso_" + hex.EncodeToString(b)
	for _, stmt := range []string{
		"CREATE DATABASE " + name,
		"ALTER DATABASE " + name + " SET default_transaction_isolation = 'serializable'",
	} {
		if _, err := admin.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	isoDSN, err := pgtest.WithDatabase(dsn, name)
	if err != nil {
		t.Fatal(err)
	}

	open := map[string]func(t *testing.T) *pgstore.Store{
		"Open": func(t *testing.T) *pgstore.Store {
			s, err := pgstore.Open(t.Context(), isoDSN, pgstore.Options{Schema: freshSchema(), NoWakes: true, MaxConns: 8})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"OpenDB": func(t *testing.T) *pgstore.Store {
			db := stdlib.OpenDB(mustParse(t, isoDSN))
			t.Cleanup(func() { db.Close() })
			var level string
			if err := db.QueryRowContext(t.Context(), "SHOW default_transaction_isolation").Scan(&level); err != nil || level != "serializable" {
				t.Fatalf("the caller's pool's default isolation: %q, %v; want serializable", level, err)
			}
			s, err := pgstore.OpenDB(t.Context(), db, pgstore.Options{Schema: freshSchema(), NoWakes: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, how := range []string{"Open", "OpenDB"} {
		t.Run(how, func(t *testing.T) {
			s := open[how](t)
			ctx := t.Context()
			var level, sessionDefault string
			if err := s.Write(ctx, func(tx store.Tx) error {
				if err := tx.SQL().QueryRowContext(ctx, "SHOW transaction_isolation").Scan(&level); err != nil {
					return err
				}
				return tx.SQL().QueryRowContext(ctx, "SHOW default_transaction_isolation").Scan(&sessionDefault)
			}); err != nil || level != "read committed" {
				t.Fatalf("a write's isolation: %q, %v; want read committed", level, err)
			}
			// Open sets its sessions' default; a caller's pool keeps its own.
			if want := map[string]string{"Open": "read committed", "OpenDB": "serializable"}[how]; sessionDefault != want {
				t.Errorf("the sessions' default isolation: %q, want %q", sessionDefault, want)
			}

			const n = 300
			ps := make([]store.RunInsertParams, n)
			for i := range ps {
				ps[i] = store.RunInsertParams{ID: fmt.Sprintf("r%03d", i), Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, RunAt: base}
			}
			insertQueued(t, s, ps...)
			owner := drainWithClaimers(t, s, 8, 3)
			if len(owner) != n && !t.Failed() {
				t.Fatalf("%d runs claimed, want %d", len(owner), n)
			}

			// Starts in one statement, eight at once, and their runs claimed.
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					for i := range 20 {
						id := fmt.Sprintf("s%d-%02d", w, i)
						p := store.RunInsertParams{ID: id, Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, Queue: "q", Input: []byte("{}"), RunAt: base, Now: base}
						if ok, err := s.StartAlone(ctx, p, store.Event{RunID: id, At: base, Kind: "run_started"}); err != nil || !ok {
							t.Errorf("StartAlone %s: %v, %v", id, ok, err)
							return
						}
					}
				})
			}
			wg.Wait()
			if started := drainWithClaimers(t, s, 4, 3); len(started) != 8*20 && !t.Failed() {
				t.Errorf("%d runs started in one statement were claimed, want %d", len(started), 8*20)
			}
		})
	}
}
