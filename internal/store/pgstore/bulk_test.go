package pgstore_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestRunInsertManyCopies checks when a batch goes by COPY (bulk.go): a
// batch of its own transaction without unique keys does, and so do its
// run_started events; a small batch, a batch with a unique key, one with a
// taken ID and one in the caller's transaction go by the statement. The
// conformance suite (RunInsertManyLargeBatches) checks that both record
// the same.
func TestRunInsertManyCopies(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{})
	batch := func(prefix string, n int) []store.RunInsertParams {
		ps := make([]store.RunInsertParams, n)
		for i := range ps {
			ps[i] = store.RunInsertParams{
				ID: fmt.Sprintf("%s-%d", prefix, i), Workflow: flowtype.WorkflowKey{Name: "job", Version: 1},
				Queue: "q", Input: []byte("{}"), RunAt: base, Now: base,
			}
		}
		return ps
	}
	keyed := batch("keyed", 100)
	keyed[7].UniqueKey = "k"
	taken := batch("taken", 100)
	taken[99].ID = "big-0"
	for _, tc := range []struct {
		name   string
		ps     []store.RunInsertParams
		copied int
	}{
		{"large", batch("big", 100), 100},
		{"small", batch("small", 10), 0},
		{"with a unique key", keyed, 0},
		{"with a taken ID", taken, 0},
	} {
		var copied int
		err := s.Write(t.Context(), func(tx store.Tx) error {
			inserted, err := tx.RunInsertMany(t.Context(), tc.ps)
			if err != nil {
				return err
			}
			for i, ok := range inserted {
				if want := tc.ps[i].ID != "big-0" || tc.name == "large"; ok != want {
					t.Errorf("%s: run %s inserted %v, want %v", tc.name, tc.ps[i].ID, ok, want)
				}
			}
			copied = pgstore.CopiedRuns(tx)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if copied != tc.copied {
			t.Errorf("%s: %d runs inserted by COPY, want %d", tc.name, copied, tc.copied)
		}
	}
	db := pgstore.DB(s)
	sqlTx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlTx.Rollback()
	err = s.WriteInTx(t.Context(), sqlTx, func(tx store.Tx) error {
		if _, err := tx.RunInsertMany(t.Context(), batch("caller", 100)); err != nil {
			return err
		}
		if n := pgstore.CopiedRuns(tx); n != 0 {
			t.Errorf("caller's transaction: %d runs inserted by COPY, want 0", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlTx.Commit(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+s.Schema()+".runs").Scan(&n); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	if want := 100 + 10 + 100 + 99 + 100; n != want {
		t.Errorf("%d runs recorded, want %d", n, want)
	}
}
