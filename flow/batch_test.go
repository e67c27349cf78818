package flow_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"golang.org/x/sync/errgroup"
)

// EnqueueMany records every item and the engine runs each, with the
// options of its own item; the handles come back in the order of the items.
func TestEnqueueManyRunsEveryItem(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	rec := &recorder{}
	job := emailJob(rec)
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)

	const n = 50
	items := make([]flow.EnqueueItem[email], n)
	for i := range items {
		items[i].Args = email{To: fmt.Sprintf("user-%02d", i), Subject: "hello"}
	}
	items[3].Opts = &flow.EnqueueOptions{RunID: "third", Priority: 5}
	items[4].Opts = &flow.EnqueueOptions{Delay: 30 * time.Millisecond}
	runs, err := flow.EnqueueMany(ctx, e, job, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != n {
		t.Fatalf("%d handles for %d items", len(runs), n)
	}
	if runs[3].ID() != "third" {
		t.Errorf("item 3: run %s, want its RunID third", runs[3].ID())
	}
	for i, r := range runs {
		if r.Existing() {
			t.Errorf("item %d: reported existing", i)
		}
		if _, err := r.Result(ctx); err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
	rec.mu.Lock()
	var got []string
	for _, m := range rec.calls {
		got = append(got, m.To)
	}
	rec.mu.Unlock()
	slices.Sort(got)
	if len(got) != n || len(slices.Compact(slices.Clone(got))) != n {
		t.Errorf("handler calls %v, want each of the %d items once", got, n)
	}
	info, err := e.Inspect(ctx, "third")
	if err != nil {
		t.Fatal(err)
	}
	if info.Priority != 5 {
		t.Errorf("item 3: priority %d, want 5", info.Priority)
	}
	if kinds := eventKinds(t, e, "third"); len(kinds) == 0 || kinds[0] != "run_started" {
		t.Errorf("history of item 3 = %v, want it to begin with run_started", kinds)
	}
	if runs, err := flow.EnqueueMany(ctx, e, job, nil); err != nil || runs != nil {
		t.Errorf("EnqueueMany(nil) = %v, %v; want nothing", runs, err)
	}
}

// When item 7 of 100 collides with a unique key a recorded run holds, and
// item 51 with the key item 50 took, those two items record nothing and
// get the holders' handles; the other 98 are recorded.
func TestEnqueueManyUniqueKeyCollisions(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	ctx := waitCtx(t)
	holder := enqueue(t, e, job, email{To: "holder"}, &flow.EnqueueOptions{UniqueKey: "order-7"})

	items := make([]flow.EnqueueItem[email], 100)
	for i := range items {
		items[i].Args = email{To: fmt.Sprint(i)}
	}
	items[7].Opts = &flow.EnqueueOptions{UniqueKey: "order-7"}
	items[50].Opts = &flow.EnqueueOptions{UniqueKey: "dup"}
	items[51].Opts = &flow.EnqueueOptions{UniqueKey: "dup"}
	items[60].Opts = &flow.EnqueueOptions{UniqueKey: "period", UniquePeriod: time.Hour}
	runs, err := flow.EnqueueMany(ctx, e, job, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		switch i {
		case 7:
			if !r.Existing() || r.ID() != holder.ID() {
				t.Errorf("item 7: run %s (existing %v), want the holder %s", r.ID(), r.Existing(), holder.ID())
			}
		case 51:
			if !r.Existing() || r.ID() != runs[50].ID() {
				t.Errorf("item 51: run %s (existing %v), want item 50's run %s", r.ID(), r.Existing(), runs[50].ID())
			}
		default:
			if r.Existing() {
				t.Errorf("item %d: reported existing", i)
			}
		}
	}
	if n := totalRuns(t, e); n != 1+98 {
		t.Errorf("%d runs recorded, want 99 (the holder and 98 items)", n)
	}
	// Item 60 took its key for the period, as Enqueue would have.
	if r := enqueue(t, e, job, email{To: "later"}, &flow.EnqueueOptions{UniqueKey: "period"}); !r.Existing() || r.ID() != runs[60].ID() {
		t.Errorf("enqueue of item 60's key: run %s (existing %v), want %s", r.ID(), r.Existing(), runs[60].ID())
	}
	// The same batch again: every item is now taken, nothing is recorded.
	for i := range items {
		if items[i].Opts == nil {
			items[i].Opts = &flow.EnqueueOptions{RunID: runs[i].ID()}
		}
	}
	again, err := flow.EnqueueMany(ctx, e, job, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if !r.Existing() || r.ID() != runs[i].ID() {
			t.Errorf("again, item %d: run %s (existing %v), want %s", i, r.ID(), r.Existing(), runs[i].ID())
		}
	}
	if n := totalRuns(t, e); n != 99 {
		t.Errorf("%d runs recorded after the repeat, want 99", n)
	}
}

// An item that cannot be enqueued fails the whole batch with an ItemError
// naming it, and nothing of the batch is recorded.
func TestEnqueueManyBadItemRecordsNothing(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxPayloadBytes = 1000
	e := openEngine(t, dbPath(t), cfg)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	other := flow.Job[int]{Name: "other-job", Handler: func(context.Context, int) error { return nil }}
	flow.RegisterJob(e, other)
	ctx := waitCtx(t)
	if _, err := flow.Enqueue(ctx, e, other, 1, &flow.EnqueueOptions{RunID: "taken-by-other"}); err != nil {
		t.Fatal(err)
	}

	batch := func(bad int, item flow.EnqueueItem[email]) []flow.EnqueueItem[email] {
		items := make([]flow.EnqueueItem[email], 10)
		for i := range items {
			items[i].Args = email{To: fmt.Sprint(i)}
		}
		items[bad] = item
		return items
	}
	for _, tt := range []struct {
		name  string
		items []flow.EnqueueItem[email]
		index int
		want  error
	}{
		{"payload too large", batch(3, flow.EnqueueItem[email]{Args: email{To: strings.Repeat("a", 1200)}}), 3, flow.ErrPayloadTooLarge},
		{"invalid queue", batch(4, flow.EnqueueItem[email]{Opts: &flow.EnqueueOptions{Queue: "bad\nqueue"}}), 4, flow.ErrInvalidName},
		{"bad unique states", batch(5, flow.EnqueueItem[email]{Opts: &flow.EnqueueOptions{UniqueKey: "k", UniqueStates: []flow.RunStatus{flow.StatusCompleted}}}), 5, nil},
		{"repeated run ID", append(batch(0, flow.EnqueueItem[email]{Opts: &flow.EnqueueOptions{RunID: "twice"}}),
			flow.EnqueueItem[email]{Opts: &flow.EnqueueOptions{RunID: "twice"}}), 10, nil},
		{"run ID of another job's run", batch(6, flow.EnqueueItem[email]{Opts: &flow.EnqueueOptions{RunID: "taken-by-other"}}), 6, flow.ErrRunExists},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runs, err := flow.EnqueueMany(ctx, e, job, tt.items)
			var itemErr *flow.ItemError
			if !errors.As(err, &itemErr) {
				t.Fatalf("EnqueueMany = %v, %v; want an ItemError", runs, err)
			}
			if itemErr.Index != tt.index {
				t.Errorf("ItemError names item %d, want %d: %v", itemErr.Index, tt.index, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v does not match %v", err, tt.want)
			}
			if n := totalRuns(t, e); n != 1 {
				t.Errorf("%d runs recorded, want only the run made before", n)
			}
		})
	}
}

// EnqueueManyTx records the batch in the caller's transaction: nothing if
// it rolls back, every item once it commits, with unique keys checked
// against what the transaction wrote before.
func TestEnqueueManyTx(t *testing.T) {
	t.Parallel()
	path := sqlitePath(t)
	e := openEngine(t, path, nil)
	rec := &recorder{}
	job := emailJob(rec)
	flow.RegisterJob(e, job)
	db := rawDB(t, path)
	ctx := waitCtx(t)
	items := []flow.EnqueueItem[email]{
		{Args: email{To: "a"}},
		{Args: email{To: "b"}, Opts: &flow.EnqueueOptions{UniqueKey: "k"}},
		{Args: email{To: "c"}},
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.EnqueueManyTx(ctx, e, tx, job, items); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := totalRuns(t, e); n != 0 {
		t.Fatalf("%d runs after a rolled-back batch", n)
	}

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := flow.EnqueueTx(ctx, e, tx, job, email{To: "first"}, &flow.EnqueueOptions{UniqueKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := flow.EnqueueManyTx(ctx, e, tx, job, items)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if !runs[1].Existing() || runs[1].ID() != first.ID() {
		t.Errorf("item 1: run %s (existing %v), want the run enqueued before it in the transaction, %s", runs[1].ID(), runs[1].Existing(), first.ID())
	}
	if n := totalRuns(t, e); n != 3 {
		t.Errorf("%d runs after the commit, want 3", n)
	}
	startEngine(t, e)
	for i, r := range runs {
		if _, err := r.Result(ctx); err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
}

// StartMany starts runs of a workflow, each with its own input, and their
// handles give each run's output.
func TestStartMany(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[int, int]{Name: "double", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, flow.Step[int, int]{Name: "double", Run: func(_ context.Context, n int) (int, error) { return 2 * n, nil }}, n)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	items := make([]flow.StartItem[int], 20)
	for i := range items {
		items[i] = flow.StartItem[int]{In: i, Opts: &flow.StartOptions{RunID: fmt.Sprintf("double-%d", i)}}
	}
	runs, err := flow.StartMany(ctx, e, wf, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		out, err := r.Result(ctx)
		if err != nil || out != 2*i {
			t.Errorf("run %d: %d, %v; want %d", i, out, err, 2*i)
		}
	}
	// Starting the same IDs again returns the recorded runs.
	again, err := flow.StartMany(ctx, e, wf, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range again {
		if !r.Existing() || r.ID() != runs[i].ID() {
			t.Errorf("again, run %d: %s (existing %v), want %s", i, r.ID(), r.Existing(), runs[i].ID())
		}
	}
	unknown := flow.Workflow[int, int]{Name: "unregistered", Run: wf.Run}
	_, err = flow.StartMany(ctx, e, unknown, items[:1])
	var itemErr *flow.ItemError
	if !errors.As(err, &itemErr) || !errors.Is(err, flow.ErrUnknownWorkflow) {
		t.Errorf("StartMany of an unregistered workflow: %v, want an ItemError matching ErrUnknownWorkflow", err)
	}
}

// BenchmarkEnqueueMany records b.N no-op jobs in batches of 1000, FULL
// sync, with the engine stopped, and reports jobs/s: through EnqueueMany
// (one transaction per batch), and for comparison through EnqueueTx called
// 1000 times in one transaction of the caller's. Run it with:
//
//	go test -run '^$' -bench EnqueueMany -benchtime 100000x ./flow/
func BenchmarkEnqueueMany(b *testing.B) {
	const batch = 1000
	for _, mode := range []string{"EnqueueMany", "EnqueueTxLoop"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "bulk.db")
			e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 50 * time.Millisecond}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			flow.RegisterJob(e, noopJob)
			db := rawDB(b, path)
			items := make([]flow.EnqueueItem[int], batch)
			b.ResetTimer()
			start := time.Now()
			for done := 0; done < b.N; done += batch {
				n := min(batch, b.N-done)
				for i := range n {
					items[i].Args = done + i
				}
				if mode == "EnqueueMany" {
					if _, err := flow.EnqueueMany(ctx, e, noopJob, items[:n]); err != nil {
						b.Fatal(err)
					}
					continue
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if _, err := flow.EnqueueTx(ctx, e, tx, noopJob, done+i, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}

// BenchmarkEnqueueConcurrent records b.N no-op jobs with Enqueue from 16
// goroutines at once (as request handlers would), FULL sync, with the
// engine stopped, and reports jobs/s: the "enqueue from 16 callers"
// figure, which group commit serves. Run it with:
//
//	go test -run '^$' -bench EnqueueConcurrent -benchtime 20000x ./flow/
func BenchmarkEnqueueConcurrent(b *testing.B) {
	ctx := context.Background()
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "enqueue.db"), &flow.Config{PollInterval: 50 * time.Millisecond}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	enqueueConcurrently(b, e)
}

// enqueueConcurrently records b.N no-op jobs on e with Enqueue from
// producers goroutines at once, and reports jobs/s.
func enqueueConcurrently(b *testing.B, e *flow.Engine) {
	ctx := context.Background()
	flow.RegisterJob(e, noopJob)
	b.ResetTimer()
	start := time.Now()
	var g errgroup.Group
	for p := range producers {
		g.Go(func() error {
			for i := p; i < b.N; i += producers {
				if _, err := flow.Enqueue(ctx, e, noopJob, i, nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
