package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// queueTests are the conformance tests of store.QueueReader and
// store.QueueTx, and of the unique keys of RunInsert; Exercise runs them
// with the others.
func queueTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"QueuePause", testQueuePause},
		{"UniqueKeyUnfinished", testUniqueKeyUnfinished},
		{"UniqueKeyConcurrent", testUniqueKeyConcurrent},
		{"UniqueHold", testUniqueHold},
		{"RunRequeue", testRunRequeue},
		{"RunRequeueRefused", testRunRequeueRefused},
		{"RunDeadList", testRunDeadList},
		{"RunDeadBatch", testRunDeadBatch},
		{"RunDeadDelete", testRunDeadDelete},
		{"RunDeadDeleteByID", testRunDeadDeleteByID},
		{"QueueCounts", testQueueCounts},
		{"QueueDurations", testQueueDurations},
	}
}

// settledRun inserts p, claims it at p.RunAt and finishes it with status
// at finishedAt. p must be the only ready run of its queue.
func settledRun(t *testing.T, s store.Store, p store.RunInsertParams, status flowtype.RunStatus, finishedAt int64) store.Run {
	t.Helper()
	insert(t, s, p)
	r := claimQueue(t, s, p.Queue, "w-"+p.ID, p.RunAt)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunFinish(ctx, r.Lease(), store.RunFinishParams{
			Status: status, Error: "boom " + p.ID, FinishedAt: finishedAt, Now: finishedAt,
		})
	})
	return get(t, s, p.ID)
}

func insertReports(t *testing.T, s store.Store, p store.RunInsertParams) bool {
	t.Helper()
	var ok bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		ok, err = tx.RunInsert(ctx, p)
		return err
	})
	return ok
}

func keyed(id, key string) store.RunInsertParams {
	p := newRun(id)
	p.Queue = "queue-" + id
	p.UniqueKey = key
	return p
}

func testQueuePause(t *testing.T, s store.Store) {
	ctx := t.Context()
	insert(t, s, newRun("a"), runInQueue("b", "other"))
	setPaused := func(name string, paused bool, now int64) bool {
		t.Helper()
		var changed bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			changed, err = tx.QueueSetPaused(ctx, name, paused, now)
			return err
		})
		return changed
	}
	if setPaused("q", false, base) {
		t.Error("resuming a queue never paused reported a change")
	}
	if list, err := s.Reader().QueueList(ctx); err != nil || len(list) != 0 {
		t.Errorf("queues after resuming one never paused: %v, %v; want none", list, err)
	}
	if !setPaused("q", true, base+1) {
		t.Error("pausing reported no change")
	}
	if setPaused("q", true, base+2) {
		t.Error("pausing a paused queue reported a change")
	}
	list, err := s.Reader().QueueList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Queue{{Name: "q", Paused: true, CreatedAt: base + 1, UpdatedAt: base + 1}}
	if !slices.Equal(list, want) {
		t.Errorf("queues %+v, want %+v", list, want)
	}

	known := []flowtype.WorkflowKey{order1}
	if got := claim(t, s, store.RunClaimParams{Queue: "q", Known: known, Owner: "w", Max: 10, Now: base + 5, LeaseExpiresAt: base + 99}); len(got) != 0 {
		t.Errorf("claim of a paused queue got %v", ids(got))
	}
	if got := get(t, s, "a"); got.Status != flowtype.StatusPending || got.Fence != 0 {
		t.Errorf("run of a paused queue: status %s, fence %d; want pending, 0", got.Status, got.Fence)
	}
	if got := claim(t, s, store.RunClaimParams{Queue: "other", Known: known, Owner: "w", Max: 10, Now: base + 5, LeaseExpiresAt: base + 99}); !slices.Equal(ids(got), []string{"b"}) {
		t.Errorf("claim of another queue got %v, want [b]", ids(got))
	}

	if !setPaused("q", false, base+6) {
		t.Error("resuming reported no change")
	}
	if got := claim(t, s, store.RunClaimParams{Queue: "q", Known: known, Owner: "w", Max: 10, Now: base + 7, LeaseExpiresAt: base + 99}); !slices.Equal(ids(got), []string{"a"}) {
		t.Errorf("claim after resume got %v, want [a]", ids(got))
	}
	if got := get(t, s, "a"); got.StartedAt != base+7 {
		t.Errorf("started at %d, want the claim's time %d", got.StartedAt, base+7)
	}
}

func runInQueue(id, queue string) store.RunInsertParams {
	p := newRun(id)
	p.Queue = queue
	return p
}

func testUniqueKeyUnfinished(t *testing.T, s store.Store) {
	ctx := t.Context()
	// A run in each unfinished state holds its key: another run with it is
	// not inserted, and the holder is found by the key.
	unfinished := []flowtype.RunStatus{flowtype.StatusPending, flowtype.StatusRunning, flowtype.StatusWaiting, flowtype.StatusCompensating, flowtype.StatusSuspended}
	for _, st := range unfinished {
		key := "k-" + string(st)
		holder := keyed("holder-"+string(st), key)
		if st == flowtype.StatusWaiting {
			insert(t, s, holder)
			r := claimQueue(t, s, holder.Queue, "w", base)
			do(t, s, func(ctx context.Context, tx store.Tx) error {
				return tx.RunRelease(ctx, r.Lease(), store.RunReleaseParams{RunAt: base + 1_000, Waiting: true, Now: base})
			})
		} else {
			insertWithStatus(t, s, holder, st)
		}
		if r := get(t, s, holder.ID); r.UniqueKey != key || r.Status != st {
			t.Fatalf("holder: key %q, status %s; want %s, %s", r.UniqueKey, r.Status, key, st)
		}
		if insertReports(t, s, keyed("dup-"+string(st), key)) {
			t.Errorf("run inserted while a %s run holds its key", st)
		}
		got, err := s.Reader().RunGetKeyHolder(ctx, order1.Name, key)
		if err != nil || got.ID != holder.ID {
			t.Errorf("holder of %s: %q, %v; want %s", key, got.ID, err, holder.ID)
		}
	}
	// A finished run holds nothing.
	for _, st := range []flowtype.RunStatus{flowtype.StatusCompleted, flowtype.StatusFailed, flowtype.StatusCancelled} {
		key := "k-" + string(st)
		insertWithStatus(t, s, keyed("was-"+string(st), key), st)
		if _, err := s.Reader().RunGetKeyHolder(ctx, order1.Name, key); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("holder of a key whose run is %s: error %v, want ErrRunNotFound", st, err)
		}
		if !insertReports(t, s, keyed("after-"+string(st), key)) {
			t.Errorf("run not inserted although the run with its key is %s", st)
		}
	}
	// Keys belong to a workflow; runs without a key never collide.
	other := keyed("other-workflow", "k-pending")
	other.Workflow = invoice1
	if !insertReports(t, s, other) {
		t.Error("run of another workflow with a taken key not inserted")
	}
	insert(t, s, keyed("no-key-1", ""), keyed("no-key-2", ""))
	if r := get(t, s, "no-key-1"); r.UniqueKey != "" {
		t.Errorf("run without key: key %q", r.UniqueKey)
	}
	// The ID still makes an insert idempotent, whatever the key.
	if insertReports(t, s, keyed("holder-pending", "fresh-key")) {
		t.Error("run with a taken ID inserted")
	}
	if r := get(t, s, "holder-pending"); r.UniqueKey != "k-pending" {
		t.Errorf("duplicate insert changed the key to %q", r.UniqueKey)
	}
}

func testUniqueKeyConcurrent(t *testing.T, s store.Store) {
	const writers = 16
	ps := make([]store.RunInsertParams, writers)
	for i := range ps {
		ps[i] = keyed(fmt.Sprintf("r%d", i), "same")
		ps[i].Queue = "q"
	}
	won := insertConcurrently(t, s, ps)
	if len(won) != 1 {
		t.Fatalf("%d runs inserted with the same key (%v), want 1", len(won), won)
	}
	runs, err := s.Reader().RunList(t.Context(), store.RunListParams{})
	if err != nil || len(runs) != 1 || runs[0].ID != won[0] {
		t.Errorf("stored runs %v (%v), want only %s", ids(runs), err, won[0])
	}
}

// insertConcurrently inserts each of ps in its own concurrent write and
// returns the IDs of the runs that were inserted.
func insertConcurrently(t *testing.T, s store.Store, ps []store.RunInsertParams) []string {
	t.Helper()
	errs := make(chan error, len(ps))
	inserted := make(chan string, len(ps))
	for _, p := range ps {
		go func() {
			errs <- s.Write(t.Context(), func(tx store.Tx) error {
				ok, err := tx.RunInsert(t.Context(), p)
				if ok {
					inserted <- p.ID
				}
				return err
			})
		}()
	}
	for range ps {
		if err := <-errs; err != nil {
			t.Errorf("insert: %v", err)
		}
	}
	close(inserted)
	var won []string
	for id := range inserted {
		won = append(won, id)
	}
	return won
}

func takeHold(t *testing.T, s store.Store, p store.UniqueHoldParams) bool {
	t.Helper()
	var ok bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		ok, err = tx.UniqueHoldTake(ctx, p)
		return err
	})
	return ok
}

func testUniqueHold(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := keyed("first", "k")
	settledRun(t, s, first, flowtype.StatusCompleted, base+10)
	if !takeHold(t, s, store.UniqueHoldParams{Workflow: order1.Name, Key: "k", RunID: "first", HeldUntil: base + 1_000, Now: base}) {
		t.Fatal("hold of a free key not taken")
	}
	holder := func(now int64) (string, error) {
		return s.Reader().UniqueHoldGet(ctx, order1.Name, "k", now)
	}
	if id, err := holder(base + 999); err != nil || id != "first" {
		t.Errorf("holder before the hold ends: %q, %v; want first", id, err)
	}
	if _, err := holder(base + 1_000); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("holder once the hold ended: error %v, want ErrRunNotFound", err)
	}
	if _, err := s.Reader().UniqueHoldGet(ctx, invoice1.Name, "k", base); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("holder of the key of another workflow: error %v, want ErrRunNotFound", err)
	}

	// While the hold is current, neither a run with the key nor another
	// hold of it gets in, although the holder finished.
	second := keyed("second", "k")
	second.Now = base + 999
	if insertReports(t, s, second) {
		t.Error("run inserted while a hold of its key is current")
	}
	if takeHold(t, s, store.UniqueHoldParams{Workflow: order1.Name, Key: "k", RunID: "first", HeldUntil: base + 5_000, Now: base + 999}) {
		t.Error("current hold taken over")
	}
	if id, _ := holder(base + 999); id != "first" {
		t.Errorf("holder after a refused take-over: %q, want first", id)
	}
	// Runs without the key, or of another workflow, are not held back.
	other := keyed("other", "k")
	other.Workflow = invoice1
	other.Now = base + 1
	if !insertReports(t, s, other) || !insertReports(t, s, keyed("no-key", "")) {
		t.Error("runs the hold does not concern not inserted")
	}

	// Once it ends, a run with the key gets in and takes the hold over.
	second.Now = base + 1_000
	if !insertReports(t, s, second) {
		t.Fatal("run not inserted once the hold ended")
	}
	if !takeHold(t, s, store.UniqueHoldParams{Workflow: order1.Name, Key: "k", RunID: "second", HeldUntil: base + 3_000, Now: base + 1_000}) {
		t.Fatal("ended hold not taken over")
	}
	if id, err := holder(base + 2_000); err != nil || id != "second" {
		t.Errorf("holder after the take-over: %q, %v; want second", id, err)
	}

	// Holds go with their run.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: "second", Expected: flowtype.StatusPending, Status: flowtype.StatusFailed, FinishedAt: base + 1_001, Now: base + 1_001})
	})
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		n, err := tx.RunDeadDelete(ctx, store.DeadDeleteParams{UntilSeq: 1 << 62, Max: 10})
		if err == nil && n != 1 {
			err = fmt.Errorf("deleted %d dead letters, want 1", n)
		}
		return err
	})
	if _, err := holder(base + 2_000); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("holder after its run was deleted: error %v, want ErrRunNotFound", err)
	}
}

func requeue(t *testing.T, s store.Store, from, id string, now int64) bool {
	t.Helper()
	var ok bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		ok, err = tx.RunRequeue(ctx, store.RunRequeueParams{FromID: from, ID: id, Now: now})
		return err
	})
	return ok
}

func testRunRequeue(t *testing.T, s store.Store) {
	p := keyed("dead", "k")
	p.Priority, p.Deadline = 3, base+60_000
	dead := settledRun(t, s, p, flowtype.StatusFailed, base+10)
	beginStep(t, s, store.StepKey{RunID: "dead", Name: "s"}, `{}`, base+5)
	takeHold(t, s, store.UniqueHoldParams{Workflow: order1.Name, Key: "k", RunID: "dead", HeldUntil: base + 100_000, Now: base})

	if !requeue(t, s, "dead", "dead/requeue-1", base+20) {
		t.Fatal("dead letter not requeued")
	}
	checkRun(t, s, store.Run{
		ID: "dead/requeue-1", Workflow: order1.Name, Version: order1.Version, Queue: p.Queue, Priority: 3,
		Status: flowtype.StatusPending, Input: p.Input, RunAt: base + 20, Deadline: base + 60_020,
		CreatedAt: base + 20, UpdatedAt: base + 20, UniqueKey: "k", RequeuedFrom: "dead",
	})
	dead.RequeuedAs, dead.UpdatedAt = "dead/requeue-1", base+20
	checkRun(t, s, dead)
	if st := steps(t, s, "dead"); len(st) != 1 {
		t.Errorf("dead letter's steps: %v, want the one it had", st)
	}
	if st := steps(t, s, "dead/requeue-1"); len(st) != 0 {
		t.Errorf("new run's steps: %v, want none", st)
	}
	if id, err := s.Reader().UniqueHoldGet(t.Context(), order1.Name, "k", base+30); err != nil || id != "dead/requeue-1" {
		t.Errorf("hold after requeue: %q, %v; want it moved to dead/requeue-1", id, err)
	}
	// The new run holds the key, and the dead letter is one no longer.
	if insertReports(t, s, keyed("dup", "k")) {
		t.Error("run inserted with the key of the requeued run")
	}
	if requeue(t, s, "dead", "dead/requeue-2", base+30) {
		t.Error("dead letter requeued twice")
	}
	if _, err := s.Reader().RunGet(t.Context(), "dead/requeue-2"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("second requeue inserted a run: %v", err)
	}

	// A dead letter without deadline or key gets none.
	plain := settledRun(t, s, runInQueue("plain", "q"), flowtype.StatusFailed, base+10)
	if !requeue(t, s, "plain", "plain/again", base+40) {
		t.Fatal("plain dead letter not requeued")
	}
	again := get(t, s, "plain/again")
	if again.Deadline != 0 || again.UniqueKey != "" || again.ParentID != "" || again.Queue != plain.Queue {
		t.Errorf("requeued plain run: deadline %d, key %q, parent %q, queue %s", again.Deadline, again.UniqueKey, again.ParentID, again.Queue)
	}
}

func testRunRequeueRefused(t *testing.T, s store.Store) {
	for _, st := range []flowtype.RunStatus{flowtype.StatusPending, flowtype.StatusRunning, flowtype.StatusCompleted, flowtype.StatusSuspended, flowtype.StatusCancelled} {
		r := runWithStatus(t, s, "was-"+string(st), st)
		if requeue(t, s, r.ID, r.ID+"/requeue-1", base+50) {
			t.Errorf("%s run requeued", st)
		}
		checkRun(t, s, r)
	}
	if requeue(t, s, "missing", "missing/requeue-1", base+50) {
		t.Error("unknown run requeued")
	}

	// An unfinished run holds the dead letter's key.
	held := settledRun(t, s, keyed("held", "k"), flowtype.StatusFailed, base+10)
	insert(t, s, keyed("holder", "k"))
	if requeue(t, s, "held", "held/requeue-1", base+50) {
		t.Error("dead letter requeued although an unfinished run holds its key")
	}
	checkRun(t, s, held)

	// The new ID is taken.
	taken := settledRun(t, s, runInQueue("taken", "q"), flowtype.StatusFailed, base+10)
	insert(t, s, runInQueue("taken/requeue-1", "q"))
	if requeue(t, s, "taken", "taken/requeue-1", base+50) {
		t.Error("dead letter requeued under a taken ID")
	}
	checkRun(t, s, taken)

	runs, err := s.Reader().RunList(t.Context(), store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 9 {
		t.Errorf("%d runs (%v), want the 9 inserted: refused requeues insert nothing", len(runs), ids(runs))
	}
}

func deadIDs(t *testing.T, s store.Store, p store.DeadListParams) []string {
	t.Helper()
	runs, err := s.Reader().RunDeadList(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return ids(runs)
}

func testRunDeadList(t *testing.T, s store.Store) {
	d1 := runInQueue("d1", "a")
	settledRun(t, s, d1, flowtype.StatusFailed, base+10)
	d2 := runInQueue("d2", "b")
	d2.Workflow = invoice1
	settledRun(t, s, d2, flowtype.StatusFailed, base+20)
	settledRun(t, s, runInQueue("d3", "b"), flowtype.StatusFailed, base+30)
	settledRun(t, s, runInQueue("done", "a"), flowtype.StatusCompleted, base+40)
	settledRun(t, s, runInQueue("stopped", "a"), flowtype.StatusCancelled, base+40)
	settledRun(t, s, runInQueue("requeued", "a"), flowtype.StatusFailed, base+40)
	requeue(t, s, "requeued", "requeued/requeue-1", base+50)

	tests := []struct {
		name string
		p    store.DeadListParams
		want []string
	}{
		{"all", store.DeadListParams{}, []string{"d3", "d2", "d1"}},
		{"workflow", store.DeadListParams{DeadFilter: store.DeadFilter{Workflow: "order"}}, []string{"d3", "d1"}},
		{"queue", store.DeadListParams{DeadFilter: store.DeadFilter{Queue: "b"}}, []string{"d3", "d2"}},
		{"both", store.DeadListParams{DeadFilter: store.DeadFilter{Workflow: "invoice", Queue: "b"}}, []string{"d2"}},
		{"after", store.DeadListParams{DeadFilter: store.DeadFilter{FinishedAfter: base + 20}}, []string{"d3", "d2"}},
		{"before", store.DeadListParams{DeadFilter: store.DeadFilter{FinishedBefore: base + 20}}, []string{"d1"}},
		{"between", store.DeadListParams{DeadFilter: store.DeadFilter{FinishedAfter: base + 11, FinishedBefore: base + 30}}, []string{"d2"}},
		{"limit", store.DeadListParams{Limit: 2}, []string{"d3", "d2"}},
		{"none", store.DeadListParams{DeadFilter: store.DeadFilter{Queue: "zzz"}}, nil},
	}
	for _, tt := range tests {
		if got := deadIDs(t, s, tt.p); !slices.Equal(got, tt.want) {
			t.Errorf("%s: dead letters %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := deadIDs(t, s, store.DeadListParams{}); len(got) > 0 {
		if r := get(t, s, got[0]); r.Error != "boom d3" || r.FinishedAt != base+30 {
			t.Errorf("dead letter d3: error %q, finished %d", r.Error, r.FinishedAt)
		}
	}
}

func testRunDeadBatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	if seq, err := s.Reader().RunSeqMax(ctx); err != nil || seq != 0 {
		t.Errorf("sequence of an empty store: %d, %v; want 0", seq, err)
	}
	// Inserted in this order, failed in another, two at the same time.
	failedAt := map[string]int64{"e0": base + 3, "e1": base + 1, "e2": base + 2, "e3": base + 2, "e4": base + 5}
	for _, id := range []string{"e0", "e1", "e2", "e3", "e4"} {
		settledRun(t, s, runInQueue(id, "q"), flowtype.StatusFailed, failedAt[id])
	}
	settledRun(t, s, runInQueue("ok", "q"), flowtype.StatusCompleted, base+1)
	until, err := s.Reader().RunSeqMax(ctx)
	if err != nil || until <= 0 {
		t.Fatalf("sequence: %d, %v", until, err)
	}
	settledRun(t, s, runInQueue("late", "q"), flowtype.StatusFailed, base) // after the bound
	if seq, _ := s.Reader().RunSeqMax(ctx); seq <= until {
		t.Errorf("sequence did not grow with an insert: %d then %d", until, seq)
	}

	batches := func(f store.DeadFilter, until int64, max int) []string {
		t.Helper()
		var got []string
		var after store.DeadRun
		for range 10 {
			batch, err := s.Reader().RunDeadBatch(ctx, store.DeadBatchParams{
				DeadFilter: f, AfterFinishedAt: after.FinishedAt, AfterSeq: after.Seq, UntilSeq: until, Max: max,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(batch) > max {
				t.Fatalf("batch of %d, want at most %d", len(batch), max)
			}
			for _, d := range batch {
				if d.Seq > until || d.FinishedAt != get(t, s, d.ID).FinishedAt {
					t.Errorf("dead letter %s: sequence %d (bound %d), finished %d", d.ID, d.Seq, until, d.FinishedAt)
				}
				after = d
				got = append(got, d.ID)
			}
			if len(batch) < max {
				return got
			}
		}
		t.Fatal("batches never ended")
		return nil
	}
	want := []string{"e1", "e2", "e3", "e0", "e4"} // by failure time, then insertion
	for _, max := range []int{1, 2, 5, 10} {
		if got := batches(store.DeadFilter{}, until, max); !slices.Equal(got, want) {
			t.Errorf("batches of %d gave %v, want %v", max, got, want)
		}
	}
	if got := batches(store.DeadFilter{FinishedAfter: base + 2, FinishedBefore: base + 5}, 1<<62, 1); !slices.Equal(got, []string{"e2", "e3", "e0"}) {
		t.Errorf("filtered batches gave %v, want [e2 e3 e0]", got)
	}
	if got := batches(store.DeadFilter{}, 1<<62, 3); !slices.Equal(got, []string{"late", "e1", "e2", "e3", "e0", "e4"}) {
		t.Errorf("unbounded batches gave %v", got)
	}
	if got := batches(store.DeadFilter{Queue: "other"}, 1<<62, 3); len(got) != 0 {
		t.Errorf("batches of another queue gave %v", got)
	}
}

func testRunDeadDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	insert(t, s, runInQueue("parent", "p"))                                             // unfinished
	settledRun(t, s, runInQueue("done-parent", "dp"), flowtype.StatusCompleted, base+1) // finished
	plain := settledRun(t, s, runInQueue("plain", "q"), flowtype.StatusFailed, base+10) // deleted
	do(t, s, func(ctx context.Context, tx store.Tx) error {                             // with history
		return tx.EventAppend(ctx, store.Event{RunID: plain.ID, At: base, Kind: "run_failed"})
	})
	child := runInQueue("child", "q")
	child.ParentID = "parent"
	settledRun(t, s, child, flowtype.StatusFailed, base+11) // kept: its parent may read it
	orphan := runInQueue("orphan", "q")
	orphan.ParentID = "done-parent"
	settledRun(t, s, orphan, flowtype.StatusFailed, base+12) // deleted
	settledRun(t, s, runInQueue("other", "o"), flowtype.StatusFailed, base+13)
	settledRun(t, s, runInQueue("requeued", "q"), flowtype.StatusFailed, base+14)
	requeue(t, s, "requeued", "requeued/requeue-1", base+15)
	settledRun(t, s, runInQueue("ok", "q"), flowtype.StatusCompleted, base+16)
	until, err := s.Reader().RunSeqMax(ctx)
	if err != nil {
		t.Fatal(err)
	}
	settledRun(t, s, runInQueue("late", "q"), flowtype.StatusFailed, base+17)

	deleteDead := func(p store.DeadDeleteParams) int {
		t.Helper()
		var n int
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = tx.RunDeadDelete(ctx, p)
			return err
		})
		return n
	}
	q := store.DeadFilter{Queue: "q"}
	if n := deleteDead(store.DeadDeleteParams{DeadFilter: q, UntilSeq: until, Max: 1}); n != 1 {
		t.Errorf("first batch deleted %d, want 1 (Max)", n)
	}
	if n := deleteDead(store.DeadDeleteParams{DeadFilter: q, UntilSeq: until, Max: 10}); n != 1 {
		t.Errorf("second batch deleted %d, want 1", n)
	}
	if n := deleteDead(store.DeadDeleteParams{DeadFilter: q, UntilSeq: until, Max: 10}); n != 0 {
		t.Errorf("third batch deleted %d, want 0", n)
	}
	for _, id := range []string{"plain", "orphan"} {
		if _, err := s.Reader().RunGet(ctx, id); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("run %s: error %v, want it deleted", id, err)
		}
	}
	if ev, err := s.Reader().EventList(ctx, "plain"); err != nil || len(ev) != 0 {
		t.Errorf("events of a deleted dead letter: %v, %v", ev, err)
	}
	for _, id := range []string{"parent", "done-parent", "child", "other", "requeued", "requeued/requeue-1", "ok", "late"} {
		get(t, s, id)
	}
}

func testQueueCounts(t *testing.T, s store.Store) {
	const minute, hour = int64(60_000), int64(3_600_000)
	ctx := t.Context()
	at := func(id, queue string, runAt int64) store.RunInsertParams {
		p := runInQueue(id, queue)
		p.RunAt, p.Now = runAt, runAt
		return p
	}
	settledRun(t, s, at("f-old", "a", base-2*hour), flowtype.StatusFailed, base-2*hour+1)
	settledRun(t, s, at("f-requeued", "a", base-hour/2), flowtype.StatusFailed, base-hour/2+1)
	requeue(t, s, "f-requeued", "f-requeued/requeue-1", base-hour/2+2)
	do(t, s, func(ctx context.Context, tx store.Tx) error { // the requeued run is cancelled at once
		return tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: "f-requeued/requeue-1", Expected: flowtype.StatusPending, Status: flowtype.StatusCancelled, FinishedAt: base - 10, Now: base - 10})
	})
	settledRun(t, s, at("c-hour", "a", base-hour/2), flowtype.StatusCompleted, base-hour/3)
	settledRun(t, s, at("c-minute", "a", base-minute), flowtype.StatusCompleted, base-minute/2)
	insert(t, s, at("running", "a", base-100))
	claimQueue(t, s, "a", "w", base-100)
	insert(t, s, at("due", "a", base-5_000), at("due-later", "a", base-1_000), at("delayed", "a", base+10_000))
	for i, runAt := range []int64{base + 5_000, base - 10} {
		p := at(fmt.Sprintf("w%d", i), "b", base-20)
		insert(t, s, p)
		r := claimQueue(t, s, "b", "w", base-20)
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			return tx.RunRelease(ctx, r.Lease(), store.RunReleaseParams{RunAt: runAt, Waiting: true, Now: base - 20})
		})
	}

	counts, err := s.Reader().QueueCounts(ctx, store.QueueCountsParams{Now: base, MinuteAgo: base - minute, HourAgo: base - hour})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.QueueCounts{
		{Queue: "a", Status: flowtype.StatusCancelled, Runs: 1, FinishedLastMinute: 1, FinishedLastHour: 1},
		{Queue: "a", Status: flowtype.StatusCompleted, Runs: 2, FinishedLastMinute: 1, FinishedLastHour: 2},
		{Queue: "a", Status: flowtype.StatusFailed, Runs: 2, FinishedLastHour: 1, Dead: 1},
		{Queue: "a", Status: flowtype.StatusPending, Runs: 3, Ready: 2, OldestReadyAt: base - 5_000},
		{Queue: "a", Status: flowtype.StatusRunning, Runs: 1},
		{Queue: "b", Status: flowtype.StatusWaiting, Runs: 2, Ready: 1, OldestReadyAt: base - 10},
	}
	if len(counts) != len(want) {
		t.Fatalf("counts %+v, want %+v", counts, want)
	}
	for i := range want {
		if d := diff(want[i], counts[i]); d != "" {
			t.Errorf("counts of %s/%s: %s", want[i].Queue, want[i].Status, d)
		}
	}
}

func testQueueDurations(t *testing.T, s store.Store) {
	const hour = int64(3_600_000)
	ctx := t.Context()
	at := func(id, queue string, runAt int64) store.RunInsertParams {
		p := runInQueue(id, queue)
		p.RunAt, p.Now = runAt, runAt
		return p
	}
	settledRun(t, s, at("old", "a", base-2*hour), flowtype.StatusCompleted, base-2*hour+7)        // too old
	settledRun(t, s, at("slow", "a", base-hour/2-100_000), flowtype.StatusCompleted, base-hour/2) // 100 s
	settledRun(t, s, at("fast", "a", base-20_000), flowtype.StatusCompleted, base-10_000)         // 10 s
	settledRun(t, s, at("failed", "a", base-5_000), flowtype.StatusFailed, base-1_000)            // not completed
	settledRun(t, s, at("other", "b", base-5_000), flowtype.StatusCompleted, base-1_000)          // other queue
	tests := []struct {
		since int64
		limit int
		want  []int64
	}{
		{base - hour, 10, []int64{10_000, 100_000}},
		{base - hour, 1, []int64{10_000}},
		{base - 3*hour, 10, []int64{10_000, 100_000, 7}},
		{base, 10, []int64{}},
	}
	for _, tt := range tests {
		got, err := s.Reader().QueueDurations(ctx, "a", tt.since, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("durations since %d, limit %d: %v, want %v", tt.since, tt.limit, got, tt.want)
		}
	}
}

func testRunDeadDeleteByID(t *testing.T, s store.Store) {
	ctx := t.Context()
	insert(t, s, runInQueue("parent", "p")) // unfinished
	dead := settledRun(t, s, runInQueue("dead", "q"), flowtype.StatusFailed, base+10)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.EventAppend(ctx, store.Event{RunID: dead.ID, At: base, Kind: "run_failed"})
	})
	child := runInQueue("child", "q")
	child.ParentID = "parent"
	settledRun(t, s, child, flowtype.StatusFailed, base+11)
	settledRun(t, s, runInQueue("requeued", "q"), flowtype.StatusFailed, base+12)
	requeue(t, s, "requeued", "requeued/requeue-1", base+13)
	settledRun(t, s, runInQueue("ok", "q"), flowtype.StatusCompleted, base+14)

	deleteByID := func(id string) bool {
		t.Helper()
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunDeadDeleteByID(ctx, id)
			return err
		})
		return ok
	}
	for _, id := range []string{"parent", "child", "requeued", "requeued/requeue-1", "ok", "missing"} {
		if deleteByID(id) {
			t.Errorf("deleted %s, which is not a dead letter that can go", id)
		}
	}
	if !deleteByID("dead") {
		t.Fatal("dead letter not deleted")
	}
	if _, err := s.Reader().RunGet(ctx, "dead"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("deleted dead letter: error %v, want ErrRunNotFound", err)
	}
	if ev, err := s.Reader().EventList(ctx, "dead"); err != nil || len(ev) != 0 {
		t.Errorf("events of a deleted dead letter: %v, %v", ev, err)
	}
	for _, id := range []string{"parent", "child", "requeued", "requeued/requeue-1", "ok"} {
		get(t, s, id)
	}
}
