package flowpg_test

import (
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// TestFollowerWaitsForANewerOpenStart is the change feed's report on the
// public API: application transaction F begins and takes its transaction
// ID, transaction S begins after it and starts run s with flow.StartTx,
// drawing feed position p, F starts run f (p+1) and commits, and S
// commits 500 ms later. A follower must deliver s's run_started and then
// f's, and nothing of f while S is open: at dedb742 it delivered f's at
// p+1 and never s's.
func TestFollowerWaitsForANewerOpenStart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn, s := schema(t)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := flowpg.New(ctx, db, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowpg.Options{Schema: s})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.Register(e, twice)

	changes := make(chan flow.Change, 16)
	go func() {
		for c, err := range e.Changes(ctx, &flow.ChangesOptions{Follow: true, PollInterval: 5 * time.Millisecond}) {
			if err != nil {
				return // the test's context ended
			}
			changes <- c
		}
	}()

	begin := func() *sql.Tx {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback() })
		if _, err := tx.ExecContext(ctx, "SELECT pg_current_xact_id()"); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	start := func(tx *sql.Tx, id string) {
		t.Helper()
		if _, err := flow.StartTx(ctx, e, tx, twice, 1, &flow.StartOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	txF := begin()
	txS := begin()
	start(txS, "s")
	start(txF, "f")
	if err := txF.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-changes:
		t.Fatalf("while S was open the follower delivered %s of run %s at position %d", c.Kind, c.RunID, c.Position)
	case <-time.After(500 * time.Millisecond):
	}
	if err := txS.Commit(); err != nil {
		t.Fatal(err)
	}
	var runs []string
	for len(runs) < 2 {
		select {
		case c := <-changes:
			runs = append(runs, c.RunID)
		case <-time.After(10 * time.Second):
			t.Fatalf("the follower delivered %v within 10s of S's commit, want the starts of s and f", runs)
		}
	}
	if want := []string{"s", "f"}; !slices.Equal(runs, want) {
		t.Fatalf("the follower delivered the starts of %v, want %v", runs, want)
	}
}
