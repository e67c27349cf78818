package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// debounceTests are the conformance tests of store.DebounceTx: the key's
// record, the guarded replacement of a debounced run, and one pending run
// per key when many transactions debounce it at once.
func debounceTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"DebounceRecord", testDebounceRecord},
		{"RunDebounceReplaceOnlyNeverClaimed", testRunDebounceReplace},
		{"DebounceConcurrentOneRun", testDebounceConcurrent},
	}
}

// DebounceGet reads what DebouncePut wrote, per workflow and key, a
// second put takes the key's row over, and deleting the run deletes it.
func testDebounceRecord(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"), newRun("b"), newRun("x"))
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, ok, err := tx.DebounceGet(ctx, "order", "k"); err != nil || ok {
			return fmt.Errorf("get of an unknown key: found %v, error %v", ok, err)
		}
		if err := tx.DebouncePut(ctx, store.DebouncePutParams{Workflow: "order", Key: "k", DebounceRecord: store.DebounceRecord{RunID: "a", FirstAt: base, MaxDelay: 60_000}}); err != nil {
			return err
		}
		if err := tx.DebouncePut(ctx, store.DebouncePutParams{Workflow: "other", Key: "k", DebounceRecord: store.DebounceRecord{RunID: "x", FirstAt: base}}); err != nil {
			return err
		}
		return nil
	})
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		got, ok, err := tx.DebounceGet(ctx, "order", "k")
		if err != nil || !ok || got != (store.DebounceRecord{RunID: "a", FirstAt: base, MaxDelay: 60_000}) {
			return fmt.Errorf("get: %+v, %v, %v", got, ok, err)
		}
		return tx.DebouncePut(ctx, store.DebouncePutParams{Workflow: "order", Key: "k", DebounceRecord: store.DebounceRecord{RunID: "b", FirstAt: base + 5}})
	})
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for wf, want := range map[string]store.DebounceRecord{"order": {RunID: "b", FirstAt: base + 5}, "other": {RunID: "x", FirstAt: base}} {
			got, ok, err := tx.DebounceGet(ctx, wf, "k")
			if err != nil || !ok || got != want {
				return fmt.Errorf("get of %s: %+v, %v, %v; want %+v", wf, got, ok, err, want)
			}
		}
		if err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: "x", Expected: flowtype.StatusPending, Status: flowtype.StatusCancelled, FinishedAt: base, Now: base}); err != nil {
			return err
		}
		deleted, err := tx.RunDeleteOne(ctx, "x")
		if err != nil || !deleted {
			return fmt.Errorf("delete run x: %v, %v", deleted, err)
		}
		if _, ok, err := tx.DebounceGet(ctx, "other", "k"); err != nil || ok {
			return fmt.Errorf("get after its run was deleted: found %v, error %v", ok, err)
		}
		return nil
	})
}

// RunDebounceReplace changes a pending run that was never claimed, and
// nothing of a claimed run or one asked to cancel.
func testRunDebounceReplace(t *testing.T, s store.Store) {
	insert(t, s, newRun("claimed"))
	claim(t, s, store.RunClaimParams{Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 1, Now: base, LeaseExpiresAt: base + 1000})
	insert(t, s, newRun("fresh"), newRun("cancelling"))
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.RunRequestCancel(ctx, "cancelling", base)
		return err
	})
	replace := func(id string) bool {
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunDebounceReplace(ctx, store.RunDebounceReplaceParams{ID: id, Input: []byte(`"new"`), RunAt: base + 30_000, Now: base + 1})
			return err
		})
		return ok
	}
	if !replace("fresh") {
		t.Errorf("replace of a pending run never claimed: reported false")
	}
	if r := get(t, s, "fresh"); string(r.Input) != `"new"` || r.RunAt != base+30_000 || r.Status != flowtype.StatusPending {
		t.Errorf("replaced run: input %s, run_at %d, status %s", r.Input, r.RunAt, r.Status)
	}
	for _, id := range []string{"claimed", "cancelling", "missing"} {
		if replace(id) {
			t.Errorf("replace of run %s: reported true", id)
		}
	}
	if r := get(t, s, "claimed"); string(r.Input) == `"new"` || r.RunAt == base+30_000 {
		t.Errorf("claimed run was replaced: input %s, run_at %d", r.Input, r.RunAt)
	}
}

// Transactions that debounce one key at once, each taking DebounceLock,
// reading the key and then inserting a run or replacing the key's run,
// leave one run.
func testDebounceConcurrent(t *testing.T, s store.Store) {
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("run%d", i)
			input := fmt.Appendf(nil, "%d", i)
			err := s.Write(t.Context(), func(tx store.Tx) error {
				ctx := t.Context()
				if err := tx.DebounceLock(ctx, "order", "k"); err != nil {
					return err
				}
				rec, ok, err := tx.DebounceGet(ctx, "order", "k")
				if err != nil {
					return err
				}
				if ok {
					replaced, err := tx.RunDebounceReplace(ctx, store.RunDebounceReplaceParams{ID: rec.RunID, Input: input, RunAt: base + 1000, Now: base})
					if err != nil || replaced {
						return err
					}
				}
				p := newRun(id)
				p.Input = input
				if _, err := tx.RunInsert(ctx, p); err != nil {
					return err
				}
				return tx.DebouncePut(ctx, store.DebouncePutParams{Workflow: "order", Key: "k", DebounceRecord: store.DebounceRecord{RunID: id, FirstAt: base}})
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("debounce: %v", err)
		}
	}
	runs, err := s.Reader().RunList(t.Context(), store.RunListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs after %d concurrent debounces of one key, want 1", len(runs), n)
	}
}
