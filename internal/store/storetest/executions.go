package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// executionTests are the conformance tests of store.ExecutionTx and
// ExecutionReader: continue-as-new.
func executionTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunContinueStartsTheNextExecution", testRunContinue},
		{"RunContinueIsFenced", testRunContinueFenced},
	}
}

// RunContinue makes the leased run pending and due with the new input and
// version, deletes its step records, retires the signals it received but
// leaves pending ones pending, and counts the execution, which
// ExecutionGet reads (1 before the first).
func testRunContinue(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	if ex, err := s.Reader().ExecutionGet(t.Context(), "r"); err != nil || ex.Number != 1 || ex.ContinuedAt != 0 {
		t.Fatalf("ExecutionGet before any continue = %+v, %v; want execution 1", ex, err)
	}
	for n := 2; n <= 3; n++ {
		now := base + int64(n)*1000
		c := claim(t, s, store.RunClaimParams{Queue: "q", Known: []flowtype.WorkflowKey{order1, order2}, Owner: "w", Max: 1, Now: now, LeaseExpiresAt: now + 30_000})
		if len(c) != 1 {
			t.Fatalf("execution %d: claimed %d runs, want r", n, len(c))
		}
		wait := store.StepKey{RunID: "r", Name: "flow.receive:go", Occurrence: 0}
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			for _, p := range []string{"1", "2"} {
				if _, err := tx.SignalSend(ctx, store.Signal{RunID: "r", Name: "go", Payload: []byte(p), SentAt: now}); err != nil {
					return err
				}
			}
			if err := tx.StepWait(ctx, store.StepBeginParams{Key: wait, Input: []byte(`{}`), Now: now}); err != nil {
				return err
			}
			sig, err := tx.SignalNext(ctx, "r", "go")
			if err != nil {
				return err
			}
			return tx.SignalConsume(ctx, sig.ID, wait.String())
		})
		var got int
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			got, err = tx.RunContinue(ctx, c[0].Lease(), store.RunContinueParams{Input: []byte(`{"next":true}`), Version: 2, Now: now + 1})
			return err
		})
		if got != n {
			t.Errorf("RunContinue = %d, want execution %d", got, n)
		}
		r := get(t, s, "r")
		if r.Status != flowtype.StatusPending || r.LeaseOwner != "" || r.RunAt != now+1 || string(r.Input) != `{"next":true}` || r.Version != 2 {
			t.Errorf("after continue: %+v, want pending, unleased, due at %d, with the new input on version 2", r, now+1)
		}
		if steps, err := s.Reader().StepList(t.Context(), "r"); err != nil || len(steps) != 0 {
			t.Errorf("steps after continue = %v, %v; want none", steps, err)
		}
		if ex, err := s.Reader().ExecutionGet(t.Context(), "r"); err != nil || ex.Number != n || ex.ContinuedAt != now+1 {
			t.Errorf("ExecutionGet = %+v, %v; want execution %d continued at %d", ex, err, n, now+1)
		}
	}
	sigs, err := s.Reader().SignalList(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	var retired, pending int
	for _, sig := range sigs {
		switch {
		case sig.ConsumedBy == "":
			pending++
		case strings.HasPrefix(sig.ConsumedBy, "execution 1: flow.receive:go#0"), strings.HasPrefix(sig.ConsumedBy, "execution 2: flow.receive:go#0"):
			retired++
		default:
			t.Errorf("signal %d consumed by %q, want it retired with its execution's number", sig.ID, sig.ConsumedBy)
		}
	}
	if retired != 2 || pending != 2 {
		t.Errorf("%d retired and %d pending signals, want 2 and 2", retired, pending)
	}
}

// RunContinue under a lease that is no longer current changes nothing.
func testRunContinueFenced(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	c := claim(t, s, store.RunClaimParams{Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 1, Now: base, LeaseExpiresAt: base + 30_000})
	if len(c) != 1 {
		t.Fatalf("claimed %d runs, want r", len(c))
	}
	stale := c[0].Lease()
	stale.Fence--
	var opErr error
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		_, opErr = tx.RunContinue(ctx, stale, store.RunContinueParams{Input: []byte(`1`), Version: 1, Now: base + 1})
		return nil
	})
	if !errors.Is(opErr, store.ErrLeaseLost) {
		t.Errorf("RunContinue with a stale lease: %v, want ErrLeaseLost", opErr)
	}
	if r := get(t, s, "r"); r.Status != flowtype.StatusRunning || string(r.Input) != `{"id":"r"}` {
		t.Errorf("after a stale continue: %+v, want it running as it was", r)
	}
	if ex, err := s.Reader().ExecutionGet(t.Context(), "r"); err != nil || ex.Number != 1 {
		t.Errorf("ExecutionGet = %+v, %v; want execution 1", ex, err)
	}
}
