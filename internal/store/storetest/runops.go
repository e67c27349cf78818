package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The writes of resets, forks and new due times (store.RunOpsTx).

func runOpsTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunReschedule", testRunReschedule},
		{"RunReset", testRunReset},
		{"StepDiscardAndClear", testStepDiscardAndClear},
		{"SignalRedeliver", testSignalRedeliver},
		{"RunForkInsertAndStepCopy", testRunForkInsertAndStepCopy},
	}
}

func testRunReschedule(t *testing.T, s store.Store) {
	reschedule := func(p store.RunRescheduleParams) bool {
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunReschedule(ctx, p)
			return err
		})
		return ok
	}
	r := runWithStatus(t, s, "later", flowtype.StatusPending)
	if reschedule(store.RunRescheduleParams{ID: r.ID, Fence: r.Fence + 1, RunAt: base + 5_000, Now: base + 1}) {
		t.Error("rescheduled at a fence the run is not at")
	}
	if !reschedule(store.RunRescheduleParams{ID: r.ID, Fence: r.Fence, RunAt: base + 5_000, Now: base + 1}) {
		t.Fatal("pending run not rescheduled")
	}
	if got := get(t, s, r.ID); got.RunAt != base+5_000 || got.UpdatedAt != base+1 || got.Status != flowtype.StatusPending {
		t.Errorf("rescheduled: run_at %d, updated %d, %s; want %d, %d, pending", got.RunAt, got.UpdatedAt, got.Status, base+5_000, base+1)
	}
	for _, st := range []flowtype.RunStatus{flowtype.StatusRunning, flowtype.StatusCompleted, flowtype.StatusSuspended} {
		r := runWithStatus(t, s, "not-pending-"+string(st), st)
		if reschedule(store.RunRescheduleParams{ID: r.ID, Fence: r.Fence, RunAt: base + 9_000, Now: base + 2}) {
			t.Errorf("%s run rescheduled", st)
		}
		if got := get(t, s, r.ID); got.RunAt != r.RunAt || got.UpdatedAt != r.UpdatedAt {
			t.Errorf("refused reschedule changed the %s run", st)
		}
	}
	if reschedule(store.RunRescheduleParams{ID: "nope", RunAt: base, Now: base}) {
		t.Error("unknown run rescheduled")
	}
}

func testRunReset(t *testing.T, s store.Store) {
	reset := func(p store.RunResetParams) bool {
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunReset(ctx, p)
			return err
		})
		return ok
	}
	failed := runWithStatus(t, s, "failed", flowtype.StatusFailed)
	if failed.Error == "" || failed.FinishedAt == 0 {
		t.Fatalf("test run not failed: %+v", failed)
	}
	for _, p := range []store.RunResetParams{
		{ID: failed.ID, Expected: flowtype.StatusCompleted, Fence: failed.Fence, Now: base + 10},
		{ID: failed.ID, Expected: flowtype.StatusFailed, Fence: failed.Fence + 1, Now: base + 10},
	} {
		if reset(p) {
			t.Errorf("reset with expected %s at fence %d applied to a failed run at fence %d", p.Expected, p.Fence, failed.Fence)
		}
	}
	if got := get(t, s, failed.ID); got.Status != flowtype.StatusFailed || got.UpdatedAt != failed.UpdatedAt {
		t.Fatal("a refused reset changed the run")
	}
	if !reset(store.RunResetParams{ID: failed.ID, Expected: flowtype.StatusFailed, Fence: failed.Fence, Deadline: base + 60_000, Now: base + 10}) {
		t.Fatal("failed run not reset")
	}
	got := get(t, s, failed.ID)
	if got.Status != flowtype.StatusPending || got.Error != "" || got.Reason != "" || got.Output != nil || got.FinishedAt != 0 ||
		got.CancelRequested || got.RunAt != base+10 || got.Deadline != base+60_000 || got.Fence != failed.Fence || got.LeaseOwner != "" {
		t.Errorf("reset run: %+v", got)
	}
	if got.WakeSeq <= failed.WakeSeq {
		t.Errorf("reset left wake_seq at %d", got.WakeSeq)
	}
	// The reset run is claimable again.
	if r := claimQueue(t, s, "queue-failed", "w2", base+20); r.ID != failed.ID || r.Fence != failed.Fence+1 {
		t.Errorf("claimed %s at fence %d after the reset", r.ID, r.Fence)
	}
	running := runWithStatus(t, s, "running", flowtype.StatusRunning)
	if reset(store.RunResetParams{ID: running.ID, Expected: flowtype.StatusRunning, Fence: running.Fence, Now: base + 10}) {
		t.Error("a leased run was reset")
	}
	if reset(store.RunResetParams{ID: "nope", Expected: flowtype.StatusFailed, Now: base}) {
		t.Error("unknown run reset")
	}
}

func stepCalls(t *testing.T, s store.Store, runID string) []string {
	t.Helper()
	steps, err := s.Reader().StepList(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, st := range steps {
		calls = append(calls, st.Key().Call()+"="+string(st.Status)+"/"+string(st.Compensation))
	}
	return calls
}

// threeSteps gives run id the completed, compensable steps a#0 and a#1
// (their compensations armed) and a failed step "b#c"#0, whose name holds
// the separator.
func threeSteps(t *testing.T, s store.Store, id string) {
	t.Helper()
	a0 := store.StepKey{RunID: id, Name: "a", Occurrence: 0}
	a1 := store.StepKey{RunID: id, Name: "a", Occurrence: 1}
	b := store.StepKey{RunID: id, Name: "b#c", Occurrence: 0}
	for i, k := range []store.StepKey{a0, a1, b} {
		beginStep(t, s, k, `1`, base+int64(i))
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, k := range []store.StepKey{a0, a1} {
			if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: k, Output: []byte(`2`), Compensable: true, Now: base + 5}); err != nil {
				return err
			}
		}
		if err := tx.StepFail(ctx, store.StepFailParams{Key: b, Error: "boom", Final: true, Now: base + 6}); err != nil {
			return err
		}
		return tx.StepCompensationArm(ctx, id)
	})
}

func testStepDiscardAndClear(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	threeSteps(t, s, "r")
	var n int64
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		// "b#0" is no call of the run: the name is "b#c".
		n, err = tx.StepDiscard(ctx, "r", []string{"a#1", "b#c#0", "b#0", "a#9"})
		return err
	})
	if n != 2 {
		t.Errorf("discarded %d steps, want 2", n)
	}
	if got, want := stepCalls(t, s, "r"), []string{"a#0=completed/pending"}; !slices.Equal(got, want) {
		t.Fatalf("after discard: %v, want %v", got, want)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.StepCompensationClear(ctx, "r") })
	if got, want := stepCalls(t, s, "r"), []string{"a#0=completed/none"}; !slices.Equal(got, want) {
		t.Errorf("after clear: %v, want %v", got, want)
	}
}

func testSignalRedeliver(t *testing.T, s store.Store) {
	ctx := t.Context()
	insert(t, s, newRun("r"))
	wait := store.StepKey{RunID: "r", Name: "flow.receive:go", Occurrence: 0}.String()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, key := range []string{"k1", "k2"} {
			if _, err := tx.SignalSend(ctx, store.Signal{RunID: "r", Name: "go", Payload: []byte(`1`), Key: key, SentAt: base}); err != nil {
				return err
			}
		}
		sigs, err := tx.SignalList(ctx, "r")
		if err != nil {
			return err
		}
		if err := tx.SignalConsume(ctx, sigs[0].ID, wait); err != nil {
			return err
		}
		return tx.SignalConsume(ctx, sigs[1].ID, "rejected:"+wait)
	})
	var n int64
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.SignalRedeliver(ctx, "r", []string{wait})
		return err
	})
	if n != 1 {
		t.Errorf("redelivered %d signals, want 1", n)
	}
	sigs, err := s.Reader().SignalList(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if sigs[0].ConsumedBy != "" || sigs[1].ConsumedBy != "rejected:"+wait {
		t.Errorf("after redelivery consumed by %q and %q, want the first again and the rejected one left", sigs[0].ConsumedBy, sigs[1].ConsumedBy)
	}
}

func testRunForkInsertAndStepCopy(t *testing.T, s store.Store) {
	p := newRun("orig")
	p.Queue, p.Priority, p.UniqueKey, p.Deadline = "queue-orig", 3, "k", base+10_000
	orig := insertWithStatus(t, s, p, flowtype.StatusFailed)
	threeSteps(t, s, "orig")
	fork := func(id string) bool {
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunForkInsert(ctx, store.RunForkParams{FromID: "orig", ID: id, Now: base + 1_000})
			if ok && err == nil {
				_, err = tx.StepCopy(ctx, "orig", id, []string{"a#0", "b#c#0"})
			}
			return err
		})
		return ok
	}
	if !fork("orig/fork-1") {
		t.Fatal("fork not inserted")
	}
	got := get(t, s, "orig/fork-1")
	if got.Status != flowtype.StatusPending || got.Workflow != orig.Workflow || got.Version != orig.Version || got.Queue != "queue-orig" ||
		got.Priority != 3 || string(got.Input) != string(orig.Input) || got.UniqueKey != "" || got.ParentID != "" ||
		got.Fence != 1 || got.RunAt != base+1_000 || got.Deadline != base+11_000 || got.CreatedAt != base+1_000 {
		t.Errorf("fork: %+v", got)
	}
	if got, want := stepCalls(t, s, "orig/fork-1"), []string{"a#0=completed/none", "b#c#0=failed/none"}; !slices.Equal(got, want) {
		t.Errorf("fork's steps: %v, want %v", got, want)
	}
	if got, want := stepCalls(t, s, "orig"), []string{"a#0=completed/pending", "a#1=completed/pending", "b#c#0=failed/none"}; !slices.Equal(got, want) {
		t.Errorf("the original's steps changed: %v, want %v", got, want)
	}
	if fork("orig/fork-1") {
		t.Error("a fork over a taken ID was inserted")
	}
	var ok bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		ok, err = tx.RunForkInsert(ctx, store.RunForkParams{FromID: "nope", ID: "nope/fork-1", Now: base})
		return err
	})
	if ok {
		t.Error("fork of an unknown run inserted")
	}
}
