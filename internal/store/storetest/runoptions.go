package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// startOptionTests are the conformance tests of store.StartOptions: how
// they are recorded and read, what a claim makes of a timeout, how
// RunCancelChildren treats a detached child and what a requeue keeps.
func startOptionTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"StartOptionsRecorded", testStartOptionsRecorded},
		{"StartOptionsTimeoutBecomesDeadlineAtFirstClaim", testTimeoutBecomesDeadline},
		{"StartOptionsDetachedChildIsNotCancelled", testDetachedChildNotCancelled},
		{"StartOptionsRequeueKeepsThem", testRequeueKeepsStartOptions},
		{"RunDeleteForReuse", testRunDeleteForReuse},
	}
}

var someOptions = store.StartOptions{Timeout: 90_000, Detached: true, Context: []byte(`{"tenant":"acme"}`)}

// RunInsert and RunInsertMany record the start options, every read
// returns them, and a run without them reads as the zero options.
func testStartOptionsRecorded(t *testing.T, s store.Store) {
	with, without := newRun("with"), newRun("without")
	with.StartOptions = someOptions
	insert(t, s, with, without)
	many1, many2 := newRun("many1"), newRun("many2")
	many2.StartOptions = someOptions
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.RunInsertMany(ctx, []store.RunInsertParams{many1, many2})
		return err
	})
	for id, want := range map[string]store.StartOptions{"with": someOptions, "many2": someOptions, "without": {}, "many1": {}} {
		got := get(t, s, id).StartOptions
		if got.Timeout != want.Timeout || got.Detached != want.Detached || string(got.Context) != string(want.Context) {
			t.Errorf("run %s: start options %+v, want %+v", id, got, want)
		}
	}
	// Claims return them too, through whichever claim the store has.
	for _, r := range claimBoth(t, s, "q", base) {
		if want := slices.Contains([]string{"with", "many2"}, r.ID); (r.Context != nil) != want || r.Detached != want {
			t.Errorf("claimed run %s: start options %+v", r.ID, r.StartOptions)
		}
	}
}

// claimBoth claims the ready runs of queue at now through ClaimAndBegin
// when the store has it, else through RunClaim.
func claimBoth(t *testing.T, s store.Store, queue string, now int64) []store.Run {
	t.Helper()
	known := []flowtype.WorkflowKey{order1, order2, order3, invoice1}
	if c, ok := s.(store.Claimer); ok {
		claimed, err := c.ClaimAndBegin(t.Context(), store.ClaimAndBeginParams{RunClaimParams: store.RunClaimParams{
			Queue: queue, Known: known, Owner: "w", Max: 100, Now: now, LeaseExpiresAt: now + 30_000,
		}})
		if err != nil {
			t.Fatalf("claim and begin: %v", err)
		}
		runs := make([]store.Run, len(claimed))
		for i, c := range claimed {
			runs[i] = c.Run
		}
		return runs
	}
	return claim(t, s, store.RunClaimParams{Queue: queue, Known: known, Owner: "w", Max: 100, Now: now, LeaseExpiresAt: now + 30_000})
}

// The first claim sets the deadline of a run with a timeout to the
// claim's time plus the timeout, or keeps an earlier deadline; a later
// claim leaves it as it is.
func testTimeoutBecomesDeadline(t *testing.T, s store.Store) {
	plain := newRun("timed")
	plain.Queue = "timed"
	plain.Timeout = 60_000
	early := newRun("early")
	early.Queue = "early"
	early.Timeout = 60_000
	early.Deadline = base + 70_000
	insert(t, s, plain, early)
	if r := get(t, s, "timed"); r.Deadline != 0 {
		t.Fatalf("deadline %d before the first claim, want none", r.Deadline)
	}
	claimedAt := base + 50_000 // queued for 50 s
	c := claimBoth(t, s, "timed", claimedAt)
	if len(c) != 1 || c[0].Deadline != claimedAt+60_000 {
		t.Fatalf("claimed %v, want timed with deadline %d", c, claimedAt+60_000)
	}
	if r := get(t, s, "timed"); r.Deadline != claimedAt+60_000 {
		t.Errorf("stored deadline %d, want %d", r.Deadline, claimedAt+60_000)
	}
	if c := claimBoth(t, s, "early", claimedAt); len(c) != 1 || c[0].Deadline != base+70_000 {
		t.Errorf("claimed %v, want early keeping its deadline %d", c, base+70_000)
	}
	// Released and claimed again later: the deadline of the first claim.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, c[0].Lease(), store.RunReleaseParams{RunAt: claimedAt + 1, Now: claimedAt + 1})
	})
	if c := claimBoth(t, s, "timed", claimedAt+30_000); len(c) != 1 || c[0].Deadline != claimedAt+60_000 {
		t.Errorf("claimed again %v, want the first claim's deadline %d", c, claimedAt+60_000)
	}
}

// RunCancelChildren requests the cancellation of a parent's children but
// for the detached ones.
func testDetachedChildNotCancelled(t *testing.T, s store.Store) {
	insert(t, s, newRun("parent"))
	attached, detached := newRun("attached"), newRun("detached")
	attached.ParentID, detached.ParentID = "parent", "parent"
	detached.Detached = true
	insert(t, s, attached, detached)
	var cancelled []string
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		cancelled, err = tx.RunCancelChildren(ctx, "parent", base+1)
		return err
	})
	if !slices.Equal(cancelled, []string{"attached"}) {
		t.Errorf("cancelled children %v, want [attached]", cancelled)
	}
	if r := get(t, s, "detached"); r.CancelRequested {
		t.Errorf("detached child has its cancellation requested")
	}
}

// A requeued dead letter keeps its start options; one with a timeout gets
// no deadline until its first claim gives it the whole timeout again.
func testRequeueKeepsStartOptions(t *testing.T, s store.Store) {
	p := newRun("dead")
	p.Queue = "queue-dead"
	p.StartOptions = someOptions
	insertWithStatus(t, s, p, flowtype.StatusFailed)
	var ok bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		ok, err = tx.RunRequeue(ctx, store.RunRequeueParams{FromID: "dead", ID: "again", Now: base + 10})
		return err
	})
	if !ok {
		t.Fatal("requeue reported false")
	}
	r := get(t, s, "again")
	if r.Timeout != someOptions.Timeout || !r.Detached || string(r.Context) != string(someOptions.Context) || r.Deadline != 0 {
		t.Errorf("requeued run: start options %+v, deadline %d", r.StartOptions, r.Deadline)
	}
}

// RunDeleteForReuse deletes a failed or cancelled run, a completed one
// only with completedToo, never an unfinished one, and keeps the child of
// an unfinished parent unless that parent is the one asking.
func testRunDeleteForReuse(t *testing.T, s store.Store) {
	runWithStatus(t, s, "failed", flowtype.StatusFailed)
	runWithStatus(t, s, "completed", flowtype.StatusCompleted)
	runWithStatus(t, s, "running", flowtype.StatusRunning)
	insert(t, s, newRun("parent"))
	child := newRun("child")
	child.Queue, child.ParentID = "queue-child", "parent"
	insertWithStatus(t, s, child, flowtype.StatusCancelled)
	deleteForReuse := func(id, parent string, completedToo bool) bool {
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunDeleteForReuse(ctx, id, parent, completedToo)
			return err
		})
		return ok
	}
	for _, tc := range []struct {
		id, parent   string
		completedToo bool
		want         bool
	}{
		{"completed", "", false, false},
		{"running", "", true, false},
		{"nope", "", true, false},
		{"child", "", true, false},        // its parent is unfinished
		{"child", "another", true, false}, // and is not the one asking
		{"failed", "", false, true},
		{"completed", "", true, true},
		{"child", "parent", false, true},
	} {
		if got := deleteForReuse(tc.id, tc.parent, tc.completedToo); got != tc.want {
			t.Errorf("RunDeleteForReuse(%s, parent %q, completed too %v) = %v, want %v", tc.id, tc.parent, tc.completedToo, got, tc.want)
		}
	}
	for id, kept := range map[string]bool{"failed": false, "completed": false, "child": false, "running": true, "parent": true} {
		_, err := s.Reader().RunGet(t.Context(), id)
		if found := err == nil; found != kept {
			t.Errorf("run %s: found %v (%v), want %v", id, found, err, kept)
		}
	}
}
