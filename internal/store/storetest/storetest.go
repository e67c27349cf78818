// Package storetest is the conformance suite every store adapter runs: call
// Exercise from the adapter's tests with a function that opens a fresh,
// empty store.
//
// The tests sit in one file per entity, named like the adapter's file they
// check (runs.go tests sqlitestore/runs.go and its successors in other
// adapters); write.go tests the contract of Store.Write itself. This file
// holds Exercise and the helpers the tests share.
//
// It imports internal/store, flow/flowtype, the standard library and
// golang.org/x/sync only.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// base is the clock of every test: times are Unix milliseconds.
const base = int64(1_700_000_000_000)

var (
	order1   = flowtype.WorkflowKey{Name: "order", Version: 1}
	order2   = flowtype.WorkflowKey{Name: "order", Version: 2}
	order3   = flowtype.WorkflowKey{Name: "order", Version: 3}
	invoice1 = flowtype.WorkflowKey{Name: "invoice", Version: 1}
)

// Exercise runs the conformance suite against the stores open returns. open
// must return a fresh, empty store each time it is called; Exercise closes
// it when the subtest ends.
func Exercise(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	var tests []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}
	tests = append(tests, runTests()...)
	tests = append(tests, stepTests()...)
	tests = append(tests, eventTests()...)
	tests = append(tests, workflowTests()...)
	tests = append(tests, writeTests()...)
	tests = append(tests, readTests()...)
	tests = append(tests, scheduleTests()...)
	tests = append(tests, queueTests()...)
	tests = append(tests, maintenanceTests()...)
	tests = append(tests, reportTests()...)
	tests = append(tests, operatorTests()...)
	tests = append(tests, runOpsTests()...)
	tests = append(tests, signalTests()...)
	tests = append(tests, definitionTests()...)
	tests = append(tests, feedTests()...)
	tests = append(tests, startOptionTests()...)
	tests = append(tests, debounceTests()...)
	tests = append(tests, streamTests()...)
	tests = append(tests, limitTests()...)
	tests = append(tests, runSearchTests()...)
	tests = append(tests, executionTests()...)

	tests = append(tests, batchTests()...)
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
		Queue: queue, Known: []flowtype.WorkflowKey{order1, order2, order3, invoice1}, Owner: owner, Max: 10,
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
func runWithStatus(t *testing.T, s store.Store, id string, status flowtype.RunStatus) store.Run {
	t.Helper()
	p := newRun(id)
	p.Queue = "queue-" + id
	return insertWithStatus(t, s, p, status)
}

// insertWithStatus inserts a run and drives it to status. The run must be
// the only ready run of its queue.
func insertWithStatus(t *testing.T, s store.Store, p store.RunInsertParams, status flowtype.RunStatus) store.Run {
	t.Helper()
	id := p.ID
	insert(t, s, p)
	if status == flowtype.StatusPending {
		return get(t, s, id)
	}
	r := claimQueue(t, s, p.Queue, "w-"+id, base)
	l := r.Lease()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		switch status {
		case flowtype.StatusRunning:
			return nil
		case flowtype.StatusCompensating:
			return tx.RunStartCompensating(ctx, l, "step failed", base+1)
		case flowtype.StatusSuspended:
			return tx.RunFinish(ctx, l, store.RunFinishParams{Status: status, Error: "compensation failed", Reason: "needs a person", Now: base + 1})
		case flowtype.StatusCompleted:
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
