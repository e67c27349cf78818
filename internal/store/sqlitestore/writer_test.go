package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// longInsert inserts rows enough to keep SQLite busy for far longer than
// the 20 ms timeout its caller's context gets.
const longInsert = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO filler SELECT x FROM c`

// TestInterruptedCallerFailsNoOther puts a caller whose context ends in the
// middle of a long statement into one group-commit batch with 20 innocent
// callers. An interrupted statement rolls back the whole shared
// transaction, so before the writer guarded against it every innocent
// caller failed with "rollback to savepoint: … no such savepoint". Now the
// statement runs detached from the context on Open's writer, and on a pool
// the caller opened (OpenDB, where it is interrupted) the innocent callers
// are retried: in both, only the caller whose context ended fails.
func TestInterruptedCallerFailsNoOther(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T, path string) store.Store
	}{
		{"Open", func(t *testing.T, path string) store.Store { return openStore(t, path, sqlitestore.Options{}) }},
		{"OpenDB", func(t *testing.T, path string) store.Store {
			s, err := sqlitestore.OpenDB(t.Context(), openDSN(t, path, ""), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := tc.open(t, filepath.Join(t.TempDir(), "flowlite.db"))
			if err := s.Write(ctx, func(tx store.Tx) error {
				_, err := tx.SQL().ExecContext(ctx, "CREATE TABLE filler (x INTEGER)")
				return err
			}); err != nil {
				t.Fatal(err)
			}

			// Hold the writer so that the callers below queue up and then
			// commit in one batch.
			hold, held := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				_ = s.Write(ctx, func(tx store.Tx) error { close(held); <-hold; return nil })
			})
			<-held

			const innocents = 20
			errs := make([]error, innocents)
			for i := range innocents {
				wg.Go(func() {
					errs[i] = s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, fmt.Sprintf("r%02d", i)) })
				})
			}
			var slowErr error
			var slowTook time.Duration
			wg.Go(func() {
				slowCtx, cancel := context.WithCancel(ctx)
				defer cancel()
				slowErr = s.Write(slowCtx, func(tx store.Tx) error {
					// The context ends 20 ms into the statement, as a step's
					// Timeout would.
					time.AfterFunc(20*time.Millisecond, cancel)
					start := time.Now()
					_, err := tx.SQL().ExecContext(slowCtx, longInsert)
					slowTook = time.Since(start)
					return err
				})
			})
			time.Sleep(50 * time.Millisecond) // let every caller queue
			close(hold)
			wg.Wait()

			failed := 0
			for i, err := range errs {
				if err != nil {
					failed++
					if failed <= 3 {
						t.Errorf("innocent caller %d failed: %v", i, err)
					}
				}
			}
			if failed > 0 {
				t.Errorf("%d of %d innocent callers failed", failed, innocents)
			}
			if slowErr == nil {
				t.Errorf("the caller whose context ended succeeded (its statement took %s)", slowTook)
			} else if tc.name == "Open" && !errors.Is(slowErr, context.Canceled) {
				t.Errorf("slow caller: %v, want context.Canceled", slowErr)
			}
			runs, err := s.Reader().RunList(ctx, store.RunListParams{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != innocents {
				t.Errorf("%d runs committed, want %d", len(runs), innocents)
			}
			var filler int
			if err := s.Write(ctx, func(tx store.Tx) error {
				return tx.SQL().QueryRowContext(ctx, "SELECT count(*) FROM filler").Scan(&filler)
			}); err != nil {
				t.Fatal(err)
			}
			if filler != 0 {
				t.Errorf("filler has %d rows: the failed caller's writes committed", filler)
			}
			t.Logf("innocent failures %d/%d; slow caller took %s and got %v", failed, innocents, slowTook, slowErr)
		})
	}
}
