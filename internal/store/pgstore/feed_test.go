package pgstore_test

import (
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestFeedHoldsBackPositionsAnOpenTransactionCouldFill forces the
// interleaving the feed must survive on PostgreSQL: transaction A draws
// an event ID and stays open, B draws a higher one and commits. The feed
// must not deliver B's event before A ends (a reader would move past A's
// ID and never see it); once A commits, it delivers A's then B's; once A
// rolls back instead, B's alone.
func TestFeedHoldsBackPositionsAnOpenTransactionCouldFill(t *testing.T) {
	t.Parallel()
	for _, outcome := range []string{"commit", "rollback"} {
		t.Run(outcome, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, s, after := feedWithOneEvent(t)

			txA, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer txA.Rollback()
			err = s.WriteInTx(ctx, txA, func(tx store.Tx) error {
				return tx.EventAppend(ctx, store.Event{RunID: "r", At: base, Kind: "A"})
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Write(ctx, func(tx store.Tx) error {
				return tx.EventAppend(ctx, store.Event{RunID: "r", At: base, Kind: "B"})
			})
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				page, err := s.Reader().EventFeed(ctx, after, 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > 0 {
					t.Fatalf("while A is open the feed delivered %s at position %d", page[0].Kind, page[0].ID)
				}
				time.Sleep(5 * time.Millisecond)
			}
			want := []string{"A", "B"}
			if outcome == "commit" {
				err = txA.Commit()
			} else {
				err = txA.Rollback()
				want = []string{"B"}
			}
			if err != nil {
				t.Fatal(err)
			}
			got := waitFeed(t, s, after, len(want))
			var kinds []string
			for _, e := range got {
				kinds = append(kinds, e.Kind)
			}
			if !slices.Equal(kinds, want) {
				t.Fatalf("after A's %s the feed delivered %v, want %v", outcome, kinds, want)
			}
			if outcome == "commit" && got[0].ID >= got[1].ID {
				t.Fatalf("A's position %d is not below B's %d", got[0].ID, got[1].ID)
			}
		})
	}
}

// feedWithOneEvent opens a store in a fresh schema on a pool of the
// test's, with run r and one event of it delivered by the feed, and
// returns the pool, the store and the event's position.
func feedWithOneEvent(t *testing.T) (*sql.DB, *pgstore.Store, int64) {
	t.Helper()
	ctx := t.Context()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	t.Cleanup(func() { db.Close() })
	s, err := pgstore.OpenDB(ctx, db, pgstore.Options{Schema: freshSchema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	err = s.Write(ctx, func(tx store.Tx) error {
		_, err := tx.RunInsert(ctx, store.RunInsertParams{
			ID: "r", Workflow: flowtype.WorkflowKey{Name: "w", Version: 1}, Queue: "q", Input: []byte(`{}`), RunAt: base, Now: base,
		})
		if err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: "r", At: base, Kind: "before"})
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, s, waitFeed(t, s, 0, 1)[0].ID
}

// waitFeed reads the feed after after until it has n events.
func waitFeed(t *testing.T, s store.Store, after int64, n int) []store.Event {
	t.Helper()
	var got []store.Event
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < n {
		page, err := s.Reader().EventFeed(t.Context(), after, n-len(got))
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the feed delivered %d of %d events after position %d", len(got), n, after)
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		got = append(got, page...)
		after = page[len(page)-1].ID
	}
	return got
}

// TestFeedCommittedHearsOtherStores checks the feed's LISTEN/NOTIFY wake:
// a store's FeedCommitted channel closes when another store on the same
// schema (another process, as far as the database can tell) commits
// events, and not for a store on another schema.
func TestFeedCommittedHearsOtherStores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema()
	open := func(schema string) *pgstore.Store {
		s, err := pgstore.Open(ctx, needPG(t), pgstore.Options{Schema: schema, MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	follower, writer, other := open(schema), open(schema), open(freshSchema())
	appendOne := func(s *pgstore.Store, run string) {
		t.Helper()
		err := s.Write(ctx, func(tx store.Tx) error {
			if _, err := tx.RunInsert(ctx, store.RunInsertParams{
				ID: run, Workflow: flowtype.WorkflowKey{Name: "w", Version: 1}, Queue: "q", Input: []byte(`{}`), RunAt: base, Now: base,
			}); err != nil {
				return err
			}
			return tx.EventAppend(ctx, store.Event{RunID: run, At: base, Kind: "run_started"})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The first call starts the listener; its start wakes once.
	first := follower.FeedCommitted()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the feed listener did not start within 10s")
	}
	woken := follower.FeedCommitted()
	appendOne(other, "elsewhere")
	select {
	case <-woken:
		t.Fatal("woken by a commit in another schema")
	case <-time.After(300 * time.Millisecond):
	}
	appendOne(writer, "here")
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit of another store on the schema did not wake the follower within 10s")
	}
}

// TestFeedHoldsBackAPositionOfANewerOpenTransaction is the interleaving
// a snapshot's xmax does not cover: transaction F takes its transaction
// ID, S takes a newer one and draws position p, F draws p+1 and commits,
// and S stays open. While S is open, S's transaction ID is newer than
// every completed one, so no snapshot lists it as in progress (a
// snapshot's xmax is one past the newest completed transaction, not the
// newest handed out): a horizon read from snapshots alone declared p+1
// final, a follower delivered F's event and moved past p for good. The
// feed must deliver nothing until S ends, then S's event and F's, in
// that order.
func TestFeedHoldsBackAPositionOfANewerOpenTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, s, after := feedWithOneEvent(t)

	begin := func() (*sql.Tx, int64) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		var xid int64
		if err := tx.QueryRowContext(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid); err != nil {
			t.Fatal(err)
		}
		return tx, xid
	}
	appendIn := func(sqlTx *sql.Tx, kind string) {
		t.Helper()
		err := s.WriteInTx(ctx, sqlTx, func(tx store.Tx) error {
			return tx.EventAppend(ctx, store.Event{RunID: "r", At: base, Kind: kind})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	txF, xidF := begin()
	txS, xidS := begin()
	if xidS <= xidF {
		t.Fatalf("S's transaction ID %d is not newer than F's %d", xidS, xidF)
	}
	appendIn(txS, "S")
	appendIn(txF, "F")
	if err := txF.Commit(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		page, err := s.Reader().EventFeed(ctx, after, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 0 {
			t.Fatalf("while S is open the feed delivered %s at position %d", page[0].Kind, page[0].ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := txS.Commit(); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range waitFeed(t, s, after, 2) {
		kinds = append(kinds, e.Kind)
	}
	if want := []string{"S", "F"}; !slices.Equal(kinds, want) {
		t.Fatalf("after S committed the feed delivered %v, want %v", kinds, want)
	}
}
