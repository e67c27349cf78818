package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/clock"
	"github.com/flowlite/flowlite/internal/store"
)

var jobKey = flowtype.WorkflowKey{Name: "job", Version: 1}

// newQueueEngine returns an engine that is not started, on a fresh store,
// with a manual clock.
func newQueueEngine(t *testing.T) (*Engine, store.Store, *clock.Manual) {
	t.Helper()
	s := openTestStore(t)
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e, err := New(s, Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(Workflow{Key: jobKey, Run: func(*RunContext, []byte) ([]byte, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	return e, s, clk
}

// deadLetter records a failed run of queue whose clock-time failure is
// now; key, when set, is its unique key.
func deadLetter(t *testing.T, e *Engine, s store.Store, id, queue, key string) {
	t.Helper()
	ctx := t.Context()
	st, err := e.StartRun(ctx, StartParams{ID: id, Workflow: jobKey, Queue: queue, Input: []byte(`"` + id + `"`), UniqueKey: key})
	if err != nil || st.Existing {
		t.Fatalf("start %s: %v, existing %v", id, err, st.Existing)
	}
	err = s.Write(ctx, func(tx store.Tx) error {
		now := e.nowMs()
		runs, err := tx.RunClaim(ctx, store.RunClaimParams{Queue: queue, Known: []flowtype.WorkflowKey{jobKey}, Owner: "w", Max: 1, Now: now, LeaseExpiresAt: now + 1000})
		if err != nil || len(runs) != 1 || runs[0].ID != id {
			return fmt.Errorf("claim %s: %v, %v", id, runs, err)
		}
		return tx.RunFinish(ctx, runs[0].Lease(), store.RunFinishParams{Status: flowtype.StatusFailed, Error: "boom", FinishedAt: now, Now: now})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Bulk operations go through every matching dead letter batch by batch,
// skip those that cannot be requeued, and count exactly.
func TestBulkDeadLetterBatches(t *testing.T) {
	t.Parallel()
	e, s, clk := newQueueEngine(t)
	ctx := t.Context()
	var inA []string
	for i := range 8 {
		id := fmt.Sprintf("a%d", i)
		key := ""
		if i == 4 {
			key = "held"
		}
		deadLetter(t, e, s, id, "a", key)
		inA = append(inA, id)
		if i%3 == 0 {
			clk.Advance(time.Second) // some fail at the same time
		}
	}
	for i := range 5 {
		deadLetter(t, e, s, fmt.Sprintf("b%d", i), "b", "")
	}
	// An unfinished run holds the key of a4, which cannot be requeued.
	if _, err := e.StartRun(ctx, StartParams{ID: "holder", Workflow: jobKey, Queue: "c", Input: []byte(`{}`), UniqueKey: "held"}); err != nil {
		t.Fatal(err)
	}

	for _, size := range []int{1, 3, 100} {
		n, err := e.requeueDead(ctx, store.DeadFilter{Queue: "a"}, size)
		if size == 1 {
			if err != nil || n != 7 {
				t.Fatalf("batches of %d: requeued %d, %v; want 7", size, n, err)
			}
		} else if err != nil || n != 0 {
			t.Errorf("batches of %d after all were requeued: %d, %v; want 0", size, n, err)
		}
	}
	for _, id := range inA {
		r, err := s.Reader().RunGet(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := id + "/requeue-1"
		if id == "a4" {
			want = ""
		}
		if r.RequeuedAs != want {
			t.Errorf("%s requeued as %q, want %q", id, r.RequeuedAs, want)
		}
	}
	dead, err := e.DeadLetters(ctx, store.DeadFilter{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range dead {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if want := []string{"a4", "b0", "b1", "b2", "b3", "b4"}; !slices.Equal(ids, want) {
		t.Errorf("dead letters %v, want %v", ids, want)
	}

	// The requeued runs fail again: they are dead letters of their own,
	// requeued as -2.
	for _, id := range inA {
		if id == "a4" {
			continue
		}
		err := s.Write(ctx, func(tx store.Tx) error {
			now := e.nowMs()
			runs, err := tx.RunClaim(ctx, store.RunClaimParams{Queue: "a", Known: []flowtype.WorkflowKey{jobKey}, Owner: "w", Max: 1, Now: now, LeaseExpiresAt: now + 1000})
			if err != nil || len(runs) != 1 {
				return fmt.Errorf("claim: %v, %v", runs, err)
			}
			return tx.RunFinish(ctx, runs[0].Lease(), store.RunFinishParams{Status: flowtype.StatusFailed, FinishedAt: now, Now: now})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.requeueDead(ctx, store.DeadFilter{Queue: "a"}, 2); err != nil || n != 7 {
		t.Errorf("second bulk requeue: %d, %v; want 7", n, err)
	}
	if _, err := s.Reader().RunGet(ctx, "a0/requeue-2"); err != nil {
		t.Errorf("second requeue of a0: %v", err)
	}

	if n, err := e.purgeDead(ctx, store.DeadFilter{Queue: "b"}, 2); err != nil || n != 5 {
		t.Errorf("purge of b in batches of 2: %d, %v; want 5", n, err)
	}
	if n, err := e.purgeDead(ctx, store.DeadFilter{}, 2); err != nil || n != 1 {
		t.Errorf("purge of the rest: %d, %v; want 1 (a4)", n, err)
	}
	if _, err := s.Reader().RunGet(ctx, "a4"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("purged a4: %v", err)
	}
}

// A requeue starts its dead letter again as a new run, so RunsStarted
// counts each run actually requeued once: not the requeues that failed,
// nor the dead letters a bulk requeue left as they were.
func TestRequeueCountsRunsStarted(t *testing.T) {
	t.Parallel()
	e, s, _ := newQueueEngine(t)
	ctx := t.Context()
	for i := range 5 {
		key := ""
		if i == 4 {
			key = "held"
		}
		deadLetter(t, e, s, fmt.Sprintf("d%d", i), "a", key)
	}
	// An unfinished run holds the key of d4, which cannot be requeued.
	if _, err := e.StartRun(ctx, StartParams{ID: "holder", Workflow: jobKey, Queue: "c", Input: []byte(`{}`), UniqueKey: "held"}); err != nil {
		t.Fatal(err)
	}
	started := func() int64 { return e.Metrics().RunsStarted }
	before := started()
	if before != 6 {
		t.Fatalf("RunsStarted after the setup = %d, want 6 (the dead letters and the holder)", before)
	}

	if _, err := e.Requeue(ctx, "d0"); err != nil {
		t.Fatal(err)
	}
	if got := started() - before; got != 1 {
		t.Errorf("Requeue of a dead letter: RunsStarted grew by %d, want 1", got)
	}
	before = started()
	for _, id := range []string{"d0", "holder", "d4", "nosuch"} { // requeued already, pending, key held, unknown
		if _, err := e.Requeue(ctx, id); err == nil {
			t.Fatalf("Requeue(%s) succeeded", id)
		}
	}
	if got := started() - before; got != 0 {
		t.Errorf("failed Requeues: RunsStarted grew by %d, want 0", got)
	}

	before = started()
	n, err := e.requeueDead(ctx, store.DeadFilter{Queue: "a"}, 2) // d1..d3 in two batches; d4 skipped
	if err != nil || n != 3 {
		t.Fatalf("bulk requeue: %d, %v; want 3", n, err)
	}
	if got := started() - before; got != int64(n) {
		t.Errorf("bulk requeue of %d runs: RunsStarted grew by %d", n, got)
	}
}

func TestRequeueID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		run  store.Run
		want string
	}{
		{store.Run{ID: "r"}, "r/requeue-1"},
		{store.Run{ID: "r/requeue-1", RequeuedFrom: "r"}, "r/requeue-2"},
		{store.Run{ID: "r/requeue-9", RequeuedFrom: "r/requeue-8"}, "r/requeue-10"},
		// A user's ID that merely looks like a requeue's.
		{store.Run{ID: "x/requeue-3"}, "x/requeue-3/requeue-1"},
		{store.Run{ID: "x/requeue-y", RequeuedFrom: "x"}, "x/requeue-y/requeue-1"},
	}
	for _, tt := range tests {
		if got := requeueID(tt.run); got != tt.want {
			t.Errorf("requeueID(%s) = %s, want %s", tt.run.ID, got, tt.want)
		}
	}
}
