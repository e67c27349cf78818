package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// switchable is a job handler that fails permanently while broken.
type switchable struct {
	broken atomic.Bool
	calls  atomic.Int32
}

func (s *switchable) handle(_ context.Context, to string) error {
	s.calls.Add(1)
	if s.broken.Load() {
		return flow.Permanent(fmt.Errorf("cannot send to %s", to))
	}
	return nil
}

func deadIDs(t *testing.T, e *flow.Engine, f flow.DeadLetterFilter) []string {
	t.Helper()
	dead, err := e.DeadLetters(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(dead))
	for i, d := range dead {
		if d.Status != flow.StatusFailed || d.RequeuedAs != "" {
			t.Errorf("dead letter %s: status %s, requeued as %q", d.ID, d.Status, d.RequeuedAs)
		}
		ids[i] = d.ID
	}
	return ids
}

// settle waits for every run to settle and fails the test unless each
// ended with status.
func settle(t *testing.T, status flow.RunStatus, runs ...*flow.Run[struct{}]) {
	t.Helper()
	ctx := waitCtx(t)
	for _, r := range runs {
		_, err := r.Result(ctx)
		switch {
		case status == flow.StatusCompleted && err != nil:
			t.Fatalf("run %s: %v, want completed", r.ID(), err)
		case status == flow.StatusFailed && !errors.Is(err, flow.ErrRolledBack):
			t.Fatalf("run %s: %v, want failed", r.ID(), err)
		}
	}
}

// A failed job is a dead letter: listed, inspectable, and requeued as a
// new run linked both ways, while the failed run keeps its record.
func TestDeadLettersRequeue(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	h := &switchable{}
	h.broken.Store(true)
	job := flow.Job[string]{Name: "notify", Queue: flow.DefaultQueue, MaxAttempts: 2, Handler: h.handle}
	flow.RegisterJob(e, job)
	ok := flow.Job[string]{Name: "ok", Handler: func(context.Context, string) error { return nil }}
	flow.RegisterJob(e, ok)
	startEngine(t, e)
	ctx := waitCtx(t)

	for i := range 3 {
		r, err := flow.Enqueue(ctx, e, job, fmt.Sprint("user-", i), &flow.EnqueueOptions{RunID: fmt.Sprint("n", i)})
		if err != nil {
			t.Fatal(err)
		}
		settle(t, flow.StatusFailed, r) // one at a time: they fail in this order
	}
	done, err := flow.Enqueue(ctx, e, ok, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, flow.StatusCompleted, done)
	cancelled, err := flow.Enqueue(ctx, e, ok, "x", &flow.EnqueueOptions{Delay: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	if err := cancelled.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	settle(t, flow.StatusCancelled, cancelled)

	if got := deadIDs(t, e, flow.DeadLetterFilter{}); !slices.Equal(got, []string{"n2", "n1", "n0"}) {
		t.Errorf("dead letters %v, want [n2 n1 n0] (completed and cancelled runs are none)", got)
	}
	if got := deadIDs(t, e, flow.DeadLetterFilter{Workflow: "ok"}); len(got) != 0 {
		t.Errorf("dead letters of job ok: %v", got)
	}
	if got := deadIDs(t, e, flow.DeadLetterFilter{Limit: 1}); !slices.Equal(got, []string{"n2"}) {
		t.Errorf("first dead letter %v, want [n2]", got)
	}
	dead, err := e.DeadLetters(ctx, flow.DeadLetterFilter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dead[0].Error, "cannot send to user-2") {
		t.Errorf("dead letter error %q", dead[0].Error)
	}
	if got := queueStats(t, e, flow.DefaultQueue).DeadLetters; got != 3 {
		t.Errorf("stats count %d dead letters, want 3", got)
	}

	// Requeue one once the cause is fixed.
	h.broken.Store(false)
	calls := h.calls.Load()
	newID, err := e.Requeue(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if newID != "n1/requeue-1" {
		t.Errorf("new run ID %s, want n1/requeue-1", newID)
	}
	again, err := flow.Lookup(ctx, e, job.Workflow(), newID)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, flow.StatusCompleted, again)
	if got := h.calls.Load() - calls; got != 1 {
		t.Errorf("requeued run called the handler %d times, want 1", got)
	}
	orig, err := e.Inspect(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if orig.Status != flow.StatusFailed || orig.RequeuedAs != newID || len(orig.Steps) != 1 || orig.Steps[0].Attempts != 1 {
		t.Errorf("requeued dead letter: status %s, requeued as %q, steps %+v; want it kept as it failed", orig.Status, orig.RequeuedAs, orig.Steps)
	}
	if kinds := eventKinds(t, e, "n1"); kinds[len(kinds)-1] != flow.EventRunRequeued {
		t.Errorf("dead letter's history ends with %v, want run_requeued", kinds)
	}
	fresh, err := e.Inspect(ctx, newID)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.RequeuedFrom != "n1" || string(fresh.Input) != `"user-1"` || fresh.Queue != orig.Queue || len(fresh.Steps) != 1 || fresh.Steps[0].Attempts != 1 {
		t.Errorf("new run: from %q, input %s, queue %s, steps %+v", fresh.RequeuedFrom, fresh.Input, fresh.Queue, fresh.Steps)
	}
	history, err := e.History(ctx, newID)
	if err != nil {
		t.Fatal(err)
	}
	if history[0].Kind != flow.EventRunStarted || !strings.Contains(history[0].Detail, "requeue of n1") {
		t.Errorf("new run's first event %+v", history[0])
	}
	if got := deadIDs(t, e, flow.DeadLetterFilter{}); !slices.Equal(got, []string{"n2", "n0"}) {
		t.Errorf("dead letters after requeue %v, want [n2 n0]", got)
	}

	// A requeue that fails again is a dead letter, requeued as -2.
	h.broken.Store(true)
	id, err := e.Requeue(ctx, "n2")
	if err != nil {
		t.Fatal(err)
	}
	r, err := flow.Lookup(ctx, e, job.Workflow(), id)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, flow.StatusFailed, r)
	if id2, err := e.Requeue(ctx, id); err != nil || id2 != "n2/requeue-2" {
		t.Errorf("requeue of a failed requeue: %q, %v; want n2/requeue-2", id2, err)
	}

	// Runs that are not dead letters are refused, and nothing changes.
	before := totalRuns(t, e)
	for _, tt := range []struct {
		id   string
		want error
		msg  string
	}{
		{"n1", flow.ErrConflict, "already requeued as n1/requeue-1"},
		{done.ID(), flow.ErrConflict, "completed, not failed"},
		{cancelled.ID(), flow.ErrConflict, "cancelled, not failed"},
		{newID, flow.ErrConflict, "completed, not failed"},
		{"missing", flow.ErrRunNotFound, "not found"},
	} {
		_, err := e.Requeue(ctx, tt.id)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("requeue %s: error %v, want %v saying %q", tt.id, err, tt.want, tt.msg)
		}
	}
	if after := totalRuns(t, e); after != before {
		t.Errorf("refused requeues changed the number of runs from %d to %d", before, after)
	}
}

// A dead letter keeps its unique key: it cannot be requeued while an
// unfinished run holds the key, and once requeued its new run holds it.
func TestRequeueKeepsTheUniqueKey(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	e := openEngine(t, path, nil)
	h := &switchable{}
	h.broken.Store(true)
	job := flow.Job[string]{Name: "sync", MaxAttempts: 1, Handler: h.handle}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)
	opts := &flow.EnqueueOptions{UniqueKey: "account-9"}
	enq := func() *flow.Run[struct{}] {
		t.Helper()
		r, err := flow.Enqueue(ctx, e, job, "acct", opts)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	dead := enq()
	settle(t, flow.StatusFailed, dead)

	// An unfinished run takes the key the dead letter left.
	if err := e.PauseQueue(ctx, flow.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	holder := enq()
	if holder.Existing() {
		t.Fatal("the key of a failed run is still taken")
	}
	_, err := e.Requeue(ctx, dead.ID())
	if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "unfinished run "+holder.ID()+" holds its unique key") {
		t.Errorf("requeue while the key is held: %v", err)
	}
	if n, err := e.RequeueDead(ctx, flow.DeadLetterFilter{}); err != nil || n != 0 {
		t.Errorf("bulk requeue while the key is held: %d, %v; want 0 (skipped)", n, err)
	}
	if got := deadIDs(t, e, flow.DeadLetterFilter{}); !slices.Equal(got, []string{dead.ID()}) {
		t.Errorf("dead letters %v, want the one that could not be requeued", got)
	}

	// Once the holder finished, the requeued run takes the key.
	h.broken.Store(false)
	if err := e.ResumeQueue(ctx, flow.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	settle(t, flow.StatusCompleted, holder)
	if err := e.PauseQueue(ctx, flow.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	newID, err := e.Requeue(ctx, dead.ID())
	if err != nil {
		t.Fatal(err)
	}
	if r := enq(); !r.Existing() || r.ID() != newID {
		t.Errorf("enqueue with the key: %s (existing %v), want the requeued run %s", r.ID(), r.Existing(), newID)
	}
	if err := e.ResumeQueue(ctx, flow.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	r, err := flow.Lookup(ctx, e, job.Workflow(), newID)
	if err != nil {
		t.Fatal(err)
	}
	settle(t, flow.StatusCompleted, r)
}

// RequeueDead and PurgeDead handle every dead letter the filter matches and
// return exact counts, while an engine works: the runs that fail again
// while RequeueDead works are not requeued twice. (internal/engine tests
// the batching with small batches.)
func TestRequeueAndPurgeDeadCounts(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"a": {Concurrency: 20}, "b": {Concurrency: 20}}
	path := sqlitePath(t)
	e := openEngine(t, path, cfg)
	h := &switchable{}
	h.broken.Store(true)
	jobA := flow.Job[string]{Name: "job-a", Queue: "a", MaxAttempts: 1, Handler: h.handle}
	jobB := flow.Job[string]{Name: "job-b", Queue: "b", MaxAttempts: 1, Handler: h.handle}
	flow.RegisterJob(e, jobA)
	flow.RegisterJob(e, jobB)
	ctx := waitCtx(t)

	// Enqueued in one transaction, to set up quickly.
	const na, nb = 25, 10
	tx, err := rawDB(t, path).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var runs []*flow.Run[struct{}]
	for i := range na + nb {
		job := jobA
		if i >= na {
			job = jobB
		}
		r, err := flow.EnqueueTx(ctx, e, tx, job, fmt.Sprint(i), nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	startEngine(t, e)
	settle(t, flow.StatusFailed, runs...)

	// The runs requeued keep failing (the handler is still broken) while
	// RequeueDead works.
	n, err := e.RequeueDead(ctx, flow.DeadLetterFilter{Queue: "a"})
	if err != nil || n != na {
		t.Fatalf("requeued %d, %v; want %d", n, err, na)
	}
	eventually(t, "requeued runs fail again", func() bool {
		return queueStats(t, e, "a").Counts[flow.StatusFailed] == 2*na
	})
	dead, err := e.DeadLetters(ctx, flow.DeadLetterFilter{Queue: "a", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != na {
		t.Errorf("%d dead letters in a, want %d: the requeued runs that failed again", len(dead), na)
	}
	for _, d := range dead {
		if !strings.HasSuffix(d.ID, "/requeue-1") || d.RequeuedFrom == "" {
			t.Errorf("dead letter %s (from %q) is not a requeued run", d.ID, d.RequeuedFrom)
			break
		}
	}
	if got := queueStats(t, e, "b").DeadLetters; got != nb {
		t.Errorf("queue b has %d dead letters, want %d untouched", got, nb)
	}

	// Purging by job deletes exactly its dead letters, records and all.
	n, err = e.PurgeDead(ctx, flow.DeadLetterFilter{Workflow: "job-b"})
	if err != nil || n != nb {
		t.Fatalf("purged %d, %v; want %d", n, err, nb)
	}
	if _, err := e.Inspect(ctx, runs[na].ID()); !errors.Is(err, flow.ErrRunNotFound) {
		t.Errorf("purged run: %v, want ErrRunNotFound", err)
	}
	if n, err := e.PurgeDead(ctx, flow.DeadLetterFilter{Workflow: "job-b"}); err != nil || n != 0 {
		t.Errorf("second purge: %d, %v; want 0", n, err)
	}
	// Requeued runs are not dead letters: purging queue a deletes the runs
	// that failed again, and keeps the originals they requeue.
	n, err = e.PurgeDead(ctx, flow.DeadLetterFilter{})
	if err != nil || n != na {
		t.Fatalf("purged %d, %v; want %d", n, err, na)
	}
	s := queueStats(t, e, "a")
	if s.DeadLetters != 0 || s.Counts[flow.StatusFailed] != na {
		t.Errorf("queue a after purge: %d dead letters, %d failed; want 0 and the %d requeued originals", s.DeadLetters, s.Counts[flow.StatusFailed], na)
	}
	if n, err := e.RequeueDead(ctx, flow.DeadLetterFilter{}); err != nil || n != 0 {
		t.Errorf("requeue with no dead letters: %d, %v", n, err)
	}
}
