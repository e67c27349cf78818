package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// runTests are the conformance tests of store.RunReader and store.RunTx:
// insertion, claims and their leases, fenced writes, rescue, cancellation
// and state changes, counts and lists; Exercise runs them with the others.
func runTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunInsert", testRunInsert},
		{"RunGetNotFound", testRunGetNotFound},
		{"RunClaimSelectsReadyRuns", testRunClaimSelectsReadyRuns},
		{"RunClaimRespectsMax", testRunClaimRespectsMax},
		{"RunClaimOrder", testRunClaimOrder},
		{"RunClaimPastManyPriorities", testRunClaimPastManyPriorities},
		{"RunClaimFenceAndStatus", testRunClaimFenceAndStatus},
		{"RunClaimConcurrent", testRunClaimConcurrent},
		{"FencedWritesRejectLostLease", testFencedWritesRejectLostLease},
		{"RunFinish", testRunFinish},
		{"RunFinishMany", testRunFinishMany},
		{"RunRescue", testRunRescue},
		{"RunRescueLimit", testRunRescueLimit},
		{"RunGetForUpdateHoldsTheRun", testRunGetForUpdateHoldsTheRun},
		{"RunRequestCancel", testRunRequestCancel},
		{"RunSetStatus", testRunSetStatus},
		{"RunCountUnrunnable", testRunCountUnrunnable},
		{"RunCountByStatus", testRunCountByStatus},
		{"RunList", testRunList},
	}
}

func testRunInsert(t *testing.T, s store.Store) {
	p := store.RunInsertParams{
		ID: "r1", Workflow: order2, Queue: "emails", Priority: 3,
		Input: []byte(`{"to":"a@example.com"}`), RunAt: base + 10, Now: base,
	}
	var inserted bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		inserted, err = tx.RunInsert(ctx, p)
		return err
	})
	if !inserted {
		t.Fatal("insert of a new run reported false")
	}
	want := store.Run{
		ID: "r1", Workflow: "order", Version: 2, Queue: "emails", Priority: 3, Status: flowtype.StatusPending,
		Input: p.Input, RunAt: base + 10, CreatedAt: base, UpdatedAt: base,
	}
	checkRun(t, s, want)

	dup := store.RunInsertParams{
		ID: "r1", Workflow: invoice1, Queue: "other", Priority: 9, Input: []byte(`{"x":1}`), RunAt: base + 99, Now: base + 50,
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		inserted, err = tx.RunInsert(ctx, dup)
		return err
	})
	if inserted {
		t.Error("insert of a duplicate ID reported true")
	}
	checkRun(t, s, want)

	runs, err := s.Reader().RunList(t.Context(), store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Errorf("after a duplicate insert the store holds %d runs, want 1", len(runs))
	}
}

func testRunGetNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.Reader().RunGet(ctx, "missing"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("reader RunGet of unknown ID: error %v, want ErrRunNotFound", err)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.RunGet(ctx, "missing"); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("tx RunGet of unknown ID: error %v, want ErrRunNotFound", err)
		}
		return nil
	})
	if st, err := s.Reader().StepList(ctx, "missing"); err != nil || len(st) != 0 {
		t.Errorf("StepList of unknown run = %v, %v; want empty, nil", st, err)
	}
	if ev, err := s.Reader().EventList(ctx, "missing"); err != nil || len(ev) != 0 {
		t.Errorf("EventList of unknown run = %v, %v; want empty, nil", ev, err)
	}
}

func testRunClaimSelectsReadyRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Runs of queue q that are not ready, each driven to its state while it
	// is the only ready run of q.
	for _, st := range []flowtype.RunStatus{flowtype.StatusRunning, flowtype.StatusCompleted, flowtype.StatusFailed, flowtype.StatusSuspended, flowtype.StatusCancelled} {
		insertWithStatus(t, s, newRun("was-"+string(st)), st)
	}
	future := newRun("future")
	future.RunAt = base + 1
	otherQueue := newRun("other-queue")
	otherQueue.Queue = "q2"
	unknownVersion := newRun("unknown-version")
	unknownVersion.Workflow = order2
	unknownName := newRun("unknown-name")
	unknownName.Workflow = invoice1
	past := newRun("past")
	past.RunAt = base - 10
	dueNow := newRun("due-now") // RunAt == now is ready
	insert(t, s, future, otherQueue, unknownVersion, unknownName, past, dueNow)

	all, err := s.Reader().RunList(ctx, store.RunListParams{})
	if err != nil {
		t.Fatal(err)
	}
	before := make(map[string]store.Run, len(all))
	for _, r := range all {
		before[r.ID] = r
	}
	unchanged := func(except ...string) {
		t.Helper()
		for id, r := range before {
			if !slices.Contains(except, id) {
				checkRun(t, s, r)
			}
		}
	}
	// expectClaimed checks the claimed runs are exactly want and that each
	// returned record is the stored row, leased to owner.
	expectClaimed := func(got []store.Run, owner string, now int64, want ...string) {
		t.Helper()
		if !slices.Equal(ids(got), want) {
			t.Fatalf("claimed %v, want %v", ids(got), want)
		}
		for _, r := range got {
			w := before[r.ID]
			w.Status, w.LeaseOwner, w.LeaseExpiresAt, w.Fence, w.UpdatedAt = flowtype.StatusRunning, owner, now+30_000, w.Fence+1, now
			if w.StartedAt == 0 { // the first claim
				w.StartedAt = now
			}
			if d := diff(w, r); d != "" {
				t.Errorf("claimed run %s as returned: %s", r.ID, d)
			}
			checkRun(t, s, w)
			before[r.ID] = w
		}
	}
	params := func(owner string, now int64, known ...flowtype.WorkflowKey) store.RunClaimParams {
		return store.RunClaimParams{Queue: "q", Known: known, Owner: owner, Max: 10, Now: now, LeaseExpiresAt: now + 30_000}
	}

	got := claim(t, s, params("w1", base, order1))
	expectClaimed(got, "w1", base, "past", "due-now")
	unchanged()

	got = claim(t, s, params("w2", base+1, order1))
	expectClaimed(got, "w2", base+1, "future")
	unchanged()

	// Without known versions nothing is claimed, even long after every
	// lease expired: claiming never steals a lease (rescue does).
	if got := claim(t, s, params("w3", base+100_000)); len(got) != 0 {
		t.Errorf("claim with no known versions got %v", ids(got))
	}
	if got := claim(t, s, params("w3", base+100_000, flowtype.WorkflowKey{Name: "order", Version: 9})); len(got) != 0 {
		t.Errorf("claim with only an absent version got %v", ids(got))
	}
	unchanged()

	got = claim(t, s, params("w4", base+100_000, order1, order2, invoice1))
	expectClaimed(got, "w4", base+100_000, "unknown-name", "unknown-version")
	unchanged()

	got = claim(t, s, store.RunClaimParams{Queue: "q2", Known: []flowtype.WorkflowKey{order1}, Owner: "w5", Max: 10, Now: base, LeaseExpiresAt: base + 30_000})
	expectClaimed(got, "w5", base, "other-queue")
	unchanged()
}

func testRunClaimRespectsMax(t *testing.T, s store.Store) {
	var ps []store.RunInsertParams
	for i := range 5 {
		p := newRun(fmt.Sprintf("r%d", i))
		p.RunAt = base - int64(i)
		ps = append(ps, p)
	}
	insert(t, s, ps...)
	seen := map[string]bool{}
	for i, want := range []int{2, 2, 1, 0} {
		got := claim(t, s, store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 2, Now: base, LeaseExpiresAt: base + 1000,
		})
		if len(got) != want {
			t.Fatalf("claim %d with Max 2: got %d runs, want %d", i, len(got), want)
		}
		for _, r := range got {
			if seen[r.ID] {
				t.Errorf("run %s claimed twice", r.ID)
			}
			seen[r.ID] = true
		}
	}
	if len(seen) != 5 {
		t.Errorf("claimed %d distinct runs, want 5", len(seen))
	}
}

func testRunClaimOrder(t *testing.T, s store.Store) {
	// IDs deliberately disagree with the expected order.
	spec := []struct {
		id       string
		priority int
		runAt    int64
	}{
		{"a", 0, base - 300},
		{"b", 5, base - 10},
		{"c", 5, base - 200},
		{"d", 1, base - 500},
		{"e", -1, base - 1000},
		{"f", 5, base - 100},
		// Not due yet, at the top and in the middle: never claimed.
		{"g", 9, base + 1},
		{"h", 1, base + 50_000},
		// The lowest priority there is.
		{"i", math.MinInt64, base - 1},
	}
	var ps []store.RunInsertParams
	for _, sp := range spec {
		p := newRun(sp.id)
		p.Priority, p.RunAt = sp.priority, sp.runAt
		ps = append(ps, p)
	}
	insert(t, s, ps...)
	for _, want := range [][]string{{"c", "f", "b"}, {"d", "a"}, {"e", "i"}, {}} {
		n := len(want)
		if n == 0 {
			n = 10 // whatever is left: only runs not due yet
		}
		got := claim(t, s, store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: n, Now: base, LeaseExpiresAt: base + 1000,
		})
		if !slices.Equal(ids(got), want) {
			t.Errorf("claim of %d: got %v, want %v (priority first, then run_at)", n, ids(got), want)
		}
	}
}

// testRunClaimPastManyPriorities: a claim goes on past any number of
// priorities whose runs are not due (an adapter may learn them in pages)
// to the due runs below them, in priority order.
func testRunClaimPastManyPriorities(t *testing.T, s store.Store) {
	var ps []store.RunInsertParams
	for i := range 100 {
		p := newRun(fmt.Sprintf("later%03d", i))
		p.Priority, p.RunAt = 1000-i, base+60_000
		ps = append(ps, p)
	}
	for i, prio := range []int{-5, -3, -4} {
		p := newRun(fmt.Sprintf("due%d", i))
		p.Priority, p.RunAt = prio, base-1
		ps = append(ps, p)
	}
	insert(t, s, ps...)
	got := claim(t, s, store.RunClaimParams{
		Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 10, Now: base, LeaseExpiresAt: base + 1000,
	})
	if want := []string{"due1", "due2", "due0"}; !slices.Equal(ids(got), want) {
		t.Errorf("claim below 100 priorities of runs not due: got %v, want %v", ids(got), want)
	}
}

func testRunClaimFenceAndStatus(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	before := get(t, s, "r")
	if before.Fence != 0 || before.LeaseOwner != "" {
		t.Fatalf("new run has fence %d, owner %q; want 0 and none", before.Fence, before.LeaseOwner)
	}
	c1 := claimQueue(t, s, "q", "w1", base)
	if c1.Fence != 1 || c1.Status != flowtype.StatusRunning || c1.LeaseOwner != "w1" {
		t.Errorf("first claim: fence %d, status %s, owner %q; want 1, running, w1", c1.Fence, c1.Status, c1.LeaseOwner)
	}

	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, c1.Lease(), store.RunReleaseParams{RunAt: base + 5_000, Now: base + 10})
	})
	want := c1
	want.Status, want.LeaseOwner, want.LeaseExpiresAt, want.RunAt, want.UpdatedAt = flowtype.StatusPending, "", 0, base+5_000, base+10
	checkRun(t, s, want)
	if got := claim(t, s, store.RunClaimParams{Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w2", Max: 1, Now: base + 4_999, LeaseExpiresAt: base + 9_999}); len(got) != 0 {
		t.Errorf("claim before the released run_at got %v", ids(got))
	}

	c2 := claimQueue(t, s, "q", "w2", base+5_000)
	if c2.Fence != 2 || c2.Status != flowtype.StatusRunning {
		t.Errorf("second claim: fence %d, status %s; want 2, running", c2.Fence, c2.Status)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunStartCompensating(ctx, c2.Lease(), "charge failed", base+5_001)
	})
	want = c2
	want.Status, want.Error, want.UpdatedAt = flowtype.StatusCompensating, "charge failed", base+5_001
	checkRun(t, s, want)

	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, c2.Lease(), store.RunReleaseParams{RunAt: base + 6_000, Now: base + 5_002})
	})
	want.LeaseOwner, want.LeaseExpiresAt, want.RunAt, want.UpdatedAt = "", 0, base+6_000, base+5_002
	checkRun(t, s, want) // still compensating

	c3 := claimQueue(t, s, "q", "w3", base+6_000)
	if c3.Fence != 3 || c3.Status != flowtype.StatusCompensating || c3.Error != "charge failed" {
		t.Errorf("claim of a compensating run: fence %d, status %s, error %q; want 3, compensating, the error kept",
			c3.Fence, c3.Status, c3.Error)
	}
	expectErr(t, s, store.ErrLeaseLost, "heartbeat with the previous claim's lease", func(ctx context.Context, tx store.Tx) error {
		_, err := tx.RunHeartbeat(ctx, c2.Lease(), base+99_999, base+6_001)
		return err
	})
	checkRun(t, s, c3)
}

func testRunClaimConcurrent(t *testing.T, s store.Store) {
	const runs, workers = 40, 4
	var ps []store.RunInsertParams
	for i := range runs {
		ps = append(ps, newRun(fmt.Sprintf("r%02d", i)))
	}
	insert(t, s, ps...)

	var mu sync.Mutex
	owners := map[string]string{}
	g, ctx := errgroup.WithContext(t.Context())
	for w := range workers {
		owner := fmt.Sprintf("w%d", w)
		g.Go(func() error {
			for {
				var got []store.Run
				err := s.Write(ctx, func(tx store.Tx) error {
					var err error
					got, err = tx.RunClaim(ctx, store.RunClaimParams{
						Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: owner, Max: 3, Now: base, LeaseExpiresAt: base + 1000,
					})
					return err
				})
				if err != nil || len(got) == 0 {
					return err
				}
				mu.Lock()
				for _, r := range got {
					if prev, dup := owners[r.ID]; dup {
						mu.Unlock()
						return fmt.Errorf("run %s claimed by %s and %s", r.ID, prev, owner)
					}
					owners[r.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(owners) != runs {
		t.Errorf("claimed %d runs, want %d", len(owners), runs)
	}
	for id, owner := range owners {
		r := get(t, s, id)
		if r.LeaseOwner != owner || r.Fence != 1 {
			t.Errorf("run %s: owner %q fence %d, want %q and 1", id, r.LeaseOwner, r.Fence, owner)
		}
	}
}

// fencedOps are the writes that must apply only under the current lease.
var fencedOps = []struct {
	name string
	fn   func(ctx context.Context, tx store.Tx, l store.Lease) error
}{
	{"RunHeartbeat", func(ctx context.Context, tx store.Tx, l store.Lease) error {
		_, err := tx.RunHeartbeat(ctx, l, base+999_999, base+7)
		return err
	}},
	{"RunLeaseCheck", func(ctx context.Context, tx store.Tx, l store.Lease) error {
		_, err := tx.RunLeaseCheck(ctx, l)
		return err
	}},
	{"RunFinish", func(ctx context.Context, tx store.Tx, l store.Lease) error {
		return tx.RunFinish(ctx, l, store.RunFinishParams{
			Status: flowtype.StatusCompleted, Output: []byte(`"stolen"`), FinishedAt: base + 7, Now: base + 7,
		})
	}},
	{"RunRelease", func(ctx context.Context, tx store.Tx, l store.Lease) error {
		return tx.RunRelease(ctx, l, store.RunReleaseParams{RunAt: base + 999_999, Now: base + 7})
	}},
	{"RunStartCompensating", func(ctx context.Context, tx store.Tx, l store.Lease) error {
		return tx.RunStartCompensating(ctx, l, "stolen", base+7)
	}},
}

func testFencedWritesRejectLostLease(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	c := claimQueue(t, s, "q", "w1", base)
	l := c.Lease()
	lost := []struct {
		name  string
		lease store.Lease
	}{
		{"stale fence", store.Lease{RunID: l.RunID, Owner: l.Owner, Fence: l.Fence - 1}},
		{"future fence", store.Lease{RunID: l.RunID, Owner: l.Owner, Fence: l.Fence + 1}},
		{"wrong owner", store.Lease{RunID: l.RunID, Owner: "w2", Fence: l.Fence}},
		{"empty owner", store.Lease{RunID: l.RunID, Owner: "", Fence: l.Fence}},
		{"unknown run", store.Lease{RunID: "ghost", Owner: l.Owner, Fence: l.Fence}},
	}
	for _, op := range fencedOps {
		for _, bad := range lost {
			expectErr(t, s, store.ErrLeaseLost, op.name+" with "+bad.name, func(ctx context.Context, tx store.Tx) error {
				return op.fn(ctx, tx, bad.lease)
			})
			checkRun(t, s, c)
		}
	}

	// The current lease works.
	var cancel bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		cancel, err = tx.RunHeartbeat(ctx, l, base+60_000, base+10)
		return err
	})
	if cancel {
		t.Error("heartbeat reported a cancellation nobody requested")
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		cancel, err = tx.RunLeaseCheck(ctx, l)
		return err
	})
	if cancel {
		t.Error("lease check reported a cancellation nobody requested")
	}
	want := c
	want.LeaseExpiresAt, want.UpdatedAt = base+60_000, base+10
	checkRun(t, s, want)
}

func testRunFinish(t *testing.T, s store.Store) {
	p := runIn(t, s, "done")
	c := claimQueue(t, s, p.Queue, "w1", base)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunFinish(ctx, c.Lease(), store.RunFinishParams{
			Status: flowtype.StatusCompleted, Output: []byte(`{"total":42}`), FinishedAt: base + 50, Now: base + 51,
		})
	})
	want := c
	want.Status, want.Output, want.LeaseOwner, want.LeaseExpiresAt, want.FinishedAt, want.UpdatedAt =
		flowtype.StatusCompleted, []byte(`{"total":42}`), "", 0, base+50, base+51
	checkRun(t, s, want)
	// Finishing released the lease: it can no longer write.
	for _, op := range fencedOps {
		expectErr(t, s, store.ErrLeaseLost, op.name+" after finish", func(ctx context.Context, tx store.Tx) error {
			return op.fn(ctx, tx, c.Lease())
		})
	}
	checkRun(t, s, want)

	// A suspended run is not finished: FinishedAt stays zero.
	p = runIn(t, s, "parked")
	c = claimQueue(t, s, p.Queue, "w1", base)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunStartCompensating(ctx, c.Lease(), "charge failed", base+1)
	})
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunFinish(ctx, c.Lease(), store.RunFinishParams{
			Status: flowtype.StatusSuspended, Error: "refund failed", Reason: "compensation of refund exhausted its retries", Now: base + 2,
		})
	})
	want = c
	want.Status, want.Error, want.Reason, want.LeaseOwner, want.LeaseExpiresAt, want.UpdatedAt =
		flowtype.StatusSuspended, "refund failed", "compensation of refund exhausted its retries", "", 0, base+2
	checkRun(t, s, want)
}

// testRunFinishMany: each item is recorded as RunFinish and StepComplete
// would record it, a lost lease leaves its run and step untouched and is
// reported by index, and a step that is not running fails the whole call.
func testRunFinishMany(t *testing.T, s store.Store) {
	var claimed []store.Run
	for _, id := range []string{"a", "b", "c", "d"} {
		p := runIn(t, s, id)
		claimed = append(claimed, claimQueue(t, s, p.Queue, "w1", base))
	}
	a, b, c, d := claimed[0], claimed[1], claimed[2], claimed[3]
	stepA := store.StepKey{RunID: "a", Name: "send"}
	stepB := store.StepKey{RunID: "b", Name: "send"}
	beginStep(t, s, store.StepKey{RunID: "a", Name: "before"}, `{}`, base+1)
	completeStep(t, s, store.StepKey{RunID: "a", Name: "before"}, `1`, false, base+2)
	beginStep(t, s, stepA, `{}`, base+3)
	beginStep(t, s, stepB, `{}`, base+3)
	stepBefore := step(t, s, stepB)
	stale := b.Lease()
	stale.Fence--
	items := []store.RunFinishItem{
		{Lease: a.Lease(), Finish: store.RunFinishParams{Status: flowtype.StatusCompleted, Output: []byte(`"A"`), FinishedAt: base + 10, Now: base + 11},
			Step: &store.StepCompleteParams{Key: stepA, Output: []byte(`"sent"`), Compensable: true, Now: base + 9}},
		{Lease: stale, Finish: store.RunFinishParams{Status: flowtype.StatusCompleted, Output: []byte(`"B"`), FinishedAt: base + 10, Now: base + 11},
			Step: &store.StepCompleteParams{Key: stepB, Output: []byte(`"stolen"`), Now: base + 9}},
		{Lease: c.Lease(), Finish: store.RunFinishParams{Status: flowtype.StatusFailed, Error: "boom", FinishedAt: base + 12, Now: base + 12}},
		{Lease: d.Lease(), Finish: store.RunFinishParams{Status: flowtype.StatusSuspended, Error: "refund failed", Reason: "parked", Now: base + 13}},
	}
	var lost []int
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		lost, err = tx.RunFinishMany(ctx, items)
		return err
	})
	if !slices.Equal(lost, []int{1}) {
		t.Errorf("lost %v, want [1] (the stale fence)", lost)
	}
	want := a
	want.Status, want.Output, want.LeaseOwner, want.LeaseExpiresAt, want.FinishedAt, want.UpdatedAt =
		flowtype.StatusCompleted, []byte(`"A"`), "", 0, base+10, base+11
	checkRun(t, s, want)
	checkRun(t, s, b)
	want = c
	want.Status, want.Error, want.LeaseOwner, want.LeaseExpiresAt, want.FinishedAt, want.UpdatedAt =
		flowtype.StatusFailed, "boom", "", 0, base+12, base+12
	checkRun(t, s, want)
	want = d
	want.Status, want.Error, want.Reason, want.LeaseOwner, want.LeaseExpiresAt, want.UpdatedAt =
		flowtype.StatusSuspended, "refund failed", "parked", "", 0, base+13
	checkRun(t, s, want)
	if st := step(t, s, stepA); st.Status != store.StepCompleted || string(st.Output) != `"sent"` || !st.Compensable ||
		st.FinishedAt != base+9 || st.CompletedSeq != 2 {
		t.Errorf("step %s: %+v; want completed with output \"sent\", compensable, finished %d, CompletedSeq 2 (after before)", stepA, st, base+9)
	}
	checkStep(t, s, stepBefore)

	// A step that is not running fails the call, which the caller's
	// transaction rolls back.
	e := claimQueue(t, s, runIn(t, s, "e").Queue, "w1", base)
	stepE := store.StepKey{RunID: "e", Name: "send"}
	beginStep(t, s, stepE, `{}`, base+14)
	completeStep(t, s, stepE, `"once"`, false, base+15)
	doneE := step(t, s, stepE)
	err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.RunFinishMany(t.Context(), []store.RunFinishItem{{Lease: e.Lease(),
			Finish: store.RunFinishParams{Status: flowtype.StatusCompleted, FinishedAt: base + 20, Now: base + 20},
			Step:   &store.StepCompleteParams{Key: stepE, Output: []byte(`"again"`), Now: base + 20}}})
		return err
	})
	if !errors.Is(err, flowtype.ErrConflict) {
		t.Errorf("RunFinishMany with a completed step: error %v, want %v", err, flowtype.ErrConflict)
	}
	checkRun(t, s, e)
	checkStep(t, s, doneE)

	// No items, no statement.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		lost, err := tx.RunFinishMany(ctx, nil)
		if len(lost) != 0 {
			t.Errorf("lost %v of no items", lost)
		}
		return err
	})
}

func testRunRescue(t *testing.T, s store.Store) {
	claimWithLease := func(id string, expires int64) store.Run {
		t.Helper()
		p := runIn(t, s, id)
		runs := claim(t, s, store.RunClaimParams{
			Queue: p.Queue, Known: []flowtype.WorkflowKey{order1}, Owner: "w1", Max: 1, Now: base, LeaseExpiresAt: expires,
		})
		if len(runs) != 1 {
			t.Fatalf("claim %s: got %v", id, ids(runs))
		}
		return runs[0]
	}
	expired := claimWithLease("expired", base+100)
	alive := claimWithLease("alive", base+10_000)
	compensating := claimWithLease("compensating", base+100)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunStartCompensating(ctx, compensating.Lease(), "step failed", base+1)
	})
	compensating = get(t, s, "compensating")
	finished := claimWithLease("finished", base+100)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunFinish(ctx, finished.Lease(), store.RunFinishParams{
			Status: flowtype.StatusCompleted, Output: []byte(`"ok"`), FinishedAt: base + 50, Now: base + 50,
		})
	})
	finished = get(t, s, "finished")
	pending := runWithStatus(t, s, "pending", flowtype.StatusPending)

	var rescued []store.RescuedRun
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		rescued, err = tx.RunRescue(ctx, base+500, 10)
		return err
	})
	slices.SortFunc(rescued, func(a, b store.RescuedRun) int { return strings.Compare(a.ID, b.ID) })
	wantRescued := []store.RescuedRun{
		{ID: "compensating", LeaseExpiresAt: base + 100, Fence: 1},
		{ID: "expired", LeaseExpiresAt: base + 100, Fence: 1},
	}
	if !slices.Equal(rescued, wantRescued) {
		t.Errorf("rescued %+v, want %+v", rescued, wantRescued)
	}
	wantExpired := expired
	wantExpired.Status, wantExpired.LeaseOwner, wantExpired.LeaseExpiresAt, wantExpired.UpdatedAt = flowtype.StatusPending, "", 0, base+500
	checkRun(t, s, wantExpired)
	wantComp := compensating
	wantComp.LeaseOwner, wantComp.LeaseExpiresAt, wantComp.UpdatedAt = "", 0, base+500
	checkRun(t, s, wantComp)
	checkRun(t, s, alive)
	checkRun(t, s, finished)
	checkRun(t, s, pending)

	// The rescued run's old lease can no longer write.
	for _, op := range fencedOps {
		expectErr(t, s, store.ErrLeaseLost, op.name+" with a rescued lease", func(ctx context.Context, tx store.Tx) error {
			return op.fn(ctx, tx, expired.Lease())
		})
	}
	checkRun(t, s, wantExpired)

	// Nor after the run is claimed again, by another owner or the same one.
	again := claimQueue(t, s, "queue-expired", "w2", base+600)
	if again.Fence != 2 {
		t.Errorf("reclaimed run has fence %d, want 2", again.Fence)
	}
	for _, old := range []store.Lease{expired.Lease(), {RunID: "expired", Owner: "w1", Fence: again.Fence}} {
		for _, op := range fencedOps {
			expectErr(t, s, store.ErrLeaseLost, fmt.Sprintf("%s with %+v after reclaim", op.name, old), func(ctx context.Context, tx store.Tx) error {
				return op.fn(ctx, tx, old)
			})
		}
	}
	checkRun(t, s, again)

	// A second rescue at the same time finds nothing.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		rescued, err = tx.RunRescue(ctx, base+500, 10)
		return err
	})
	if len(rescued) != 0 {
		t.Errorf("second rescue got %+v, want nothing", rescued)
	}
	checkRun(t, s, alive)
	checkRun(t, s, finished)
}

func testRunRescueLimit(t *testing.T, s store.Store) {
	var ps []store.RunInsertParams
	for i := range 3 {
		ps = append(ps, newRun(fmt.Sprintf("r%d", i)))
	}
	insert(t, s, ps...)
	if got := claim(t, s, store.RunClaimParams{Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 3, Now: base, LeaseExpiresAt: base + 10}); len(got) != 3 {
		t.Fatalf("claimed %d runs, want 3", len(got))
	}
	seen := map[string]bool{}
	for _, want := range []int{2, 1, 0} {
		var rescued []store.RescuedRun
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			rescued, err = tx.RunRescue(ctx, base+100, 2)
			return err
		})
		if len(rescued) != want {
			t.Fatalf("rescue with limit 2 got %d runs, want %d", len(rescued), want)
		}
		for _, r := range rescued {
			if seen[r.ID] {
				t.Errorf("run %s rescued twice", r.ID)
			}
			seen[r.ID] = true
		}
	}
}

// A run read with RunGetForUpdate stays as read until the transaction
// commits: a claim that comes meanwhile does not take it (on PostgreSQL it
// skips the held row; on SQLite it waits for the write lock), so the guarded
// update the read decided on applies. Without the hold, the claim takes
// the run and RunCancelIdle finds it changed, as Cancel did.
func testRunGetForUpdateHoldsTheRun(t *testing.T, s store.Store) {
	insert(t, s, newRun("held"))
	want := get(t, s, "held")
	var claimed []store.Run
	var claimErr error
	claimDone := make(chan struct{})
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.RunGetForUpdate(ctx, "missing"); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("RunGetForUpdate of unknown ID: error %v, want ErrRunNotFound", err)
		}
		got, err := tx.RunGetForUpdate(ctx, "held")
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("RunGetForUpdate = %+v, want what RunGet read, %+v", got, want)
		}
		go func() {
			defer close(claimDone)
			claimErr = s.Write(t.Context(), func(tx store.Tx) error {
				var err error
				claimed, err = tx.RunClaim(t.Context(), store.RunClaimParams{
					Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 1, Now: base, LeaseExpiresAt: base + 30_000,
				})
				return err
			})
		}()
		// A claim that skips the held run returns at once; one that waits
		// for the hold is given a moment to take the run, which it must not.
		select {
		case <-claimDone:
		case <-time.After(200 * time.Millisecond):
		}
		ok, err := tx.RunCancelIdle(ctx, "held", "cancelled", base+1)
		if err != nil {
			return err
		}
		if !ok {
			t.Errorf("RunCancelIdle of a run read with RunGetForUpdate reported false: it changed while held")
		}
		return nil
	})
	<-claimDone
	if claimErr != nil {
		t.Fatalf("claim: %v", claimErr)
	}
	if len(claimed) != 0 {
		t.Errorf("a claim while the run was held took %d run(s), want none", len(claimed))
	}
	if r := get(t, s, "held"); r.Status != flowtype.StatusCancelled || r.LeaseOwner != "" {
		t.Errorf("held run after the hold: %s, lease owner %q; want cancelled, unleased", r.Status, r.LeaseOwner)
	}
}

func testRunRequestCancel(t *testing.T, s store.Store) {
	const now = base + 1000
	cases := []struct {
		status flowtype.RunStatus
		want   bool
	}{
		{flowtype.StatusPending, true},
		{flowtype.StatusRunning, true},
		{flowtype.StatusCompensating, true},
		{flowtype.StatusCompleted, false},
		{flowtype.StatusFailed, false},
		{flowtype.StatusSuspended, false},
		{flowtype.StatusCancelled, false},
	}
	before := map[flowtype.RunStatus]store.Run{}
	for _, c := range cases {
		before[c.status] = runWithStatus(t, s, string(c.status), c.status)
	}
	// A delayed pending run.
	delayed := newRun("delayed")
	delayed.RunAt = base + 60_000
	insert(t, s, delayed)
	for _, c := range cases {
		var ok bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			ok, err = tx.RunRequestCancel(ctx, string(c.status), now)
			return err
		})
		if ok != c.want {
			t.Errorf("request cancel of a %s run reported %v, want %v", c.status, ok, c.want)
		}
		if !c.want {
			checkRun(t, s, before[c.status])
			continue
		}
		r := get(t, s, string(c.status))
		if !r.CancelRequested || r.Status != c.status || r.UpdatedAt != now {
			t.Errorf("after request cancel of a %s run: cancel requested %v, status %s, updated %d; want true, %s, %d",
				c.status, r.CancelRequested, r.Status, r.UpdatedAt, c.status, now)
		}
		if r.LeaseOwner != before[c.status].LeaseOwner || r.Fence != before[c.status].Fence {
			t.Errorf("request cancel of a %s run changed its lease", c.status)
		}
	}
	// Running code learns of it through its heartbeat.
	for _, st := range []flowtype.RunStatus{flowtype.StatusRunning, flowtype.StatusCompensating} {
		var cancel bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			cancel, err = tx.RunHeartbeat(ctx, before[st].Lease(), now+30_000, now+1)
			return err
		})
		if !cancel {
			t.Errorf("heartbeat of a %s run does not report the requested cancellation", st)
		}
	}
	// A delayed run becomes claimable now, so its cancellation is handled
	// promptly.
	var ok bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		ok, err = tx.RunRequestCancel(ctx, "delayed", now)
		return err
	})
	if r := get(t, s, "delayed"); !ok || !r.CancelRequested || r.RunAt > now {
		t.Errorf("request cancel of a delayed run: reported %v, cancel requested %v, run_at %d; want true, true, <= %d",
			ok, r.CancelRequested, r.RunAt, now)
	}
	// An unknown run is not cancellable.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		ok, err := tx.RunRequestCancel(ctx, "ghost", now)
		if ok || (err != nil && !errors.Is(err, flowtype.ErrRunNotFound)) {
			t.Errorf("request cancel of an unknown run = %v, %v; want false and no error or ErrRunNotFound", ok, err)
		}
		return nil
	})
}

func testRunSetStatus(t *testing.T, s store.Store) {
	suspended := runWithStatus(t, s, "suspended", flowtype.StatusSuspended)
	pending := runWithStatus(t, s, "pending", flowtype.StatusPending)
	running := runWithStatus(t, s, "running", flowtype.StatusRunning)

	// Resume a suspended run: it becomes claimable as compensating.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunSetStatus(ctx, store.RunSetStatusParams{
			ID: "suspended", Expected: flowtype.StatusSuspended, Status: flowtype.StatusCompensating, Reason: "resumed by operator",
			RunAt: base + 10, Now: base + 10,
		})
	})
	want := suspended
	want.Status, want.Reason, want.RunAt, want.UpdatedAt = flowtype.StatusCompensating, "resumed by operator", base+10, base+10
	checkRun(t, s, want)
	if c := claimQueue(t, s, "queue-suspended", "w9", base+10); c.Status != flowtype.StatusCompensating {
		t.Errorf("resumed run claimed as %s, want compensating", c.Status)
	}

	conflicts := []struct {
		name string
		p    store.RunSetStatusParams
		run  store.Run
	}{
		{"wrong expected status", store.RunSetStatusParams{
			ID: "pending", Expected: flowtype.StatusSuspended, Status: flowtype.StatusCancelled, FinishedAt: base + 20, Now: base + 20,
		}, pending},
		{"leased run", store.RunSetStatusParams{
			ID: "running", Expected: flowtype.StatusRunning, Status: flowtype.StatusCancelled, FinishedAt: base + 20, Now: base + 20,
		}, running},
	}
	for _, c := range conflicts {
		expectErr(t, s, flowtype.ErrConflict, "set status of a "+c.name, func(ctx context.Context, tx store.Tx) error {
			return tx.RunSetStatus(ctx, c.p)
		})
		checkRun(t, s, c.run)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: "ghost", Expected: flowtype.StatusPending, Status: flowtype.StatusCancelled, Now: base})
		if !errors.Is(err, flowtype.ErrConflict) && !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("set status of an unknown run: error %v, want ErrConflict or ErrRunNotFound", err)
		}
		return nil
	})

	// Cancel a pending run.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunSetStatus(ctx, store.RunSetStatusParams{
			ID: "pending", Expected: flowtype.StatusPending, Status: flowtype.StatusCancelled, Reason: "cancelled by operator",
			RunAt: pending.RunAt, FinishedAt: base + 30, Now: base + 30,
		})
	})
	want = pending
	want.Status, want.Reason, want.FinishedAt, want.UpdatedAt = flowtype.StatusCancelled, "cancelled by operator", base+30, base+30
	checkRun(t, s, want)
}

func testRunCountUnrunnable(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got, err := s.Reader().RunCountUnrunnable(ctx, []flowtype.WorkflowKey{order1}); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	add := func(id string, wf flowtype.WorkflowKey) store.RunInsertParams {
		p := newRun(id)
		p.Workflow, p.Queue = wf, "queue-"+id
		return p
	}
	insert(t, s, add("o1-a", order1), add("o1-b", order1), add("o2-a", order2), add("o2-b", order2), add("o2-c", order2),
		add("o3", order3), add("inv-a", invoice1))
	insertWithStatus(t, s, add("inv-comp", invoice1), flowtype.StatusCompensating)
	// Unleased and compensating: ready again, counts.
	invComp := get(t, s, "inv-comp")
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, invComp.Lease(), store.RunReleaseParams{RunAt: base, Now: base + 2})
	})
	// Leased or finished runs do not count.
	insertWithStatus(t, s, add("inv-leased", invoice1), flowtype.StatusRunning)
	insertWithStatus(t, s, add("o2-done", order2), flowtype.StatusCompleted)
	insertWithStatus(t, s, add("o3-parked", order3), flowtype.StatusSuspended)
	insertWithStatus(t, s, add("o3-comp-leased", order3), flowtype.StatusCompensating)

	count := func(known ...flowtype.WorkflowKey) []store.UnrunnableCount {
		t.Helper()
		got, err := s.Reader().RunCountUnrunnable(ctx, known)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b store.UnrunnableCount) int {
			if c := strings.Compare(a.Workflow.Name, b.Workflow.Name); c != 0 {
				return c
			}
			return a.Workflow.Version - b.Workflow.Version
		})
		return got
	}
	want := []store.UnrunnableCount{{Workflow: invoice1, Runs: 2}, {Workflow: order2, Runs: 3}, {Workflow: order3, Runs: 1}}
	if got := count(order1); !slices.Equal(got, want) {
		t.Errorf("unrunnable with order:1 known = %+v, want %+v", got, want)
	}
	want = append([]store.UnrunnableCount{{Workflow: invoice1, Runs: 2}, {Workflow: order1, Runs: 2}}, want[1:]...)
	if got := count(); !slices.Equal(got, want) {
		t.Errorf("unrunnable with nothing known = %+v, want %+v", got, want)
	}
	if got := count(order1, order2, order3, invoice1); len(got) != 0 {
		t.Errorf("unrunnable with everything known = %+v, want none", got)
	}
}

func testRunCountByStatus(t *testing.T, s store.Store) {
	nonzero := func() map[flowtype.RunStatus]int64 {
		t.Helper()
		got, err := s.Reader().RunCountByStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := map[flowtype.RunStatus]int64{}
		for k, v := range got {
			if v != 0 {
				out[k] = v
			}
		}
		return out
	}
	if got := nonzero(); len(got) != 0 {
		t.Fatalf("empty store counts %v", got)
	}
	want := map[flowtype.RunStatus]int64{
		flowtype.StatusPending: 3, flowtype.StatusRunning: 1, flowtype.StatusCompensating: 1, flowtype.StatusCompleted: 2,
		flowtype.StatusFailed: 1, flowtype.StatusSuspended: 1, flowtype.StatusCancelled: 1,
	}
	for st, n := range want {
		for i := range n {
			runWithStatus(t, s, fmt.Sprintf("%s-%d", st, i), st)
		}
	}
	if got := nonzero(); !reflect.DeepEqual(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
}

func testRunList(t *testing.T, s store.Store) {
	ctx := t.Context()
	add := func(id string, wf flowtype.WorkflowKey, queue string, created int64, status flowtype.RunStatus) {
		t.Helper()
		p := newRun(id)
		p.Workflow, p.Queue, p.Now = wf, queue, created
		if status == flowtype.StatusPending {
			insert(t, s, p)
			return
		}
		// Drive it alone in a private queue, then no other run interferes.
		p.Queue = "private-" + id
		insertWithStatus(t, s, p, status)
	}
	add("p1", order1, "q1", base+1, flowtype.StatusPending)
	add("p2", order1, "q2", base+2, flowtype.StatusPending)
	add("i1", invoice1, "q1", base+3, flowtype.StatusPending)
	add("r1", order1, "x", base+4, flowtype.StatusRunning)
	add("c1", invoice1, "x", base+5, flowtype.StatusCompleted)
	add("c2", order2, "x", base+6, flowtype.StatusCompleted)

	list := func(p store.RunListParams) []string {
		t.Helper()
		runs, err := s.Reader().RunList(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		out := ids(runs)
		for _, r := range runs {
			checkRun(t, s, r) // listed runs are whole rows
		}
		slices.Sort(out)
		return out
	}
	cases := []struct {
		p    store.RunListParams
		want []string
	}{
		{store.RunListParams{}, []string{"c1", "c2", "i1", "p1", "p2", "r1"}},
		{store.RunListParams{Status: flowtype.StatusPending}, []string{"i1", "p1", "p2"}},
		{store.RunListParams{Status: flowtype.StatusCompleted}, []string{"c1", "c2"}},
		{store.RunListParams{Workflow: "invoice"}, []string{"c1", "i1"}},
		{store.RunListParams{Queue: "q1"}, []string{"i1", "p1"}},
		{store.RunListParams{Status: flowtype.StatusPending, Workflow: "order", Queue: "q2"}, []string{"p2"}},
		{store.RunListParams{Status: flowtype.StatusFailed}, []string{}},
		{store.RunListParams{Workflow: "nope"}, []string{}},
	}
	for _, c := range cases {
		if got := list(c.p); !slices.Equal(got, c.want) {
			t.Errorf("RunList(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
	all := list(store.RunListParams{})
	got := list(store.RunListParams{Limit: 2})
	if len(got) != 2 {
		t.Errorf("RunList with Limit 2 returned %d runs", len(got))
	}
	for _, id := range got {
		if !slices.Contains(all, id) {
			t.Errorf("RunList with Limit 2 returned unknown run %s", id)
		}
	}
}
