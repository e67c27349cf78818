package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
)

// Cancelling a running run cancels its step's context with ErrCancelled as
// the cause, compensates what completed, and ends the run CANCELLED.
func TestCancelRunningRunCompensatesAndEndsCancelled(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var mu sync.Mutex
	var undone []string
	blocking := make(chan struct{})
	var cause error

	reserve := flow.Step[string, string]{
		Name: "reserve",
		Run:  func(_ context.Context, s string) (string, error) { return "r-" + s, nil },
		Compensate: func(_ context.Context, in, out string) error {
			mu.Lock()
			defer mu.Unlock()
			undone = append(undone, out)
			return nil
		},
	}
	wait := flow.Step[string, string]{
		Name: "wait",
		Run: func(ctx context.Context, s string) (string, error) {
			close(blocking)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return "", ctx.Err()
		},
	}
	wf := flow.Workflow[string, string]{Name: "cancellable", Run: func(wc flow.Context, s string) (string, error) {
		r, err := flow.Do(wc, reserve, s)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, wait, r)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-blocking
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(ctx)
	if !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("result err = %v, want ErrCancelled", err)
	}
	if !errors.Is(cause, flow.ErrCancelled) {
		t.Fatalf("step context cause = %v, want ErrCancelled", cause)
	}
	if !slices.Equal(undone, []string{"r-x"}) {
		t.Fatalf("compensated %v, want [r-x]", undone)
	}
	info, _ := e.Inspect(ctx, run.ID())
	if info.Status != flow.StatusCancelled || info.Steps[1].Status != "failed" {
		t.Fatalf("run %s, wait step %s; want cancelled, failed", info.Status, info.Steps[1].Status)
	}
	if err := run.Cancel(ctx); !errors.Is(err, flow.ErrRunFinished) {
		t.Fatalf("second cancel: err = %v, want ErrRunFinished", err)
	}
}

// A transactional step's writes commit with its checkpoint: a failed attempt
// leaves no write behind, so the effect happens exactly once.
func TestTransactionalStepCommitsWithItsCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := flowsqlite.New(ctx, db, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := db.Exec(`CREATE TABLE ledger (order_id TEXT NOT NULL, cents INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	attempts := 0
	book := flow.Step[string, int]{
		Name: "book",
		RunTx: func(ctx context.Context, tx *sql.Tx, order string) (int, error) {
			attempts++
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES (?, 500)`, order); err != nil {
				return 0, err
			}
			if attempts == 1 {
				return 0, errors.New("transient failure after the write")
			}
			return 500, nil
		},
	}
	wf := flow.Workflow[string, int]{Name: "booking", Run: func(wc flow.Context, order string) (int, error) {
		return flow.Do(wc, book, order)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "o-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := run.Result(ctx); err != nil || got != 500 {
		t.Fatalf("result = %d, %v", got, err)
	}
	var rows int
	if err := db.QueryRow(`SELECT count(*) FROM ledger WHERE order_id = 'o-1'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if attempts != 2 || rows != 1 {
		t.Fatalf("attempts = %d, ledger rows = %d; want 2 attempts and exactly 1 row", attempts, rows)
	}
}

// A run started in the caller's transaction exists only if it commits.
func TestStartTxFollowsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := flowsqlite.New(ctx, db, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	startEngine(t, e)

	for _, commit := range []bool{false, true} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		run, err := flow.StartTx(ctx, e, tx, wf, 4, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !commit {
			tx.Rollback()
			if _, err := e.Inspect(ctx, run.ID()); !errors.Is(err, flow.ErrRunNotFound) {
				t.Fatalf("after rollback: err = %v, want ErrRunNotFound", err)
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if got, err := run.Result(ctx); err != nil || got != 8 {
			t.Fatalf("result = %d, %v; want 8", got, err)
		}
	}
}

// A delayed run is not claimed before it is due on the engine's clock.
func TestDelayedRunStartsWhenDue(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.Clock = clk
	e := openEngine(t, dbPath(t), cfg)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if info, _ := e.Inspect(ctx, run.ID()); info.Status != flow.StatusPending {
		t.Fatalf("before due: %s, want pending", info.Status)
	}
	clk.Advance(time.Hour)
	e.WakeAll()
	if got, err := run.Result(ctx); err != nil || got != 2 {
		t.Fatalf("result = %d, %v", got, err)
	}
	if _, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{Delay: time.Second, RunAt: clk.Now()}); err == nil {
		t.Fatal("Delay and RunAt together: want an error")
	}
}

// Higher priority runs of a queue are claimed first.
func TestPriorityOrdersClaims(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"serial": {Concurrency: 1}}
	e := openEngine(t, dbPath(t), cfg)
	var mu sync.Mutex
	var order []int
	record := flow.Step[int, int]{Name: "record", Run: func(_ context.Context, n int) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, n)
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "recorder", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, record, n) }}
	flow.Register(e, wf)
	var runs []*flow.Run[int]
	for i, prio := range []int{0, 5, 1, 9} {
		run, err := flow.Start(ctx, e, wf, prio, &flow.StartOptions{Queue: "serial", Priority: prio, RunID: string(rune('a' + i))})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	startEngine(t, e)
	for _, r := range runs {
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(order, []int{9, 5, 1, 0}) {
		t.Fatalf("execution order %v, want by priority [9 5 1 0]", order)
	}
}

// Stop waits for runs in flight; when its context ends first, they are
// released at once and resume on the next start.
func TestStopDrainsOrReleases(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	gate := make(chan struct{})
	started := make(chan struct{}, 2)
	slow := flow.Step[int, int]{Name: "slow", Run: func(ctx context.Context, n int) (int, error) {
		started <- struct{}{}
		select {
		case <-gate:
			return n, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}}
	wf := flow.Workflow[int, int]{Name: "slow", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, slow, n) }}

	e := openEngine(t, path, nil)
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 7, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := e.Stop(short); err == nil {
		t.Fatal("stop with runs in flight and a short deadline: want an error saying they were interrupted")
	}
	info, _ := e.Inspect(ctx, run.ID())
	kinds := eventKinds(t, e, run.ID())
	if info.Status != flow.StatusPending || kinds[len(kinds)-1] != "run_released" {
		t.Fatalf("after interrupted stop: status %s, history %v; want pending, released", info.Status, kinds)
	}

	startEngine(t, e)
	<-started
	done := make(chan error, 1)
	go func() { done <- e.Stop(ctx) }()
	time.Sleep(20 * time.Millisecond)
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if got, err := run.Result(ctx); err != nil || got != 7 {
		t.Fatalf("result = %d, %v; want 7 (completed during the drain)", got, err)
	}
}

// ListRuns bounds the creation time in the database.
func TestListRunsByCreationTime(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	cfg := testConfig()
	cfg.Clock = clk
	e := openEngine(t, dbPath(t), cfg)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	for i := range 3 {
		if _, err := flow.Start(ctx, e, wf, i, &flow.StartOptions{RunID: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	ids := func(f flow.RunFilter) []string {
		runs, err := e.ListRuns(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    flow.RunFilter
		want []string
	}{
		{flow.RunFilter{Since: t0.Add(time.Hour)}, []string{"c", "b"}},
		{flow.RunFilter{Until: t0.Add(time.Hour)}, []string{"a"}},
		{flow.RunFilter{Since: t0.Add(time.Hour), Until: t0.Add(2 * time.Hour)}, []string{"b"}},
		{flow.RunFilter{}, []string{"c", "b", "a"}},
	} {
		if got := ids(tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("ListRuns(%+v) = %v, want %v", tc.f, got, tc.want)
		}
	}
}

// A run started on an engine with a free slot is claimed in its start
// transaction only if it is next in its queue: runs that were ready before
// it still go first.
func TestStartDoesNotJumpTheQueue(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var mu sync.Mutex
	var order []int
	record := flow.Step[int, int]{Name: "record", Run: func(_ context.Context, n int) (int, error) {
		mu.Lock()
		order = append(order, n)
		mu.Unlock()
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "ordered", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, record, n) }}

	cfg := testConfig()
	cfg.PollInterval = time.Hour // only wakes make it claim
	cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 1}}
	worker := openEngine(t, path, cfg)
	flow.Register(worker, wf)
	startEngine(t, worker)
	time.Sleep(50 * time.Millisecond) // its first claim found nothing; it waits

	// Another process starts two runs; the worker is not woken.
	other := openEngine(t, path, testConfig())
	flow.Register(other, wf)
	var runs []*flow.Run[int]
	for n := range 2 {
		r, err := flow.Start(ctx, other, wf, n, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
		time.Sleep(2 * time.Millisecond) // distinct due times
	}
	r, err := flow.Start(ctx, worker, wf, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs = append(runs, r)
	for _, r := range runs {
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []int{0, 1, 2}) {
		t.Errorf("runs ran in order %v, want [0 1 2]: the new run jumped the queue", order)
	}
}

// Runs started while the engine stops are never left leased to it: each
// either ran before Stop returned or is pending for the next engine, which
// finishes them all.
func TestStartWhileStopping(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	cfg := testConfig()
	cfg.LeaseTimeout = time.Hour // a run left leased would stay stuck
	e := openEngine(t, path, cfg)
	wf := doubler("stopping", 1)
	flow.Register(e, wf)
	startEngine(t, e)

	const n = 200
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			_, err := flow.Start(ctx, e, wf, i, nil)
			return err
		})
		if i == n/2 {
			g.Go(func() error { return e.Stop(ctx) })
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if running, err := e.ListRuns(ctx, flow.RunFilter{Status: flow.StatusRunning}); err != nil || len(running) != 0 {
		t.Fatalf("after Stop: %d runs still leased (%v)", len(running), err)
	}
	startEngine(t, e)
	eventually(t, "every run to complete", func() bool {
		counts, err := e.CountRuns(ctx)
		return err == nil && counts[flow.StatusCompleted] == n
	})
}
