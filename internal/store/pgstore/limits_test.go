package pgstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// The one-statement claim of a queue with a global concurrency limit
// claims no more than the limit leaves, nothing once it is full, and
// nothing (leaving the claim to the careful path) when the queue's limits
// are more than a global concurrency, or missing.
func TestClaimAndBeginLimitedHoldsTheLimit(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NoWakes: true})
	ctx := t.Context()
	job := flowtype.WorkflowKey{Name: "job", Version: 1}
	var ps []store.RunInsertParams
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5"} {
		ps = append(ps, store.RunInsertParams{ID: id, Workflow: job, RunAt: base})
	}
	insertQueued(t, s, ps...)
	setLimits := func(l flowtype.QueueLimits) {
		t.Helper()
		if err := s.Write(ctx, func(tx store.Tx) error { return tx.QueueLimitsSet(ctx, "q", l, base) }); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(owner string, max int) int {
		t.Helper()
		got, err := s.ClaimAndBeginLimited(ctx, claimParams(owner, max))
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if n := claim("w0", 10); n != 0 {
		t.Errorf("no limits row: claimed %d, want 0 (the careful path decides)", n)
	}
	setLimits(flowtype.QueueLimits{Concurrency: 2})
	if n := claim("w1", 10); n != 2 {
		t.Errorf("limit 2, none leased: claimed %d, want 2", n)
	}
	if n := claim("w2", 10); n != 0 {
		t.Errorf("limit 2, 2 leased: claimed %d, want 0", n)
	}
	setLimits(flowtype.QueueLimits{Concurrency: 3})
	if n := claim("w3", 10); n != 1 {
		t.Errorf("limit raised to 3, 2 leased: claimed %d, want 1", n)
	}
	setLimits(flowtype.QueueLimits{Concurrency: 10, Fair: true})
	if n := claim("w4", 10); n != 0 {
		t.Errorf("fair claims: claimed %d, want 0 (not a global concurrency alone)", n)
	}
	counts, err := s.Reader().RunLeasedCounts(ctx, "q")
	if err != nil || counts[""] != 3 {
		t.Errorf("leased runs = %v, %v; want 3", counts, err)
	}
}

// Claimers racing the one-statement limited claim never lease more than
// the limit between them: one whose snapshot predates another's commit
// claims nothing (claim_seq moved) instead of counting from a stale view.
func TestClaimAndBeginLimitedRace(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NoWakes: true})
	ctx := t.Context()
	job := flowtype.WorkflowKey{Name: "job", Version: 1}
	var ps []store.RunInsertParams
	for i := range 40 {
		ps = append(ps, store.RunInsertParams{ID: fmt.Sprintf("r%02d", i), Workflow: job, RunAt: base})
	}
	insertQueued(t, s, ps...)
	if err := s.Write(ctx, func(tx store.Tx) error {
		return tx.QueueLimitsSet(ctx, "q", flowtype.QueueLimits{Concurrency: 3}, base)
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 5 {
				got, err := s.ClaimAndBeginLimited(ctx, claimParams(fmt.Sprintf("w%d", w), 10))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += len(got)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total > 3 {
		t.Errorf("racing claimers leased %d runs under a limit of 3", total)
	}
	if total == 0 {
		t.Error("no claimer leased anything")
	}
}
