// Package storetest is the conformance suite every store adapter runs: call
// Exercise from the adapter's tests with a function that opens a fresh,
// empty store.
//
// It imports internal/store, the standard library and x/sync only.
package storetest

import (
	"bytes"
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

	"github.com/flowlite/flowlite/internal/store"
)

// base is the clock of every test: times are Unix milliseconds.
const base = int64(1_700_000_000_000)

var (
	order1   = store.WorkflowKey{Name: "order", Version: 1}
	order2   = store.WorkflowKey{Name: "order", Version: 2}
	order3   = store.WorkflowKey{Name: "order", Version: 3}
	invoice1 = store.WorkflowKey{Name: "invoice", Version: 1}
)

// Exercise runs the conformance suite against the stores open returns. open
// must return a fresh, empty store each time it is called; Exercise closes
// it when the subtest ends.
func Exercise(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunInsert", testRunInsert},
		{"RunGetNotFound", testRunGetNotFound},
		{"RunClaimSelectsReadyRuns", testRunClaimSelectsReadyRuns},
		{"RunClaimRespectsMax", testRunClaimRespectsMax},
		{"RunClaimOrder", testRunClaimOrder},
		{"RunClaimFenceAndStatus", testRunClaimFenceAndStatus},
		{"RunClaimConcurrent", testRunClaimConcurrent},
		{"FencedWritesRejectLostLease", testFencedWritesRejectLostLease},
		{"RunFinish", testRunFinish},
		{"RunRescue", testRunRescue},
		{"RunRescueLimit", testRunRescueLimit},
		{"RunRequestCancel", testRunRequestCancel},
		{"RunSetStatus", testRunSetStatus},
		{"StepBegin", testStepBegin},
		{"StepComplete", testStepComplete},
		{"StepFail", testStepFail},
		{"StepCompensationArm", testStepCompensationArm},
		{"StepCompensation", testStepCompensation},
		{"Events", testEvents},
		{"EventsOfConcurrentWrites", testEventsOfConcurrentWrites},
		{"RunCountUnrunnable", testRunCountUnrunnable},
		{"RunCountByStatus", testRunCountByStatus},
		{"RunList", testRunList},
		{"Workflows", testWorkflows},
		{"WriteRollsBackOnError", testWriteRollsBackOnError},
		{"WriteRollsBackOnPanic", testWriteRollsBackOnPanic},
		{"WriteCancelledContext", testWriteCancelledContext},
		{"WritesConcurrentIsolated", testWritesConcurrentIsolated},
	}
	tests = append(tests, scheduleTests()...)
	tests = append(tests, queueTests()...)
	tests = append(tests, maintenanceTests()...)
	tests = append(tests, reportTests()...)
	tests = append(tests, operatorTests()...)
	tests = append(tests, signalTests()...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close store: %v", err)
				}
			})
			tt.fn(t, s)
		})
	}
}

// ---- helpers ----

// do runs fn in a write transaction and fails the test when it errs.
func do(t *testing.T, s store.Store, fn func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	ctx := t.Context()
	if err := s.Write(ctx, func(tx store.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// expectErr runs op in a write transaction that commits whatever op
// returns (so a write that should change nothing is given every chance to
// change something) and checks op's error wraps want.
func expectErr(t *testing.T, s store.Store, want error, what string, op func(ctx context.Context, tx store.Tx) error) {
	t.Helper()
	var opErr error
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		opErr = op(ctx, tx)
		return nil
	})
	if !errors.Is(opErr, want) {
		t.Errorf("%s: error %v, want %v", what, opErr, want)
	}
}

// newRun returns insert parameters of a ready run of order:1 on queue "q".
func newRun(id string) store.RunInsertParams {
	return store.RunInsertParams{
		ID: id, Workflow: order1, Queue: "q", Input: []byte(`{"id":"` + id + `"}`), RunAt: base, Now: base,
	}
}

func insert(t *testing.T, s store.Store, runs ...store.RunInsertParams) {
	t.Helper()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, p := range runs {
			ok, err := tx.RunInsert(ctx, p)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("insert run %s: reported as duplicate", p.ID)
			}
		}
		return nil
	})
}

func get(t *testing.T, s store.Store, id string) store.Run {
	t.Helper()
	r, err := s.Reader().RunGet(t.Context(), id)
	if err != nil {
		t.Fatalf("get run %s: %v", id, err)
	}
	return r
}

// claim claims runs and returns them sorted the way the claim query picks
// them (RETURNING order is not the ORDER BY on SQLite).
func claim(t *testing.T, s store.Store, p store.RunClaimParams) []store.Run {
	t.Helper()
	var runs []store.Run
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		runs, err = tx.RunClaim(ctx, p)
		return err
	})
	sortClaimOrder(runs)
	return runs
}

func sortClaimOrder(runs []store.Run) {
	slices.SortFunc(runs, func(a, b store.Run) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		if a.RunAt != b.RunAt {
			return int(a.RunAt - b.RunAt)
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// claimQueue claims the single ready order:1 run of queue at now and
// returns it; the lease expires 30 s later.
func claimQueue(t *testing.T, s store.Store, queue, owner string, now int64) store.Run {
	t.Helper()
	runs := claim(t, s, store.RunClaimParams{
		Queue: queue, Known: []store.WorkflowKey{order1, order2, order3, invoice1}, Owner: owner, Max: 10,
		Now: now, LeaseExpiresAt: now + 30_000,
	})
	if len(runs) != 1 {
		t.Fatalf("claim queue %s: got %d runs (%v), want 1", queue, len(runs), ids(runs))
	}
	return runs[0]
}

// runIn inserts a run alone in its own queue (named after it), so that it
// can be claimed on its own, and returns its insert parameters.
func runIn(t *testing.T, s store.Store, id string) store.RunInsertParams {
	t.Helper()
	p := newRun(id)
	p.Queue = "queue-" + id
	insert(t, s, p)
	return p
}

// runWithStatus inserts a run in its own queue and drives it to status.
func runWithStatus(t *testing.T, s store.Store, id string, status store.RunStatus) store.Run {
	t.Helper()
	p := newRun(id)
	p.Queue = "queue-" + id
	return insertWithStatus(t, s, p, status)
}

// insertWithStatus inserts a run and drives it to status. The run must be
// the only ready run of its queue.
func insertWithStatus(t *testing.T, s store.Store, p store.RunInsertParams, status store.RunStatus) store.Run {
	t.Helper()
	id := p.ID
	insert(t, s, p)
	if status == store.RunPending {
		return get(t, s, id)
	}
	r := claimQueue(t, s, p.Queue, "w-"+id, base)
	l := r.Lease()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		switch status {
		case store.RunRunning:
			return nil
		case store.RunCompensating:
			return tx.RunStartCompensating(ctx, l, "step failed", base+1)
		case store.RunSuspended:
			return tx.RunFinish(ctx, l, store.RunFinishParams{Status: status, Error: "compensation failed", Reason: "needs a person", Now: base + 1})
		case store.RunCompleted:
			return tx.RunFinish(ctx, l, store.RunFinishParams{Status: status, Output: []byte(`"ok"`), FinishedAt: base + 1, Now: base + 1})
		default:
			return tx.RunFinish(ctx, l, store.RunFinishParams{Status: status, Error: "boom", FinishedAt: base + 1, Now: base + 1})
		}
	})
	r = get(t, s, id)
	if r.Status != status {
		t.Fatalf("run %s: status %s, want %s", id, r.Status, status)
	}
	return r
}

func ids(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// diff lists the fields in which two records differ; []byte fields compare
// by content, with nil equal to empty.
func diff[T any](want, got T) string {
	wv, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	var out []string
	for i := range wv.NumField() {
		name := wv.Type().Field(i).Name
		w, g := wv.Field(i).Interface(), gv.Field(i).Interface()
		if wb, ok := w.([]byte); ok {
			if gb := g.([]byte); !bytes.Equal(wb, gb) {
				out = append(out, fmt.Sprintf("%s: want %q, got %q", name, wb, gb))
			}
			continue
		}
		if !reflect.DeepEqual(w, g) {
			out = append(out, fmt.Sprintf("%s: want %v, got %v", name, w, g))
		}
	}
	return strings.Join(out, "; ")
}

// checkRun fails the test when the stored run differs from want.
func checkRun(t *testing.T, s store.Store, want store.Run) {
	t.Helper()
	if d := diff(want, get(t, s, want.ID)); d != "" {
		t.Errorf("run %s: %s", want.ID, d)
	}
}

func steps(t *testing.T, s store.Store, runID string) map[store.StepKey]store.Step {
	t.Helper()
	list, err := s.Reader().StepList(t.Context(), runID)
	if err != nil {
		t.Fatalf("list steps of %s: %v", runID, err)
	}
	m := make(map[store.StepKey]store.Step, len(list))
	for _, st := range list {
		if _, dup := m[st.Key()]; dup {
			t.Errorf("step %s listed twice", st.Key())
		}
		m[st.Key()] = st
	}
	return m
}

func step(t *testing.T, s store.Store, key store.StepKey) store.Step {
	t.Helper()
	st, ok := steps(t, s, key.RunID)[key]
	if !ok {
		t.Fatalf("step %s not found", key)
	}
	return st
}

func checkStep(t *testing.T, s store.Store, want store.Step) {
	t.Helper()
	if d := diff(want, step(t, s, want.Key())); d != "" {
		t.Errorf("step %s: %s", want.Key(), d)
	}
}

func beginStep(t *testing.T, s store.Store, key store.StepKey, input string, now int64) int {
	t.Helper()
	var attempt int
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		attempt, err = tx.StepBegin(ctx, store.StepBeginParams{Key: key, Input: []byte(input), Now: now})
		return err
	})
	return attempt
}

func completeStep(t *testing.T, s store.Store, key store.StepKey, output string, compensable bool, now int64) {
	t.Helper()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: key, Output: []byte(output), Compensable: compensable, Now: now})
	})
}

// ---- runs ----

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
		ID: "r1", Workflow: "order", Version: 2, Queue: "emails", Priority: 3, Status: store.RunPending,
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
	if _, err := s.Reader().RunGet(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("reader RunGet of unknown ID: error %v, want ErrNotFound", err)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.RunGet(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("tx RunGet of unknown ID: error %v, want ErrNotFound", err)
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
	for _, st := range []store.RunStatus{store.RunRunning, store.RunCompleted, store.RunFailed, store.RunSuspended, store.RunCancelled} {
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
			w.Status, w.LeaseOwner, w.LeaseExpiresAt, w.Fence, w.UpdatedAt = store.RunRunning, owner, now+30_000, w.Fence+1, now
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
	params := func(owner string, now int64, known ...store.WorkflowKey) store.RunClaimParams {
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
	if got := claim(t, s, params("w3", base+100_000, store.WorkflowKey{Name: "order", Version: 9})); len(got) != 0 {
		t.Errorf("claim with only an absent version got %v", ids(got))
	}
	unchanged()

	got = claim(t, s, params("w4", base+100_000, order1, order2, invoice1))
	expectClaimed(got, "w4", base+100_000, "unknown-name", "unknown-version")
	unchanged()

	got = claim(t, s, store.RunClaimParams{Queue: "q2", Known: []store.WorkflowKey{order1}, Owner: "w5", Max: 10, Now: base, LeaseExpiresAt: base + 30_000})
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
			Queue: "q", Known: []store.WorkflowKey{order1}, Owner: "w", Max: 2, Now: base, LeaseExpiresAt: base + 1000,
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
			Queue: "q", Known: []store.WorkflowKey{order1}, Owner: "w", Max: n, Now: base, LeaseExpiresAt: base + 1000,
		})
		if !slices.Equal(ids(got), want) {
			t.Errorf("claim of %d: got %v, want %v (priority first, then run_at)", n, ids(got), want)
		}
	}
}

func testRunClaimFenceAndStatus(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	before := get(t, s, "r")
	if before.Fence != 0 || before.LeaseOwner != "" {
		t.Fatalf("new run has fence %d, owner %q; want 0 and none", before.Fence, before.LeaseOwner)
	}
	c1 := claimQueue(t, s, "q", "w1", base)
	if c1.Fence != 1 || c1.Status != store.RunRunning || c1.LeaseOwner != "w1" {
		t.Errorf("first claim: fence %d, status %s, owner %q; want 1, running, w1", c1.Fence, c1.Status, c1.LeaseOwner)
	}

	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, c1.Lease(), store.RunReleaseParams{RunAt: base + 5_000, Now: base + 10})
	})
	want := c1
	want.Status, want.LeaseOwner, want.LeaseExpiresAt, want.RunAt, want.UpdatedAt = store.RunPending, "", 0, base+5_000, base+10
	checkRun(t, s, want)
	if got := claim(t, s, store.RunClaimParams{Queue: "q", Known: []store.WorkflowKey{order1}, Owner: "w2", Max: 1, Now: base + 4_999, LeaseExpiresAt: base + 9_999}); len(got) != 0 {
		t.Errorf("claim before the released run_at got %v", ids(got))
	}

	c2 := claimQueue(t, s, "q", "w2", base+5_000)
	if c2.Fence != 2 || c2.Status != store.RunRunning {
		t.Errorf("second claim: fence %d, status %s; want 2, running", c2.Fence, c2.Status)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunStartCompensating(ctx, c2.Lease(), "charge failed", base+5_001)
	})
	want = c2
	want.Status, want.Error, want.UpdatedAt = store.RunCompensating, "charge failed", base+5_001
	checkRun(t, s, want)

	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, c2.Lease(), store.RunReleaseParams{RunAt: base + 6_000, Now: base + 5_002})
	})
	want.LeaseOwner, want.LeaseExpiresAt, want.RunAt, want.UpdatedAt = "", 0, base+6_000, base+5_002
	checkRun(t, s, want) // still compensating

	c3 := claimQueue(t, s, "q", "w3", base+6_000)
	if c3.Fence != 3 || c3.Status != store.RunCompensating || c3.Error != "charge failed" {
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
						Queue: "q", Known: []store.WorkflowKey{order1}, Owner: owner, Max: 3, Now: base, LeaseExpiresAt: base + 1000,
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
			Status: store.RunCompleted, Output: []byte(`"stolen"`), FinishedAt: base + 7, Now: base + 7,
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
			Status: store.RunCompleted, Output: []byte(`{"total":42}`), FinishedAt: base + 50, Now: base + 51,
		})
	})
	want := c
	want.Status, want.Output, want.LeaseOwner, want.LeaseExpiresAt, want.FinishedAt, want.UpdatedAt =
		store.RunCompleted, []byte(`{"total":42}`), "", 0, base+50, base+51
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
			Status: store.RunSuspended, Error: "refund failed", Reason: "compensation of refund exhausted its retries", Now: base + 2,
		})
	})
	want = c
	want.Status, want.Error, want.Reason, want.LeaseOwner, want.LeaseExpiresAt, want.UpdatedAt =
		store.RunSuspended, "refund failed", "compensation of refund exhausted its retries", "", 0, base+2
	checkRun(t, s, want)
}

func testRunRescue(t *testing.T, s store.Store) {
	claimWithLease := func(id string, expires int64) store.Run {
		t.Helper()
		p := runIn(t, s, id)
		runs := claim(t, s, store.RunClaimParams{
			Queue: p.Queue, Known: []store.WorkflowKey{order1}, Owner: "w1", Max: 1, Now: base, LeaseExpiresAt: expires,
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
			Status: store.RunCompleted, Output: []byte(`"ok"`), FinishedAt: base + 50, Now: base + 50,
		})
	})
	finished = get(t, s, "finished")
	pending := runWithStatus(t, s, "pending", store.RunPending)

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
	wantExpired.Status, wantExpired.LeaseOwner, wantExpired.LeaseExpiresAt, wantExpired.UpdatedAt = store.RunPending, "", 0, base+500
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
	if got := claim(t, s, store.RunClaimParams{Queue: "q", Known: []store.WorkflowKey{order1}, Owner: "w", Max: 3, Now: base, LeaseExpiresAt: base + 10}); len(got) != 3 {
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

func testRunRequestCancel(t *testing.T, s store.Store) {
	const now = base + 1000
	cases := []struct {
		status store.RunStatus
		want   bool
	}{
		{store.RunPending, true},
		{store.RunRunning, true},
		{store.RunCompensating, true},
		{store.RunCompleted, false},
		{store.RunFailed, false},
		{store.RunSuspended, false},
		{store.RunCancelled, false},
	}
	before := map[store.RunStatus]store.Run{}
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
	for _, st := range []store.RunStatus{store.RunRunning, store.RunCompensating} {
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
		if ok || (err != nil && !errors.Is(err, store.ErrNotFound)) {
			t.Errorf("request cancel of an unknown run = %v, %v; want false and no error or ErrNotFound", ok, err)
		}
		return nil
	})
}

func testRunSetStatus(t *testing.T, s store.Store) {
	suspended := runWithStatus(t, s, "suspended", store.RunSuspended)
	pending := runWithStatus(t, s, "pending", store.RunPending)
	running := runWithStatus(t, s, "running", store.RunRunning)

	// Resume a suspended run: it becomes claimable as compensating.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunSetStatus(ctx, store.RunSetStatusParams{
			ID: "suspended", Expected: store.RunSuspended, Status: store.RunCompensating, Reason: "resumed by operator",
			RunAt: base + 10, Now: base + 10,
		})
	})
	want := suspended
	want.Status, want.Reason, want.RunAt, want.UpdatedAt = store.RunCompensating, "resumed by operator", base+10, base+10
	checkRun(t, s, want)
	if c := claimQueue(t, s, "queue-suspended", "w9", base+10); c.Status != store.RunCompensating {
		t.Errorf("resumed run claimed as %s, want compensating", c.Status)
	}

	conflicts := []struct {
		name string
		p    store.RunSetStatusParams
		run  store.Run
	}{
		{"wrong expected status", store.RunSetStatusParams{
			ID: "pending", Expected: store.RunSuspended, Status: store.RunCancelled, FinishedAt: base + 20, Now: base + 20,
		}, pending},
		{"leased run", store.RunSetStatusParams{
			ID: "running", Expected: store.RunRunning, Status: store.RunCancelled, FinishedAt: base + 20, Now: base + 20,
		}, running},
	}
	for _, c := range conflicts {
		expectErr(t, s, store.ErrConflict, "set status of a "+c.name, func(ctx context.Context, tx store.Tx) error {
			return tx.RunSetStatus(ctx, c.p)
		})
		checkRun(t, s, c.run)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: "ghost", Expected: store.RunPending, Status: store.RunCancelled, Now: base})
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("set status of an unknown run: error %v, want ErrConflict or ErrNotFound", err)
		}
		return nil
	})

	// Cancel a pending run.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunSetStatus(ctx, store.RunSetStatusParams{
			ID: "pending", Expected: store.RunPending, Status: store.RunCancelled, Reason: "cancelled by operator",
			RunAt: pending.RunAt, FinishedAt: base + 30, Now: base + 30,
		})
	})
	want = pending
	want.Status, want.Reason, want.FinishedAt, want.UpdatedAt = store.RunCancelled, "cancelled by operator", base+30, base+30
	checkRun(t, s, want)
}

// ---- steps ----

func testStepBegin(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	charge := store.StepKey{RunID: "r", Name: "charge", Occurrence: 0}

	if n := beginStep(t, s, charge, `{"cents":100}`, base); n != 1 {
		t.Errorf("first StepBegin = %d, want 1", n)
	}
	want := store.Step{
		RunID: "r", Name: "charge", Status: store.StepRunning, Attempts: 1, Input: []byte(`{"cents":100}`),
		Compensation: store.CompensationNone, StartedAt: base,
	}
	checkStep(t, s, want)

	// A crash during the attempt: the next begin counts a new attempt.
	if n := beginStep(t, s, charge, `{"cents":100}`, base+10); n != 2 {
		t.Errorf("StepBegin after an interrupted attempt = %d, want 2", n)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: charge, Error: "timeout", Now: base + 20})
	})
	if n := beginStep(t, s, charge, `{"cents":100}`, base+30); n != 3 {
		t.Errorf("StepBegin after a retrying failure = %d, want 3", n)
	}
	got := step(t, s, charge)
	if got.Status != store.StepRunning || got.Attempts != 3 || got.Error != "" {
		t.Errorf("step after third begin: status %s, attempts %d, error %q; want running, 3, none", got.Status, got.Attempts, got.Error)
	}

	// Another occurrence of the same name counts on its own.
	if n := beginStep(t, s, store.StepKey{RunID: "r", Name: "charge", Occurrence: 1}, `{}`, base+40); n != 1 {
		t.Errorf("StepBegin of occurrence 1 = %d, want 1", n)
	}

	completeStep(t, s, charge, `"ch_1"`, false, base+50)
	done := step(t, s, charge)
	expectErr(t, s, store.ErrConflict, "StepBegin of a completed step", func(ctx context.Context, tx store.Tx) error {
		_, err := tx.StepBegin(ctx, store.StepBeginParams{Key: charge, Input: []byte(`{}`), Now: base + 60})
		return err
	})
	checkStep(t, s, done)

	// A step of a run that does not exist is refused.
	err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.StepBegin(t.Context(), store.StepBeginParams{Key: store.StepKey{RunID: "ghost", Name: "x"}, Input: []byte(`{}`), Now: base})
		return err
	})
	if err == nil {
		t.Error("StepBegin of a step of an unknown run succeeded")
	}
	if st := steps(t, s, "ghost"); len(st) != 0 {
		t.Errorf("unknown run has steps %v", st)
	}
}

func testStepComplete(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"), newRun("other"))
	a0 := store.StepKey{RunID: "r", Name: "a", Occurrence: 0}
	a1 := store.StepKey{RunID: "r", Name: "a", Occurrence: 1}
	b := store.StepKey{RunID: "r", Name: "b", Occurrence: 0}
	c := store.StepKey{RunID: "r", Name: "c", Occurrence: 0}
	x := store.StepKey{RunID: "other", Name: "x", Occurrence: 0}
	for i, k := range []store.StepKey{a0, a1, b, c, x} {
		beginStep(t, s, k, `{}`, base+int64(i))
	}
	// Completion order differs from begin order.
	order := []struct {
		key         store.StepKey
		compensable bool
	}{{b, false}, {a1, true}, {x, true}, {c, true}, {a0, false}}
	for i, o := range order {
		completeStep(t, s, o.key, fmt.Sprintf(`{"n":%d}`, i), o.compensable, base+100+int64(i))
	}
	var last int64
	for i, o := range order {
		if o.key.RunID != "r" {
			continue
		}
		st := step(t, s, o.key)
		if st.CompletedSeq <= last {
			t.Errorf("step %s completed %d-th has CompletedSeq %d, not above the previous %d", o.key, i, st.CompletedSeq, last)
		}
		last = st.CompletedSeq
		// Nothing is to be undone until the run unwinds.
		if st.Status != store.StepCompleted || st.Compensable != o.compensable || st.Compensation != store.CompensationNone ||
			string(st.Output) != fmt.Sprintf(`{"n":%d}`, i) || st.FinishedAt != base+100+int64(i) || st.Attempts != 1 {
			t.Errorf("step %s: %+v; want completed, compensable %v, compensation none, output {\"n\":%d}, finished %d, 1 attempt",
				o.key, st, o.compensable, i, base+100+int64(i))
		}
	}

	done := step(t, s, b)
	expectErr(t, s, store.ErrConflict, "StepComplete of a completed step", func(ctx context.Context, tx store.Tx) error {
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: b, Output: []byte(`"again"`), Compensable: true, Now: base + 999})
	})
	checkStep(t, s, done)
	expectErr(t, s, store.ErrConflict, "StepComplete of a step never begun", func(ctx context.Context, tx store.Tx) error {
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: store.StepKey{RunID: "r", Name: "nope"}, Output: []byte(`1`), Now: base})
	})
	if _, ok := steps(t, s, "r")[store.StepKey{RunID: "r", Name: "nope"}]; ok {
		t.Error("StepComplete of a step never begun created it")
	}

	// A retried step completes once its new attempt began, and its error
	// is cleared.
	d := store.StepKey{RunID: "r", Name: "d"}
	beginStep(t, s, d, `{}`, base+200)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: d, Error: "flaky", Now: base + 201})
	})
	expectErr(t, s, store.ErrConflict, "StepComplete of a retrying step without a new attempt", func(ctx context.Context, tx store.Tx) error {
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: d, Output: []byte(`1`), Now: base + 202})
	})
	beginStep(t, s, d, `{}`, base+203)
	completeStep(t, s, d, `"ok"`, false, base+204)
	if st := step(t, s, d); st.Status != store.StepCompleted || st.Error != "" || st.Attempts != 2 || st.CompletedSeq <= last {
		t.Errorf("retried step after completion: %+v; want completed, no error, 2 attempts, CompletedSeq above %d", st, last)
	}
}

func testStepCompensationArm(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"), newRun("other"))
	key := func(run, name string) store.StepKey { return store.StepKey{RunID: run, Name: name} }
	undo, plain, running, retrying, failed, other :=
		key("r", "undo"), key("r", "plain"), key("r", "running"), key("r", "retrying"), key("r", "failed"), key("other", "undo")
	for _, k := range []store.StepKey{undo, plain, running, retrying, failed, other} {
		beginStep(t, s, k, `{}`, base)
	}
	completeStep(t, s, undo, `1`, true, base+1)
	completeStep(t, s, plain, `2`, false, base+2)
	completeStep(t, s, other, `3`, true, base+3)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return errors.Join(
			tx.StepFail(ctx, store.StepFailParams{Key: retrying, Error: "x", Now: base + 4}),
			tx.StepFail(ctx, store.StepFailParams{Key: failed, Error: "x", Final: true, Now: base + 4}),
		)
	})
	arm := func() {
		t.Helper()
		do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.StepCompensationArm(ctx, "r") })
	}
	before := steps(t, s, "r")
	arm()
	for k, st := range before {
		want := st
		if k == undo {
			want.Compensation = store.CompensationPending
		}
		checkStep(t, s, want)
	}
	if st := step(t, s, other); st.Compensation != store.CompensationNone {
		t.Errorf("arming run r armed a step of another run: %s", st.Compensation)
	}

	// Arming again leaves compensations under way or done alone.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.StepCompensationBegin(ctx, undo); err != nil {
			return err
		}
		return tx.StepCompensationEnd(ctx, undo, store.CompensationCompleted, "")
	})
	done := step(t, s, undo)
	arm()
	checkStep(t, s, done)
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.StepCompensationArm(ctx, "ghost") })
}

func testStepFail(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"))
	k := store.StepKey{RunID: "r", Name: "ship", Occurrence: 2}
	beginStep(t, s, k, `{"box":1}`, base)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "carrier down", Final: false, Now: base + 5})
	})
	retrying := store.Step{
		RunID: "r", Name: "ship", Occurrence: 2, Status: store.StepRetrying, Attempts: 1, Input: []byte(`{"box":1}`),
		Error: "carrier down", Compensation: store.CompensationNone, StartedAt: base, FinishedAt: base + 5,
	}
	checkStep(t, s, retrying)
	expectErr(t, s, store.ErrConflict, "StepFail of a step that is not running", func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "again", Final: true, Now: base + 6})
	})
	checkStep(t, s, retrying)

	if n := beginStep(t, s, k, `{"box":1}`, base+10); n != 2 {
		t.Errorf("StepBegin after a retrying failure = %d, want 2", n)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "address invalid", Final: true, Now: base + 15})
	})
	failed := step(t, s, k)
	if failed.Status != store.StepFailed || failed.Error != "address invalid" || failed.Attempts != 2 || failed.FinishedAt != base+15 {
		t.Errorf("finally failed step: %+v; want failed, its error, 2 attempts, finished %d", failed, base+15)
	}
	ops := []struct {
		name string
		fn   func(ctx context.Context, tx store.Tx) error
	}{
		{"StepBegin", func(ctx context.Context, tx store.Tx) error {
			_, err := tx.StepBegin(ctx, store.StepBeginParams{Key: k, Input: []byte(`{}`), Now: base + 20})
			return err
		}},
		{"StepComplete", func(ctx context.Context, tx store.Tx) error {
			return tx.StepComplete(ctx, store.StepCompleteParams{Key: k, Output: []byte(`1`), Now: base + 20})
		}},
		{"StepFail", func(ctx context.Context, tx store.Tx) error {
			return tx.StepFail(ctx, store.StepFailParams{Key: k, Error: "x", Now: base + 20})
		}},
	}
	for _, op := range ops {
		expectErr(t, s, store.ErrConflict, op.name+" of a failed step", op.fn)
		checkStep(t, s, failed)
	}
	expectErr(t, s, store.ErrConflict, "StepFail of an unknown step", func(ctx context.Context, tx store.Tx) error {
		return tx.StepFail(ctx, store.StepFailParams{Key: store.StepKey{RunID: "r", Name: "nope"}, Error: "x", Now: base})
	})
}

func testStepCompensation(t *testing.T, s store.Store) {
	insert(t, s, newRun("r"), newRun("other"))
	s1 := store.StepKey{RunID: "r", Name: "reserve"}
	s2 := store.StepKey{RunID: "r", Name: "log"}
	s3 := store.StepKey{RunID: "r", Name: "charge"}
	x := store.StepKey{RunID: "other", Name: "charge"}
	for i, k := range []store.StepKey{s1, s2, s3, x} {
		beginStep(t, s, k, `{}`, base+int64(i))
		completeStep(t, s, k, `"out"`, k != s2, base+10+int64(i))
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return errors.Join(tx.StepCompensationArm(ctx, "r"), tx.StepCompensationArm(ctx, "other"))
	})
	compBegin := func(k store.StepKey) int {
		t.Helper()
		var n int
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = tx.StepCompensationBegin(ctx, k)
			return err
		})
		return n
	}
	compEnd := func(k store.StepKey, state store.CompensationState, msg string) {
		t.Helper()
		do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.StepCompensationEnd(ctx, k, state, msg) })
	}
	expectComp := func(k store.StepKey, state store.CompensationState, attempts int, msg string) {
		t.Helper()
		st := step(t, s, k)
		if st.Compensation != state || st.CompensationAttempts != attempts || st.CompensationError != msg {
			t.Errorf("step %s: compensation %s, %d attempts, error %q; want %s, %d, %q",
				k, st.Compensation, st.CompensationAttempts, st.CompensationError, state, attempts, msg)
		}
		if st.Status != store.StepCompleted || string(st.Output) != `"out"` {
			t.Errorf("compensating step %s changed its outcome: status %s, output %q", k, st.Status, st.Output)
		}
	}
	beginConflict := func(what string, k store.StepKey) {
		t.Helper()
		expectErr(t, s, store.ErrConflict, what, func(ctx context.Context, tx store.Tx) error {
			_, err := tx.StepCompensationBegin(ctx, k)
			return err
		})
	}

	beginConflict("compensation begin of a step without a compensate hook", s2)
	expectComp(s2, store.CompensationNone, 0, "")
	expectErr(t, s, store.ErrConflict, "compensation end before it began", func(ctx context.Context, tx store.Tx) error {
		return tx.StepCompensationEnd(ctx, s1, store.CompensationCompleted, "")
	})
	expectComp(s1, store.CompensationPending, 0, "")

	if n := compBegin(s1); n != 1 {
		t.Errorf("first compensation begin = %d, want 1", n)
	}
	expectComp(s1, store.CompensationRunning, 1, "")
	if n := compBegin(s1); n != 2 { // interrupted attempt
		t.Errorf("compensation begin after an interrupted attempt = %d, want 2", n)
	}
	compEnd(s1, store.CompensationRetrying, "refund api 503")
	expectComp(s1, store.CompensationRetrying, 2, "refund api 503")
	if n := compBegin(s1); n != 3 {
		t.Errorf("compensation begin after retrying = %d, want 3", n)
	}
	compEnd(s1, store.CompensationFailed, "refund rejected")
	expectComp(s1, store.CompensationFailed, 3, "refund rejected")
	beginConflict("compensation begin of a failed compensation", s1)
	expectComp(s1, store.CompensationFailed, 3, "refund rejected")

	compBegin(s3)
	compEnd(s3, store.CompensationCompleted, "")
	expectComp(s3, store.CompensationCompleted, 1, "")
	beginConflict("compensation begin of a completed compensation", s3)

	compBegin(x)
	compEnd(x, store.CompensationFailed, "nope")

	// Operator retry: only the failed compensations of that run.
	var n int64
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.StepCompensationRetryFailed(ctx, "r")
		return err
	})
	if n != 1 {
		t.Errorf("retry failed compensations of r = %d, want 1", n)
	}
	expectComp(s1, store.CompensationPending, 0, "")
	expectComp(s3, store.CompensationCompleted, 1, "")
	expectComp(x, store.CompensationFailed, 1, "nope")

	if n := compBegin(s1); n != 1 {
		t.Errorf("compensation begin after operator retry = %d, want 1", n)
	}
	compEnd(s1, store.CompensationFailed, "still rejected")

	// Operator skip.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		n, err = tx.StepCompensationSkipFailed(ctx, "r")
		return err
	})
	if n != 1 {
		t.Errorf("skip failed compensations of r = %d, want 1", n)
	}
	if st := step(t, s, s1); st.Compensation != store.CompensationSkipped {
		t.Errorf("skipped compensation is %s", st.Compensation)
	}
	beginConflict("compensation begin of a skipped compensation", s1)
	expectComp(x, store.CompensationFailed, 1, "nope")
	for _, fn := range []func(ctx context.Context, tx store.Tx) (int64, error){
		func(ctx context.Context, tx store.Tx) (int64, error) { return tx.StepCompensationRetryFailed(ctx, "r") },
		func(ctx context.Context, tx store.Tx) (int64, error) { return tx.StepCompensationSkipFailed(ctx, "r") },
	} {
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			n, err = fn(ctx, tx)
			return err
		})
		if n != 0 {
			t.Errorf("retry/skip with no failed compensation left = %d, want 0", n)
		}
	}
	expectComp(s3, store.CompensationCompleted, 1, "")
}

// ---- events ----

func testEvents(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"), newRun("b"))
	// At decreases: the history is in append order, not time order.
	appended := []store.Event{
		{RunID: "a", At: base + 30, Kind: "run.started"},
		{RunID: "b", At: base + 29, Kind: "run.started"},
		{RunID: "a", At: base + 20, Kind: "step.failed", Step: "charge", Occurrence: 1, Attempt: 2, Detail: "card declined"},
		{RunID: "a", At: base + 10, Kind: "run.failed", Detail: "card declined"},
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, e := range appended[:2] {
			if err := tx.EventAppend(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, e := range appended[2:] {
			if err := tx.EventAppend(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	for run, want := range map[string][]store.Event{
		"a": {appended[0], appended[2], appended[3]},
		"b": {appended[1]},
	} {
		got, err := s.Reader().EventList(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("run %s has %d events, want %d: %+v", run, len(got), len(want), got)
		}
		var last int64
		for i := range got {
			if got[i].ID <= last {
				t.Errorf("run %s event %d has ID %d, not above %d", run, i, got[i].ID, last)
			}
			last = got[i].ID
			w := want[i]
			w.ID = got[i].ID
			if d := diff(w, got[i]); d != "" {
				t.Errorf("run %s event %d: %s", run, i, d)
			}
		}
	}
	err := s.Write(t.Context(), func(tx store.Tx) error {
		return tx.EventAppend(t.Context(), store.Event{RunID: "ghost", At: base, Kind: "run.started"})
	})
	if err == nil {
		t.Error("event of an unknown run was appended")
	}
	// Among several events of one write, one of an unknown run fails the
	// write and none is kept.
	err = s.Write(t.Context(), func(tx store.Tx) error {
		for _, id := range []string{"b", "ghost", "b"} {
			if err := tx.EventAppend(t.Context(), store.Event{RunID: id, At: base, Kind: "lost"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		t.Error("events with one of an unknown run were appended")
	}
	if got, err := s.Reader().EventList(t.Context(), "b"); err != nil || len(got) != 1 {
		t.Errorf("run b after a failed write of events: %+v, %v; want its one event", got, err)
	}
}

// Events of concurrent writes, some of which fail after appending, land in
// the order each write appended them, values intact, and those of a failed
// write never land, however the writes were batched together.
func testEventsOfConcurrentWrites(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"))
	const writers = 20
	detail := func(w, i int) string { return fmt.Sprintf("w%02d e%d \"quoted\"\n\tüñí €", w, i) }
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = s.Write(t.Context(), func(tx store.Tx) error {
				for i := range 3 {
					e := store.Event{RunID: "a", At: base + int64(w), Kind: "k", Step: "s", Occurrence: w, Attempt: i, Detail: detail(w, i)}
					if err := tx.EventAppend(t.Context(), e); err != nil {
						return err
					}
				}
				if w%3 == 0 {
					return errors.New("refused")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	got, err := s.Reader().EventList(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	byWriter := map[int][]store.Event{}
	for _, e := range got {
		byWriter[e.Occurrence] = append(byWriter[e.Occurrence], e)
	}
	for w := range writers {
		evs := byWriter[w]
		if failed := w%3 == 0; failed {
			if errs[w] == nil || len(evs) != 0 {
				t.Errorf("writer %d: error %v, %d events; want its error and none", w, errs[w], len(evs))
			}
			continue
		}
		if errs[w] != nil || len(evs) != 3 {
			t.Fatalf("writer %d: error %v, %d events; want 3", w, errs[w], len(evs))
		}
		for i, e := range evs {
			if e.Attempt != i || e.Detail != detail(w, i) || e.At != base+int64(w) || e.Kind != "k" || e.Step != "s" ||
				(i > 0 && e.ID != evs[i-1].ID+1) {
				t.Errorf("writer %d event %d: %+v", w, i, e)
			}
		}
	}
}

// ---- counts and lists ----

func testRunCountUnrunnable(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got, err := s.Reader().RunCountUnrunnable(ctx, []store.WorkflowKey{order1}); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	add := func(id string, wf store.WorkflowKey) store.RunInsertParams {
		p := newRun(id)
		p.Workflow, p.Queue = wf, "queue-"+id
		return p
	}
	insert(t, s, add("o1-a", order1), add("o1-b", order1), add("o2-a", order2), add("o2-b", order2), add("o2-c", order2),
		add("o3", order3), add("inv-a", invoice1))
	insertWithStatus(t, s, add("inv-comp", invoice1), store.RunCompensating)
	// Unleased and compensating: ready again, counts.
	invComp := get(t, s, "inv-comp")
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, invComp.Lease(), store.RunReleaseParams{RunAt: base, Now: base + 2})
	})
	// Leased or finished runs do not count.
	insertWithStatus(t, s, add("inv-leased", invoice1), store.RunRunning)
	insertWithStatus(t, s, add("o2-done", order2), store.RunCompleted)
	insertWithStatus(t, s, add("o3-parked", order3), store.RunSuspended)
	insertWithStatus(t, s, add("o3-comp-leased", order3), store.RunCompensating)

	count := func(known ...store.WorkflowKey) []store.UnrunnableCount {
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
	nonzero := func() map[store.RunStatus]int64 {
		t.Helper()
		got, err := s.Reader().RunCountByStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := map[store.RunStatus]int64{}
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
	want := map[store.RunStatus]int64{
		store.RunPending: 3, store.RunRunning: 1, store.RunCompensating: 1, store.RunCompleted: 2,
		store.RunFailed: 1, store.RunSuspended: 1, store.RunCancelled: 1,
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
	add := func(id string, wf store.WorkflowKey, queue string, created int64, status store.RunStatus) {
		t.Helper()
		p := newRun(id)
		p.Workflow, p.Queue, p.Now = wf, queue, created
		if status == store.RunPending {
			insert(t, s, p)
			return
		}
		// Drive it alone in a private queue, then no other run interferes.
		p.Queue = "private-" + id
		insertWithStatus(t, s, p, status)
	}
	add("p1", order1, "q1", base+1, store.RunPending)
	add("p2", order1, "q2", base+2, store.RunPending)
	add("i1", invoice1, "q1", base+3, store.RunPending)
	add("r1", order1, "x", base+4, store.RunRunning)
	add("c1", invoice1, "x", base+5, store.RunCompleted)
	add("c2", order2, "x", base+6, store.RunCompleted)

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
		{store.RunListParams{Status: store.RunPending}, []string{"i1", "p1", "p2"}},
		{store.RunListParams{Status: store.RunCompleted}, []string{"c1", "c2"}},
		{store.RunListParams{Workflow: "invoice"}, []string{"c1", "i1"}},
		{store.RunListParams{Queue: "q1"}, []string{"i1", "p1"}},
		{store.RunListParams{Status: store.RunPending, Workflow: "order", Queue: "q2"}, []string{"p2"}},
		{store.RunListParams{Status: store.RunFailed}, []string{}},
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

func testWorkflows(t *testing.T, s store.Store) {
	list := func() []store.WorkflowKey {
		t.Helper()
		got, err := s.Reader().WorkflowList(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b store.WorkflowKey) int {
			if c := strings.Compare(a.Name, b.Name); c != 0 {
				return c
			}
			return a.Version - b.Version
		})
		return got
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("empty store lists workflows %v", got)
	}
	register := func(now int64, keys ...store.WorkflowKey) {
		t.Helper()
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			for _, k := range keys {
				if err := tx.WorkflowRegister(ctx, k, now); err != nil {
					return err
				}
			}
			return nil
		})
	}
	register(base, invoice1, order2, order1, order1)
	register(base+10, order1, invoice1)
	want := []store.WorkflowKey{invoice1, order1, order2}
	if got := list(); !slices.Equal(got, want) {
		t.Errorf("workflows %v, want %v", got, want)
	}
}

// ---- write transactions ----

var errAbort = errors.New("abort on purpose")

func testWriteRollsBackOnError(t *testing.T, s store.Store) {
	ctx := t.Context()
	keep := runWithStatus(t, s, "keep", store.RunPending)
	err := s.Write(ctx, func(tx store.Tx) error {
		if ok, err := tx.RunInsert(ctx, newRun("new")); err != nil || !ok {
			return fmt.Errorf("insert: %v, %w", ok, err)
		}
		k := store.StepKey{RunID: "new", Name: "s"}
		if _, err := tx.StepBegin(ctx, store.StepBeginParams{Key: k, Input: []byte(`{}`), Now: base}); err != nil {
			return err
		}
		if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: k, Output: []byte(`1`), Now: base}); err != nil {
			return err
		}
		if err := tx.EventAppend(ctx, store.Event{RunID: "new", At: base, Kind: "run.started"}); err != nil {
			return err
		}
		if err := tx.WorkflowRegister(ctx, order1, base); err != nil {
			return err
		}
		runs, err := tx.RunClaim(ctx, store.RunClaimParams{
			Queue: "queue-keep", Known: []store.WorkflowKey{order1}, Owner: "w", Max: 1, Now: base, LeaseExpiresAt: base + 1,
		})
		if err != nil || len(runs) != 1 {
			return fmt.Errorf("claim keep: %v, %w", ids(runs), err)
		}
		// The transaction reads its own writes; other readers do not.
		if r, err := tx.RunGet(ctx, "new"); err != nil || r.ID != "new" {
			return fmt.Errorf("tx does not see its own insert: %v", err)
		}
		if _, err := s.Reader().RunGet(ctx, "new"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("reader sees an uncommitted run: error %v, want ErrNotFound", err)
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("Write returned %v, want the error of fn", err)
	}
	if _, err := s.Reader().RunGet(ctx, "new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run inserted by a failed write exists: error %v", err)
	}
	if st := steps(t, s, "new"); len(st) != 0 {
		t.Errorf("steps of a failed write exist: %v", st)
	}
	if ev, err := s.Reader().EventList(ctx, "new"); err != nil || len(ev) != 0 {
		t.Errorf("events of a failed write exist: %v, %v", ev, err)
	}
	if wf, err := s.Reader().WorkflowList(ctx); err != nil || len(wf) != 0 {
		t.Errorf("workflows of a failed write exist: %v, %v", wf, err)
	}
	checkRun(t, s, keep)
}

func testWriteRollsBackOnPanic(t *testing.T, s store.Store) {
	ctx := t.Context()
	func() {
		defer func() {
			if r := recover(); r != errAbort {
				t.Errorf("recovered %v, want the panic of fn to propagate", r)
			}
		}()
		_ = s.Write(ctx, func(tx store.Tx) error {
			if _, err := tx.RunInsert(ctx, newRun("new")); err != nil {
				return err
			}
			panic(errAbort)
		})
	}()
	// The store is still usable, and the write left nothing behind.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := s.Write(wctx, func(tx store.Tx) error {
		_, err := tx.RunInsert(wctx, newRun("after"))
		return err
	})
	if err != nil {
		t.Fatalf("write after a panicking write: %v", err)
	}
	if _, err := s.Reader().RunGet(ctx, "new"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run inserted by a panicking write exists: error %v", err)
	}
	get(t, s, "after")
}

func testWriteCancelledContext(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := s.Write(ctx, func(tx store.Tx) error {
		called = true
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context: error %v, want context.Canceled", err)
	}
	if called {
		t.Error("Write with a cancelled context ran fn")
	}
}

// testWritesConcurrentIsolated checks that concurrent writers, which an
// adapter may commit together, see only their own outcome: a failing or
// panicking writer leaves nothing behind and takes no other writer down.
func testWritesConcurrentIsolated(t *testing.T, s store.Store) {
	const writers = 30
	g, ctx := errgroup.WithContext(t.Context())
	for i := range writers {
		g.Go(func() (err error) {
			id := fmt.Sprintf("r%02d", i)
			if i%5 == 4 {
				defer func() {
					if r := recover(); r != errAbort {
						err = fmt.Errorf("writer %s: recovered %v, want its own panic", id, r)
					}
				}()
			}
			werr := s.Write(ctx, func(tx store.Tx) error {
				ok, err := tx.RunInsert(ctx, newRun(id))
				if err != nil || !ok {
					return fmt.Errorf("insert %s: %v, %w", id, ok, err)
				}
				if err := tx.EventAppend(ctx, store.Event{RunID: id, At: base, Kind: "run.started"}); err != nil {
					return err
				}
				switch i % 5 {
				case 3:
					return errAbort
				case 4:
					panic(errAbort)
				}
				return nil
			})
			switch {
			case i%5 == 3 && !errors.Is(werr, errAbort):
				return fmt.Errorf("failing writer %s got %v, want its own error", id, werr)
			case i%5 < 3 && werr != nil:
				return fmt.Errorf("writer %s: %w", id, werr)
			case i%5 == 4:
				return fmt.Errorf("panicking writer %s returned %v instead of panicking", id, werr)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i := range writers {
		id := fmt.Sprintf("r%02d", i)
		_, err := s.Reader().RunGet(t.Context(), id)
		events, eerr := s.Reader().EventList(t.Context(), id)
		if eerr != nil {
			t.Fatal(eerr)
		}
		if i%5 < 3 {
			if err != nil || len(events) != 1 {
				t.Errorf("committed writer %s: run error %v, %d events; want the run and 1 event", id, err, len(events))
			}
		} else if !errors.Is(err, store.ErrNotFound) || len(events) != 0 {
			t.Errorf("failed writer %s: run error %v, %d events; want nothing left", id, err, len(events))
		}
	}
}
