package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func operatorTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunDeleteOne", testRunDeleteOne},
		{"RunMakeDue", testRunMakeDue},
		{"StepSnooze", testStepSnooze},
		{"UniqueStates", testUniqueStates},
		{"UniqueStatesConcurrent", testUniqueStatesConcurrent},
		{"UniqueHoldStates", testUniqueHoldStates},
		{"RunRequeueHoldingFailed", testRunRequeueHoldingFailed},
	}
}

// riverStates are the unfinished states plus completed.
func riverStates() []flowtype.RunStatus {
	return append(store.UnfinishedStates(), flowtype.StatusCompleted)
}

func deleteOne(t *testing.T, s store.Store, id string) bool {
	t.Helper()
	var ok bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		ok, err = tx.RunDeleteOne(ctx, id)
		return err
	})
	return ok
}

func testRunDeleteOne(t *testing.T, s store.Store) {
	ctx := t.Context()
	done := runWithStatus(t, s, "done", flowtype.StatusCompleted)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.StepBegin(ctx, store.StepBeginParams{Key: store.StepKey{RunID: done.ID, Name: "a"}, Input: []byte(`1`), Now: base}); err != nil {
			return err
		}
		if _, err := tx.SignalSend(ctx, store.Signal{RunID: done.ID, Name: "go", Payload: []byte(`1`), SentAt: base}); err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: done.ID, At: base, Kind: "x"})
	})
	if !deleteOne(t, s, done.ID) {
		t.Fatal("finished run not deleted")
	}
	if _, err := s.Reader().RunGet(ctx, done.ID); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("deleted run: %v, want ErrRunNotFound", err)
	}
	steps, _ := s.Reader().StepList(ctx, done.ID)
	events, _ := s.Reader().EventList(ctx, done.ID)
	signals, _ := s.Reader().SignalList(ctx, done.ID)
	if len(steps)+len(events)+len(signals) != 0 {
		t.Errorf("left behind: %d steps, %d events, %d signals", len(steps), len(events), len(signals))
	}
	for _, st := range []flowtype.RunStatus{flowtype.StatusPending, flowtype.StatusRunning, flowtype.StatusCompensating, flowtype.StatusSuspended} {
		r := runWithStatus(t, s, "live-"+string(st), st)
		if deleteOne(t, s, r.ID) {
			t.Errorf("%s run deleted", st)
		}
		if got := get(t, s, r.ID); got.Status != st || got.UpdatedAt != r.UpdatedAt {
			t.Errorf("refused delete changed the %s run", st)
		}
	}
	if deleteOne(t, s, "nope") {
		t.Error("unknown run reported deleted")
	}
	// A finished child of an unfinished parent stays; once the parent
	// finished, it goes.
	parent := runIn(t, s, "parent")
	child := newRun("child")
	child.Queue, child.ParentID = "queue-child", parent.ID
	insertWithStatus(t, s, child, flowtype.StatusFailed)
	if deleteOne(t, s, "child") {
		t.Error("failed child of a pending parent deleted")
	}
	r := claimQueue(t, s, parent.Queue, "w", base)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunFinish(ctx, r.Lease(), store.RunFinishParams{Status: flowtype.StatusCompleted, FinishedAt: base + 1, Now: base + 1})
	})
	if !deleteOne(t, s, "child") {
		t.Error("failed child of a finished parent not deleted")
	}
}

func testRunMakeDue(t *testing.T, s store.Store) {
	makeDue := func(id string, now int64) bool {
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunMakeDue(ctx, id, now)
			return err
		})
		return ok
	}
	later := newRun("later")
	later.RunAt = base + 3_600_000
	insert(t, s, later)
	if !makeDue("later", base+10) {
		t.Fatal("delayed run not made due")
	}
	if r := get(t, s, "later"); r.RunAt != base+10 || r.UpdatedAt != base+10 || r.Status != flowtype.StatusPending {
		t.Errorf("made due: run_at %d, updated %d, %s; want %d, pending", r.RunAt, r.UpdatedAt, r.Status, base+10)
	}
	if makeDue("later", base+20) {
		t.Error("a run due already was made due again")
	}
	for _, st := range []flowtype.RunStatus{flowtype.StatusRunning, flowtype.StatusCompleted, flowtype.StatusSuspended} {
		r := runWithStatus(t, s, "not-pending-"+string(st), st)
		if makeDue(r.ID, base-1_000) {
			t.Errorf("%s run made due", st)
		}
		if got := get(t, s, r.ID); got.RunAt != r.RunAt || got.UpdatedAt != r.UpdatedAt {
			t.Errorf("refused make-due changed the %s run", st)
		}
	}
	if makeDue("nope", base) {
		t.Error("unknown run made due")
	}
}

func testStepSnooze(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	k := store.StepKey{RunID: "r", Name: "poll", Occurrence: 0}
	for range 3 {
		if n := beginStep(t, s, k, `{}`, base); n != 1 {
			t.Fatalf("StepBegin after snoozes = %d, want 1", n)
		}
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.StepSnooze(ctx, store.StepSnoozeParams{Key: k, Detail: "snoozed for 1s", Now: base + 5})
		})
		if st := step(t, s, k); st.Status != store.StepRetrying || st.Attempts != 0 || st.Error != "snoozed for 1s" {
			t.Errorf("snoozed step: %+v; want retrying, 0 attempts, the detail", st)
		}
	}
	expectErr(t, s, flowtype.ErrConflict, "StepSnooze of a step that is not running", func(ctx context.Context, tx store.Tx) error {
		return tx.StepSnooze(ctx, store.StepSnoozeParams{Key: k, Detail: "again", Now: base + 6})
	})
	if st := step(t, s, k); st.Error != "snoozed for 1s" || st.Attempts != 0 {
		t.Errorf("refused snooze changed the step: %+v", st)
	}
}

func testUniqueStates(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Completed is listed: the completed run holds the key for good.
	done := keyed("done", "k-done")
	done.UniqueStates = riverStates()
	insertWithStatus(t, s, done, flowtype.StatusCompleted)
	if insertReports(t, s, keyed("dup-done", "k-done")) {
		t.Error("run inserted while a completed run listing completed holds its key")
	}
	if got, err := s.Reader().RunGetKeyHolder(ctx, order1.Name, "k-done"); err != nil || got.ID != "done" {
		t.Errorf("holder: %q, %v; want done", got.ID, err)
	}
	// Failed and cancelled are not listed: those runs free the key.
	for _, st := range []flowtype.RunStatus{flowtype.StatusFailed, flowtype.StatusCancelled} {
		key := "k-" + string(st)
		p := keyed("was-"+string(st), key)
		p.UniqueStates = riverStates()
		insertWithStatus(t, s, p, st)
		if _, err := s.Reader().RunGetKeyHolder(ctx, order1.Name, key); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("holder of a key whose run is %s: %v, want ErrRunNotFound", st, err)
		}
		if !insertReports(t, s, keyed("after-"+string(st), key)) {
			t.Errorf("run not inserted although the run holding its key is %s", st)
		}
	}
	// Unknown states, and sets lacking an unfinished state, are refused.
	for _, states := range [][]flowtype.RunStatus{
		{flowtype.StatusPending, "done"},
		{flowtype.StatusPending, flowtype.StatusRunning, flowtype.StatusCompleted},
	} {
		p := keyed(fmt.Sprint("bad-", len(states)), "k-bad")
		p.UniqueStates = states
		err := s.Write(ctx, func(tx store.Tx) error {
			_, err := tx.RunInsert(ctx, p)
			return err
		})
		if err == nil {
			t.Errorf("insert with unique states %v: no error", states)
		}
		if _, err := s.Reader().RunGet(ctx, p.ID); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("insert with unique states %v recorded the run", states)
		}
	}
}

func testUniqueStatesConcurrent(t *testing.T, s store.Store) {
	// A completed run listing completed holds the key: concurrent inserts
	// all do nothing. Once it is failed (not listed), exactly one gets in.
	for _, st := range []flowtype.RunStatus{flowtype.StatusCompleted, flowtype.StatusFailed} {
		key := "k-" + string(st)
		p := keyed("holder-"+string(st), key)
		p.UniqueStates = riverStates()
		insertWithStatus(t, s, p, st)
		const writers = 12
		ps := make([]store.RunInsertParams, writers)
		for i := range ps {
			ps[i] = keyed(fmt.Sprintf("%s-%d", st, i), key)
			ps[i].UniqueStates = riverStates()
		}
		won := insertConcurrently(t, s, ps)
		want := map[flowtype.RunStatus]int{flowtype.StatusCompleted: 0, flowtype.StatusFailed: 1}[st]
		if len(won) != want {
			t.Errorf("holder %s: %d runs inserted (%v), want %d", st, len(won), won, want)
		}
	}
}

func testUniqueHoldStates(t *testing.T, s store.Store) {
	ctx := t.Context()
	// A hold counting completed (not failed) holds while its holder is
	// completed, and is taken over once its holder failed.
	for _, st := range []flowtype.RunStatus{flowtype.StatusCompleted, flowtype.StatusFailed} {
		key := "k-" + string(st)
		p := keyed("holder-"+string(st), key)
		insertWithStatus(t, s, p, st)
		if !takeHold(t, s, store.UniqueHoldParams{Workflow: order1.Name, Key: key, RunID: p.ID, HeldUntil: base + 1_000, States: riverStates(), Now: base}) {
			t.Fatalf("hold of a free key not taken")
		}
		id, err := s.Reader().UniqueHoldGet(ctx, order1.Name, key, base+10)
		holds := err == nil && id == p.ID
		if want := st == flowtype.StatusCompleted; holds != want {
			t.Errorf("hold of a %s holder counts: %v (%v), want %v", st, holds, err, want)
		}
		if got := insertReports(t, s, keyed("new-"+string(st), key)); got == holds {
			t.Errorf("%s holder: insert with the key reported %v", st, got)
		}
		took := takeHold(t, s, store.UniqueHoldParams{Workflow: order1.Name, Key: key, RunID: "new-" + string(st), HeldUntil: base + 2_000, Now: base + 10})
		if took == holds {
			t.Errorf("%s holder: another hold taken: %v", st, took)
		}
	}
	// An unknown state is refused.
	err := s.Write(ctx, func(tx store.Tx) error {
		_, err := tx.UniqueHoldTake(ctx, store.UniqueHoldParams{Workflow: order1.Name, Key: "x", RunID: "holder-completed", HeldUntil: base + 1, States: []flowtype.RunStatus{"done"}, Now: base})
		return err
	})
	if err == nil {
		t.Error("hold with an unknown state: no error")
	}
}

func testRunRequeueHoldingFailed(t *testing.T, s store.Store) {
	ctx := t.Context()
	// A failed run listing failed holds its key; requeueing it passes the
	// key on, so the requeue is not refused as a duplicate of its own key.
	p := keyed("dead", "k")
	p.UniqueStates = store.AllStates()
	insertWithStatus(t, s, p, flowtype.StatusFailed)
	if insertReports(t, s, keyed("dup", "k")) {
		t.Fatal("run inserted while a failed run listing failed holds its key")
	}
	if !requeue(t, s, "dead", "dead/requeue-1", base+20) {
		t.Fatal("requeue of a failed run holding its key refused")
	}
	got, err := s.Reader().RunGetKeyHolder(ctx, order1.Name, "k")
	if err != nil || got.ID != "dead/requeue-1" {
		t.Errorf("holder after requeue: %q, %v; want dead/requeue-1", got.ID, err)
	}
	// A refused requeue changes nothing: another run holds the key.
	q := keyed("dead2", "k2")
	q.UniqueStates = store.AllStates()
	insertWithStatus(t, s, q, flowtype.StatusFailed)
	before := get(t, s, "dead2")
	insert(t, s, keyed("dead2/requeue-1", "other")) // the new ID is taken
	if requeue(t, s, "dead2", "dead2/requeue-1", base+30) {
		t.Fatal("requeue to a taken ID reported done")
	}
	if after := get(t, s, "dead2"); after.RequeuedAs != "" || after.UpdatedAt != before.UpdatedAt {
		t.Errorf("refused requeue changed the dead letter: requeued as %q, updated %d (was %d)", after.RequeuedAs, after.UpdatedAt, before.UpdatedAt)
	}
	if got, err := s.Reader().RunGetKeyHolder(ctx, order1.Name, "k2"); err != nil || got.ID != "dead2" {
		t.Errorf("holder after a refused requeue: %q, %v; want dead2", got.ID, err)
	}
}
