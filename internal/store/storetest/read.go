package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// readTests check Store.Read: every read of fn sees one snapshot, so a
// view made of several reads (a run with its steps and history, as
// flow.Engine.Inspect shows it) is of one instant. Exercise runs them with
// the others.
func readTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ReadIsOneSnapshot", testReadIsOneSnapshot},
		{"ReadReturnsFnError", testReadReturnsFnError},
	}
}

// A write committed between two reads of one Read is seen by neither: the
// run read after it is still the run read before it, and the step and
// event it added are not there. Reads outside Read then see it.
func testReadIsOneSnapshot(t *testing.T, s store.Store) {
	ctx := t.Context()
	insert(t, s, newRun("r"))
	key := store.StepKey{RunID: "r", Name: "charge"}
	err := s.Read(ctx, func(r store.Reader) error {
		before, err := r.RunGet(ctx, "r")
		if err != nil {
			return err
		}
		// A claim of the run, its first step and an event, committed while
		// the snapshot is open.
		if got := claim(t, s, store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 1, Now: base + 1, LeaseExpiresAt: base + 30_000,
		}); len(got) != 1 {
			t.Fatalf("claimed %d runs, want 1", len(got))
		}
		beginStep(t, s, key, `{}`, base+2)
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.EventAppend(ctx, store.Event{RunID: "r", At: base + 3, Kind: "test.event"})
		})

		after, err := r.RunGet(ctx, "r")
		if err != nil {
			return err
		}
		if after.Status != before.Status || after.LeaseOwner != before.LeaseOwner || after.Fence != before.Fence {
			t.Errorf("run read again in the snapshot: %s, lease %q, fence %d; want it as first read: %s, lease %q, fence %d",
				after.Status, after.LeaseOwner, after.Fence, before.Status, before.LeaseOwner, before.Fence)
		}
		steps, err := r.StepList(ctx, "r")
		if err != nil {
			return err
		}
		if len(steps) != 0 {
			t.Errorf("the snapshot shows %d step(s) begun after it was taken, want none", len(steps))
		}
		events, err := r.EventList(ctx, "r")
		if err != nil {
			return err
		}
		for _, ev := range events {
			if ev.Kind == "test.event" {
				t.Errorf("the snapshot shows an event appended after it was taken: %+v", ev)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if r := get(t, s, "r"); r.Status != flowtype.StatusRunning || r.LeaseOwner != "w" {
		t.Errorf("run after the snapshot: %s, lease %q; want running, w", r.Status, r.LeaseOwner)
	}
	if steps, err := s.Reader().StepList(ctx, "r"); err != nil || len(steps) != 1 {
		t.Errorf("steps after the snapshot = %d, %v; want 1", len(steps), err)
	}
}

// Read returns fn's error as it is, and a read of an unknown run in it is
// ErrRunNotFound, as outside it.
func testReadReturnsFnError(t *testing.T, s store.Store) {
	ctx := t.Context()
	err := s.Read(ctx, func(r store.Reader) error {
		_, err := r.RunGet(ctx, "missing")
		return err
	})
	if !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("Read of an unknown run: %v, want ErrRunNotFound", err)
	}
	if err := s.Read(ctx, func(store.Reader) error { return errAbort }); err != errAbort {
		t.Errorf("Read = %v, want fn's error %v as it is", err, errAbort)
	}
}
