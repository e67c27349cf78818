package flow_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
	"golang.org/x/sync/errgroup"
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
	// The user's own *sql.DB and table: RunTx writes them in the engine's
	// transaction, and only a query of that table shows the write happened once.
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
	// StartTx takes the caller's *sql.Tx, begun on the caller's *sql.DB.
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

// A Cancel issued right after Enqueue meets the started engine's claim of
// the job: before it, during it or after it. Whichever it meets, the
// cancel succeeds and the run ends cancelled: cancelled at once while no
// worker held it, or through its context once a worker did, at once,
// also when the claim committed but its execution had not begun. On
// PostgreSQL a claim committed between Cancel's read of the run and its
// update used to fail the call with ErrConflict ("changed while being
// cancelled"), cancelling nothing; on both, a request made between the
// claim and the start of its execution waited for the next heartbeat. The
// race is won or lost each time, so it is run several times.
func TestCancelRacingAClaimCancelsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	// A request that reaches the run only through a heartbeat comes a
	// minute late, beyond the wait for each result below.
	cfg := testConfig()
	cfg.LeaseTimeout, cfg.HeartbeatInterval = 3*time.Minute, time.Minute
	e := openEngine(t, dbPath(t), cfg)
	job := flow.Job[int]{Name: "until-cancelled", MaxAttempts: 1, Handler: func(ctx context.Context, _ int) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	for i := range 20 {
		run, err := flow.Enqueue(ctx, e, job, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Cancel(ctx, run.ID()); err != nil {
			t.Fatalf("try %d: Cancel right after Enqueue: %v", i, err)
		}
		wait, cancel := context.WithTimeout(ctx, slowBound(5*time.Second))
		_, err = run.Result(wait)
		cancel()
		if !errors.Is(err, flow.ErrCancelled) {
			t.Fatalf("try %d: Result after Cancel = %v, want ErrCancelled at once", i, err)
		}
	}
}

// aheadClock runs ahead of the wall clock, so that an engine using it sees
// the leases of others as expired.
type aheadClock struct{ by time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.by) }

// A job with MaxAttempts 1 whose lease lapsed mid-attempt is rescued, and
// the interrupted attempt counts: the run fails for good (a dead letter)
// instead of calling its handler a second time (River's rescuer discards
// such jobs too).
func TestRescuedJobDoesNotRunBeyondMaxAttempts(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var calls atomic.Int32
	release := make(chan struct{})
	job := flow.Job[string]{Name: "once", MaxAttempts: 1, Handler: func(ctx context.Context, _ string) error {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}

	worker := openEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond, WorkerID: "worker"})
	flow.RegisterJob(worker, job)
	startEngine(t, worker)
	run, err := flow.Enqueue(ctx, worker, job, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the handler runs", func() bool { return calls.Load() == 1 })

	// Another engine, whose clock says the worker's lease expired, rescues
	// the run and claims it again.
	rescuer := openEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond, WorkerID: "rescuer", Clock: aheadClock{time.Hour}})
	flow.RegisterJob(rescuer, job)
	if n, err := rescuer.Rescue(ctx); err != nil || n != 1 {
		t.Fatalf("Rescue = %d, %v; want the run rescued", n, err)
	}
	startEngine(t, rescuer)

	_, err = run.Result(ctx)
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) || rb.Attempts != 1 {
		t.Fatalf("Result = %v, want the job failed for good after its 1 attempt", err)
	}
	close(release)
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want MaxAttempts = 1", n)
	}
	dead, err := worker.DeadLetters(ctx, flow.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != run.ID() {
		t.Fatalf("dead letters = %v, want the rescued job", dead)
	}
	info, err := worker.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Steps) != 1 || info.Steps[0].Attempts != 1 {
		t.Fatalf("steps = %+v, want one step with 1 attempt", info.Steps)
	}
}

// Cancelling a run that no worker executes (in a queue no engine works, or
// a paused one) ends it cancelled within the call: Result returns at once.
func TestCancelOfARunNoWorkerExecutesEndsItAtOnce(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var ran atomic.Int32
	step := flow.Step[int, int]{Name: "work", Run: func(_ context.Context, n int) (int, error) { ran.Add(1); return n, nil }}
	wf := flow.Workflow[int, int]{Name: "idle", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, step, n) }}
	flow.Register(e, wf)
	startEngine(t, e)
	if err := e.PauseQueue(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	for _, queue := range []string{"nobody-works-it", "paused"} {
		run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Cancel(ctx); err != nil {
			t.Fatalf("%s: cancel: %v", queue, err)
		}
		info, err := e.Inspect(ctx, run.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != flow.StatusCancelled || info.FinishedAt.IsZero() {
			t.Fatalf("%s: after Cancel the run is %s, want cancelled", queue, info.Status)
		}
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err = run.Result(short)
		cancel()
		if !errors.Is(err, flow.ErrCancelled) {
			t.Fatalf("%s: Result = %v, want ErrCancelled at once", queue, err)
		}
		if err := run.Cancel(ctx); !errors.Is(err, flow.ErrRunFinished) {
			t.Fatalf("%s: second cancel = %v, want ErrRunFinished", queue, err)
		}
	}
	if ran.Load() != 0 {
		t.Fatal("a cancelled run's step ran")
	}
}

// A waiting run with a completed, compensable step is cancelled while no
// engine works its queue: it cannot end cancelled before its step is
// undone, so it becomes compensating, and the compensation runs once an
// engine picks it up, not before.
func TestCancelOfAnIdleRunWithWorkToUndoCompensatesWhenPickedUp(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var undone atomic.Int32
	reserve := flow.Step[int, int]{
		Name:       "reserve",
		Run:        func(_ context.Context, n int) (int, error) { return n, nil },
		Compensate: func(context.Context, int, int) error { undone.Add(1); return nil },
	}
	wf := flow.Workflow[int, int]{Name: "hold", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.Do(wc, reserve, n); err != nil {
			return 0, err
		}
		_, err := flow.Receive[string](wc, "never", 0)
		return n, err
	}}
	e1 := openEngine(t, path, nil)
	flow.Register(e1, wf)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits", func() bool {
		info, err := e1.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if err := e1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := e1.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusCompensating || undone.Load() != 0 {
		t.Fatalf("after Cancel: %s with %d compensations, want compensating with none run yet", info.Status, undone.Load())
	}
	e1.Close()

	e2 := openEngine(t, path, nil)
	flow.Register(e2, wf)
	startEngine(t, e2)
	handle, err := flow.Lookup(ctx, e2, wf, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handle.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("Result = %v, want cancelled", err)
	}
	if n := undone.Load(); n != 1 {
		t.Fatalf("compensation ran %d times, want once", n)
	}
}

// syncBuffer is a log sink safe for the engine's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// When the database stalls every write for longer than the lease (here a
// second connection holds the write lock), the engine's own rescuer must
// not take away the runs the engine is still executing: no run is rescued,
// and no step body runs twice. The stall outlasts the busy timeout too, so
// the executions' writes fail with ErrBusy and must be retried, not
// abandoned.
func TestWriteStallLongerThanTheLeaseRescuesNoLiveRun(t *testing.T) {
	skipOnPostgres(t, "a stall of SQLite's single write lock")
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	const lease = 400 * time.Millisecond
	var mu sync.Mutex
	bodies := map[string]int{}
	step := flow.Step[int, int]{Name: "work", Run: func(ctx context.Context, n int) (int, error) {
		info, _ := flow.Attempt(ctx)
		mu.Lock()
		bodies[info.RunID]++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "stalled", Run: func(wc flow.Context, n int) (int, error) {
		for range 3 {
			if _, err := flow.Do(wc, step, n); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
	e := openSQLiteEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond, LeaseTimeout: lease, RescueInterval: 50 * time.Millisecond}, &flowsqlite.Options{BusyTimeout: 100 * time.Millisecond}) // a lease this short needs a short lock wait
	flow.Register(e, wf)
	startEngine(t, e)
	var runs []*flow.Run[int]
	for i := range 20 {
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}

	// Stall: hold the write lock for three leases (fault injection: another
	// process's lock, on a connection of its own).
	raw := rawDB(t, path)
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * lease)
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	for _, r := range runs {
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
		events, err := e.History(ctx, r.ID())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if ev.Kind == flow.EventRunRescued {
				t.Errorf("run %s was rescued from its live owner: %s", r.ID(), ev.Detail)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range bodies {
		if n != 3 {
			t.Errorf("run %s: %d step bodies ran, want 3 (one per step)", id, n)
		}
	}
}

// Heartbeats that race a run's own finish or release find the lease gone;
// that is no news, and must not be logged as "another worker owns the run".
func TestNoLeaseLostWarningAfterARunsOwnFinish(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	logs := &syncBuffer{}
	e := openSQLiteEngine(t, dbPath(t), &flow.Config{
		PollInterval: 10 * time.Millisecond, LeaseTimeout: 50 * time.Millisecond, HeartbeatInterval: time.Millisecond, DefaultRetry: flow.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, &flowsqlite.Options{BusyTimeout: 20 * time.Millisecond})
	step := flow.Step[int, int]{Name: "blink", Run: func(ctx context.Context, n int) (int, error) {
		info, _ := flow.Attempt(ctx)
		time.Sleep(time.Duration(n%3) * time.Millisecond)
		if n%4 == 0 && info.Attempt == 1 {
			return 0, fmt.Errorf("retry me") // released until the next attempt
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "blink", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, step, n) }}
	flow.Register(e, wf)
	startEngine(t, e)
	var runs []*flow.Run[int]
	for i := range 200 {
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.count("lease lost"); n > 0 {
		t.Fatalf("%d lease-lost warnings for runs no other worker took:\n%s", n, logs.String())
	}
}

// A run waiting for a signal while no engine works the database can be
// signalled, cancelled, or pass its deadline; the next engine acts on it.
func TestWaitingRunActedOnWhileNoEngineRuns(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		opts     *flow.StartOptions
		between  func(ctx context.Context, e *flow.Engine, clk *clock.Manual, runID string) error
		wantOut  string
		wantErr  error
		wantUndo []string
	}{
		{
			name: "signal",
			between: func(ctx context.Context, e *flow.Engine, _ *clock.Manual, runID string) error {
				_, err := flow.Signal(ctx, e, runID, "go", "+signal", nil)
				return err
			},
			wantOut: "in+reserve+signal+after",
		},
		{
			name: "cancel",
			between: func(ctx context.Context, e *flow.Engine, _ *clock.Manual, runID string) error {
				return e.Cancel(ctx, runID)
			},
			wantErr: flow.ErrCancelled, wantUndo: []string{"reserve"},
		},
		{
			name: "deadline",
			opts: &flow.StartOptions{Deadline: epoch.Add(time.Hour)},
			between: func(_ context.Context, _ *flow.Engine, clk *clock.Manual, _ string) error {
				clk.Advance(2 * time.Hour)
				return nil
			},
			wantErr: flow.ErrCancelled, wantUndo: []string{"reserve"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := waitCtx(t)
			path := dbPath(t)
			clk := clock.NewManual(epoch)
			var c counter
			var u undoLog
			reserve, after := compensable(&c, &u, "reserve"), countedStep(&c, "after")
			wf := flow.Workflow[string, string]{Name: "wait-across-restart", Run: func(wc flow.Context, in string) (string, error) {
				s, err := flow.Do(wc, reserve, in)
				if err != nil {
					return "", err
				}
				v, err := flow.Receive[string](wc, "go", 0)
				if err != nil {
					return "", err
				}
				return flow.Do(wc, after, s+v)
			}}
			register := func(e *flow.Engine) { flow.Register(e, wf) }
			e1, close1 := engineSession(t, path, manualConfig(clk), register)
			run, err := flow.Start(ctx, e1, wf, "in", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			awaitStatus(t, e1, run.ID(), flow.StatusWaiting)
			close1()

			e2 := openEngine(t, path, manualConfig(clk))
			register(e2)
			if err := tc.between(ctx, e2, clk, run.ID()); err != nil {
				t.Fatal(err)
			}
			startEngine(t, e2)
			out, err := handle(t, e2, wf, run.ID()).Result(ctx)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("result err = %v, want %v", err, tc.wantErr)
				}
			} else if err != nil || out != tc.wantOut {
				t.Fatalf("result = %q, %v; want %q", out, err, tc.wantOut)
			}
			if got := u.list(); !slices.Equal(got, tc.wantUndo) {
				t.Fatalf("compensated %v, want %v", got, tc.wantUndo)
			}
			if c.get("reserve") != 1 {
				t.Fatalf("reserve ran %d times, want 1", c.get("reserve"))
			}
		})
	}
}

// greeter returns version v of a workflow whose versions call different
// steps, then wait for a signal.
func greeter(v int, c *counter) flow.Workflow[string, string] {
	steps := map[int]flow.Step[string, string]{1: countedStep(c, "greet-v1"), 2: countedStep(c, "greet-v2")}
	return flow.Workflow[string, string]{Name: "greeter", Version: v, Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, steps[v], in)
		if err != nil {
			return "", err
		}
		name, err := flow.Receive[string](wc, "name", 0)
		return s + " " + name, err
	}}
}

// Two versions of a workflow live side by side: a run finishes on the
// version it started with even after a newer one is registered, new runs
// started with the newer value take it, and an engine that lacks a run's
// version leaves the run alone and reports it through Waiting.
func TestRunsFinishOnTheVersionTheyStartedWith(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var c counter
	v1, v2 := greeter(1, &c), greeter(2, &c)

	// An engine that knows only v1 starts a run, which waits for a signal.
	e1, close1 := engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, v1) })
	old, err := flow.Start(ctx, e1, v1, "old", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e1, old.ID(), flow.StatusWaiting)
	close1()

	// An engine that knows only v2 runs new runs and leaves the v1 run alone,
	// even once a signal made it due.
	e2, close2 := engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, v2) })
	if _, err := flow.Signal(ctx, e2, old.ID(), "name", "ada", nil); err != nil {
		t.Fatal(err)
	}
	fresh, err := flow.Start(ctx, e2, v2, "fresh", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e2, fresh.ID(), "name", "bob", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := fresh.Result(ctx); err != nil || out != "fresh+greet-v2 bob" {
		t.Fatalf("v2 run: %q, %v", out, err)
	}
	if _, err := flow.Start(ctx, e2, v1, "refused", nil); !errors.Is(err, flow.ErrUnknownWorkflow) {
		t.Fatalf("start v1 on an engine without it: %v, want ErrUnknownWorkflow", err)
	}
	waiting, err := e2.Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waiting, []flow.WaitingWorkflow{{Workflow: "greeter", Version: 1, Runs: 1}}) {
		t.Fatalf("waiting = %+v, want the v1 run", waiting)
	}
	if info := inspect(t, e2, old.ID()); info.Status != flow.StatusWaiting || info.Version != 1 {
		t.Fatalf("v1 run is %s on version %d, want waiting on 1", info.Status, info.Version)
	}
	if n := countKind(t, e2, old.ID(), flow.EventRunClaimed); n != 1 {
		t.Fatalf("v1 run claimed %d times, want only by the v1 engine", n)
	}
	close2()

	// An engine with both finishes the v1 run on v1.
	e3, _ := engineSession(t, path, nil, func(e *flow.Engine) {
		flow.Register(e, v1)
		flow.Register(e, v2)
	})
	if out, err := handle(t, e3, v1, old.ID()).Result(ctx); err != nil || out != "old+greet-v1 ada" {
		t.Fatalf("v1 run: %q, %v", out, err)
	}
	newer, err := flow.Start(ctx, e3, v2, "newer", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e3, newer.ID(), "name", "cy", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := newer.Result(ctx); err != nil || out != "newer+greet-v2 cy" {
		t.Fatalf("second v2 run: %q, %v", out, err)
	}
	if info := inspect(t, e3, newer.ID()); info.Version != 2 {
		t.Fatalf("run started with the v2 value is on version %d", info.Version)
	}
	if c.get("greet-v1") != 1 || c.get("greet-v2") != 2 {
		t.Fatalf("greet-v1 ran %d, greet-v2 %d times; want 1 and 2", c.get("greet-v1"), c.get("greet-v2"))
	}
	if waiting, err := e3.Waiting(ctx); err != nil || len(waiting) != 0 {
		t.Fatalf("waiting = %+v, %v; want none", waiting, err)
	}
}
