package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestCleanersDoNotWaitForEachOther checks that while one transaction
// deletes a batch of finished runs, another engine's delete takes the next
// oldest runs at once, instead of waiting on the first's row locks for the
// whole batch only to find its runs gone; and that the two batches are
// separate and, once both committed, the runs that finished last remain.
func TestCleanersDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	schema := freshSchema()
	s := openStore(t, pgstore.Options{Schema: schema, MaxConns: 4})
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%02d", i)
	}
	insertRuns(t, s, "q", ids...)
	write(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.SQL().ExecContext(ctx, fmt.Sprintf(
			"UPDATE %s.runs SET status = 'completed', finished_at = $1 + seq", schema), base)
		return err
	})
	batch := store.RunDeleteFinishedParams{Status: flowtype.StatusCompleted, FinishedBefore: base + 1_000_000, Max: 4}
	left := func() []string {
		t.Helper()
		var left []string
		for _, id := range ids {
			if _, err := s.Reader().RunGet(t.Context(), id); err == nil {
				left = append(left, id)
			} else if !errors.Is(err, flowtype.ErrRunNotFound) {
				t.Fatal(err)
			}
		}
		return left
	}

	deleting, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	var firstN int
	go func() {
		first <- s.Write(t.Context(), func(tx store.Tx) error {
			var err error
			firstN, err = tx.RunDeleteFinished(t.Context(), batch)
			close(deleting)
			<-release // the batch's transaction stays open
			return err
		})
	}()
	select {
	case <-deleting:
	case err := <-first:
		t.Fatalf("the first cleaner's batch: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first cleaner's batch did not run within 30s")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var secondN int
	err := s.Write(ctx, func(tx store.Tx) error {
		var err error
		secondN, err = tx.RunDeleteFinished(ctx, batch)
		return err
	})
	took := time.Since(start)
	close(release)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second cleaner waited %v for the first's batch", took)
	}
	if err != nil || secondN != 4 {
		t.Fatalf("a second cleaner during the first's batch deleted %d runs, err %v; want the next 4", secondN, err)
	}
	if err := <-first; err != nil || firstN != 4 {
		t.Fatalf("the first cleaner's batch: %d runs, err %v; want 4", firstN, err)
	}
	if got := left(); !slices.Equal(got, []string{"r08", "r09"}) {
		t.Errorf("runs left after two batches of 4: %v; want the two that finished last, [r08 r09]", got)
	}
}
