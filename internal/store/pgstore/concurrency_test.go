package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// These tests check the guarantees SQLite gets from its single writer and
// PostgreSQL must get from row locks (see the store package doc), with
// transactions that really run side by side on separate connections, which
// the conformance suite cannot force on a single-writer store.

var order1 = flowtype.WorkflowKey{Name: "order", Version: 1}

func write(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	ctx := t.Context()
	if err := s.Write(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func insertRuns(t *testing.T, s store.Store, queue string, ids ...string) {
	t.Helper()
	write(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, id := range ids {
			ok, err := tx.RunInsert(ctx, store.RunInsertParams{
				ID: id, Workflow: order1, Queue: queue, Input: []byte(`{}`), RunAt: base, Now: base,
			})
			if err != nil || !ok {
				return fmt.Errorf("insert %s: %v, %w", id, ok, err)
			}
		}
		return nil
	})
}

// TestClaimersNeverShareARun runs claimers on separate connections against
// one queue until it is drained: every run is claimed exactly once.
func TestClaimersNeverShareARun(t *testing.T) {
	t.Parallel()
	const claimers, runs = 8, 300
	s := openStore(t, pgstore.Options{MaxConns: claimers})
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%04d", i)
	}
	insertRuns(t, s, "q", ids...)

	var mu sync.Mutex
	owners := map[string][]string{} // run → the claimers that got it
	g, ctx := errgroup.WithContext(t.Context())
	for c := range claimers {
		owner := fmt.Sprintf("w%d", c)
		g.Go(func() error {
			for {
				var got []store.Run
				err := s.Write(ctx, func(tx store.Tx) error {
					var err error
					got, err = tx.RunClaim(ctx, store.RunClaimParams{
						Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: owner, Max: 3,
						Now: base, LeaseExpiresAt: base + 60_000,
					})
					if err != nil {
						return err
					}
					// Hold the locks a little, so that claimers overlap.
					time.Sleep(time.Millisecond)
					return nil
				})
				if err != nil {
					return fmt.Errorf("claimer %s: %w", owner, err)
				}
				mu.Lock()
				for _, r := range got {
					owners[r.ID] = append(owners[r.ID], owner)
					if r.LeaseOwner != owner || r.Fence != 1 {
						mu.Unlock()
						return fmt.Errorf("claimer %s got run %s with owner %s, fence %d", owner, r.ID, r.LeaseOwner, r.Fence)
					}
				}
				mu.Unlock()
				if len(got) > 0 {
					continue
				}
				// Nothing claimable, or everything left is locked by
				// others for the moment: done once no run is pending.
				counts, err := s.Reader().RunCountByStatus(ctx)
				if err != nil {
					return err
				}
				if counts[flowtype.StatusPending] == 0 {
					return nil
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(owners) != runs {
		t.Errorf("%d runs claimed, want %d", len(owners), runs)
	}
	for id, o := range owners {
		if len(o) != 1 {
			t.Errorf("run %s claimed by %v", id, o)
		}
	}
	for _, id := range ids {
		r, err := s.Reader().RunGet(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if want := owners[id]; len(want) != 1 || r.LeaseOwner != want[0] || r.Fence != 1 || r.Status != flowtype.StatusRunning {
			t.Errorf("run %s: owner %s, fence %d, status %s; claimed by %v", id, r.LeaseOwner, r.Fence, r.Status, want)
		}
	}
}

// claimOne inserts a run in its own queue and claims it at base with a
// lease that expires at base+30s.
func claimOne(t *testing.T, s store.Store, id string) store.Lease {
	t.Helper()
	insertRuns(t, s, "queue-"+id, id)
	var got []store.Run
	write(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		got, err = tx.RunClaim(ctx, store.RunClaimParams{
			Queue: "queue-" + id, Known: []flowtype.WorkflowKey{order1}, Owner: "worker", Max: 1,
			Now: base, LeaseExpiresAt: base + 30_000,
		})
		return err
	})
	if len(got) != 1 {
		t.Fatalf("claim %s: got %d runs", id, len(got))
	}
	return got[0].Lease()
}

// afterExpiry is a time at which the lease claimOne took has expired.
const afterExpiry = base + 60_000

// TestLeaseCheckHoldsAgainstRescue: once a transaction proved its lease
// (RunLeaseCheck), a rescuer running before it commits leaves the run
// alone, even though the lease has expired; after the commit it may rescue
// it. So the worker's writes and a rescue never both win.
func TestLeaseCheckHoldsAgainstRescue(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{})
	l := claimOne(t, s, "a")

	checked := make(chan struct{})
	rescueDone := make(chan []store.RescuedRun, 1)
	go func() {
		<-checked
		var rescued []store.RescuedRun
		err := s.Write(context.Background(), func(tx store.Tx) error {
			var err error
			rescued, err = tx.RunRescue(context.Background(), afterExpiry, 10)
			return err
		})
		if err != nil {
			t.Errorf("rescue: %v", err)
		}
		rescueDone <- rescued
	}()

	var rescuedMeanwhile []store.RescuedRun
	rescueReturned := false
	write(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.RunLeaseCheck(ctx, l); err != nil {
			return err
		}
		close(checked)
		// Give the rescuer every chance to run before this commit. It
		// must not wait for the row either: it skips it.
		select {
		case rescuedMeanwhile = <-rescueDone:
			rescueReturned = true
		case <-time.After(5 * time.Second):
		}
		return tx.EventAppend(ctx, store.Event{RunID: l.RunID, At: afterExpiry, Kind: "step.completed"})
	})
	if !rescueReturned {
		t.Fatal("the rescuer waited for the worker's transaction instead of skipping its row")
	}
	if len(rescuedMeanwhile) != 0 {
		t.Fatalf("rescuer took run %v while a transaction that checked its lease was open", rescuedMeanwhile)
	}
	// Committed: the expired lease is now the rescuer's to take.
	var rescued []store.RescuedRun
	write(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		rescued, err = tx.RunRescue(ctx, afterExpiry, 10)
		return err
	})
	if len(rescued) != 1 || rescued[0].ID != l.RunID || rescued[0].Fence != l.Fence {
		t.Fatalf("rescue after the worker's commit: %+v, want run %s", rescued, l.RunID)
	}
}

// TestRescueBeforeLeaseCheck is the other order: a rescue in flight makes a
// lease check wait for it, and then fail with ErrLeaseLost.
func TestRescueBeforeLeaseCheck(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{})
	l := claimOne(t, s, "a")

	rescued := make(chan struct{})
	checkErr := make(chan error, 1)
	go func() {
		<-rescued
		checkErr <- s.Write(context.Background(), func(tx store.Tx) error {
			_, err := tx.RunLeaseCheck(context.Background(), l)
			return err
		})
	}()
	write(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.RunRescue(ctx, afterExpiry, 10)
		if err != nil {
			return err
		}
		if len(got) != 1 {
			return fmt.Errorf("rescued %+v, want run %s", got, l.RunID)
		}
		close(rescued)
		select {
		case err := <-checkErr:
			return fmt.Errorf("lease check returned %v before the rescue committed", err)
		case <-time.After(200 * time.Millisecond):
		}
		return nil
	})
	if err := <-checkErr; !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("lease check after a rescue: %v, want ErrLeaseLost", err)
	}
}

// TestLeaseCheckRescueRace races workers' lease checks against rescuers,
// with no forced order, on runs whose leases have expired. A worker's
// transaction appends a "proof" event after its lease check; a rescuer's
// appends a "rescued" event for each run it rescued. Each transaction holds
// the run's row from its check (or its rescue) to its commit, so their
// events are appended in the order they commit: a proof appended after the
// run's rescue would be a worker writing under a lease a rescuer had taken
// away, the two both winning.
func TestLeaseCheckRescueRace(t *testing.T) {
	t.Parallel()
	const runs = 20
	s := openStore(t, pgstore.Options{MaxConns: 8})
	leases := make([]store.Lease, runs)
	for i := range leases {
		leases[i] = claimOne(t, s, fmt.Sprintf("r%02d", i))
	}
	g, ctx := errgroup.WithContext(t.Context())
	for _, l := range leases {
		g.Go(func() error {
			for {
				err := s.Write(ctx, func(tx store.Tx) error {
					if _, err := tx.RunLeaseCheck(ctx, l); err != nil {
						return err
					}
					time.Sleep(time.Millisecond) // widen the window a rescue could slip into
					return tx.EventAppend(ctx, store.Event{RunID: l.RunID, At: afterExpiry, Kind: "proof"})
				})
				if errors.Is(err, store.ErrLeaseLost) {
					return nil
				}
				if err != nil {
					return err
				}
			}
		})
	}
	for range 3 {
		g.Go(func() error {
			for {
				var got []store.RescuedRun
				err := s.Write(ctx, func(tx store.Tx) error {
					var err error
					if got, err = tx.RunRescue(ctx, afterExpiry, 5); err != nil {
						return err
					}
					for _, r := range got {
						if err := tx.EventAppend(ctx, store.Event{RunID: r.ID, At: afterExpiry, Kind: "rescued"}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				counts, err := s.Reader().RunCountByStatus(ctx)
				if err != nil {
					return err
				}
				if counts[flowtype.StatusRunning] == 0 {
					return nil
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		evs, err := s.Reader().EventList(t.Context(), l.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		rescued := 0
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
			switch {
			case e.Kind == "rescued":
				rescued++
			case e.Kind == "proof" && rescued > 0:
				t.Errorf("run %s: a proof committed after the rescue: %v", l.RunID, kinds)
			}
		}
		if rescued != 1 {
			t.Errorf("run %s rescued %d times, want once: %v", l.RunID, rescued, kinds)
		}
	}
}
