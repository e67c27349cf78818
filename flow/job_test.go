package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
	"github.com/flowlite/flowlite/internal/pgtest"
	"golang.org/x/sync/errgroup"
)

type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// recorder is a job handler that records the arguments it was called with
// and fails while fail returns an error.
type recorder struct {
	mu    sync.Mutex
	calls []email
	fail  func(email) error
}

func (r *recorder) handle(_ context.Context, m email) error {
	r.mu.Lock()
	r.calls = append(r.calls, m)
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail(m)
	}
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func emailJob(rec *recorder) flow.Job[email] {
	return flow.Job[email]{Name: "send-email", Handler: rec.handle}
}

func enqueue(t *testing.T, e *flow.Engine, job flow.Job[email], m email, opts *flow.EnqueueOptions) *flow.Run[struct{}] {
	t.Helper()
	run, err := flow.Enqueue(context.Background(), e, job, m, opts)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return run
}

func totalRuns(t *testing.T, e *flow.Engine) int64 {
	t.Helper()
	counts, err := e.CountRuns(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// A job is a one-step workflow named after it: the handler gets the
// arguments, and the run's history and steps read like any run's.
func TestJobRunsItsHandler(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	rec := &recorder{}
	job := emailJob(rec)
	flow.RegisterJob(e, job)
	startEngine(t, e)

	msg := email{To: "a@example.com", Subject: "hi"}
	run := enqueue(t, e, job, msg, nil)
	if run.Existing() {
		t.Error("new run reported as existing")
	}
	if _, err := run.Result(waitCtx(t)); err != nil {
		t.Fatalf("result: %v", err)
	}
	if rec.count() != 1 || rec.calls[0] != msg {
		t.Errorf("handler calls %v, want one with %v", rec.calls, msg)
	}
	info, err := e.Inspect(context.Background(), run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Workflow != "send-email" || info.Version != 1 || info.Queue != flow.DefaultQueue || info.Status != flow.StatusCompleted {
		t.Errorf("run: workflow %s v%d, queue %s, status %s", info.Workflow, info.Version, info.Queue, info.Status)
	}
	if string(info.Input) != `{"to":"a@example.com","subject":"hi"}` {
		t.Errorf("run input %s", info.Input)
	}
	if len(info.Steps) != 1 || info.Steps[0].Name != "send-email" || info.Steps[0].Attempts != 1 || string(info.Steps[0].Input) != "{}" {
		t.Errorf("steps %+v, want one send-email step of one attempt, input {}", info.Steps)
	}
	if info.StartedAt.IsZero() || info.StartedAt.After(info.FinishedAt) {
		t.Errorf("started %v, finished %v", info.StartedAt, info.FinishedAt)
	}
}

// MaxAttempts caps the handler's calls; a permanent error stops at once.
// Either way the run fails for good and Result says why.
func TestJobMaxAttemptsAndPermanentErrors(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var calls atomic.Int32
	flaky := flow.Job[int]{Name: "flaky", MaxAttempts: 4, Handler: func(ctx context.Context, n int) error {
		calls.Add(1)
		info, _ := flow.Attempt(ctx)
		if info.Attempt < n {
			return fmt.Errorf("attempt %d failed", info.Attempt)
		}
		return nil
	}}
	broken := flow.Job[int]{Name: "broken", MaxAttempts: 4, Handler: func(context.Context, int) error {
		calls.Add(1)
		return flow.Permanent(errors.New("bad input"))
	}}
	flow.RegisterJob(e, flaky)
	flow.RegisterJob(e, broken)
	startEngine(t, e)
	ctx := waitCtx(t)

	ok, err := flow.Enqueue(ctx, e, flaky, 4, nil) // succeeds on its 4th and last attempt
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ok.Result(ctx); err != nil {
		t.Errorf("job succeeding on its last attempt: %v", err)
	}
	if got := calls.Swap(0); got != 4 {
		t.Errorf("%d calls, want 4", got)
	}

	exhausted, err := flow.Enqueue(ctx, e, flaky, 5, nil) // would succeed on a 5th
	if err != nil {
		t.Fatal(err)
	}
	_, err = exhausted.Result(ctx)
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) || !strings.Contains(rb.Cause, "attempt 4 failed") || rb.Step != "flaky" || rb.Attempts != 4 {
		t.Errorf("exhausted job: error %v (%+v), want a RolledBackError naming the last attempt's error, the step and its 4 attempts", err, rb)
	}
	if got := calls.Swap(0); got != 4 {
		t.Errorf("%d calls, want 4", got)
	}

	perm, err := flow.Enqueue(ctx, e, broken, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := perm.Result(ctx); !errors.Is(err, flow.ErrRolledBack) || !strings.Contains(err.Error(), "bad input") {
		t.Errorf("permanent failure: error %v", err)
	}
	if got := calls.Swap(0); got != 1 {
		t.Errorf("%d calls after a permanent error, want 1", got)
	}
	info, err := e.Inspect(ctx, perm.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusFailed || len(info.Steps) != 1 || info.Steps[0].Status != "failed" || info.Steps[0].Error != "bad input" {
		t.Errorf("failed job: status %s, steps %+v", info.Status, info.Steps)
	}
}

// Timeout bounds each attempt through its context.
func TestJobTimeout(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	slow := flow.Job[string]{Name: "slow", MaxAttempts: 1, Timeout: 20 * time.Millisecond, Handler: func(ctx context.Context, _ string) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	flow.RegisterJob(e, slow)
	startEngine(t, e)
	run, err := flow.Enqueue(context.Background(), e, slow, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(waitCtx(t)); !errors.Is(err, flow.ErrRolledBack) || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("timed-out job: error %v", err)
	}
}

// Queue and priority come from the job unless the options say otherwise;
// delays and IDs work as for Start.
func TestEnqueueOptions(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.Clock = clk
	e := openEngine(t, dbPath(t), cfg)
	job := flow.Job[email]{Name: "mail", Queue: "emails", Priority: 5, Handler: (&recorder{}).handle}
	flow.RegisterJob(e, job)
	ctx := context.Background()

	tests := []struct {
		opts      *flow.EnqueueOptions
		queue     string
		priority  int
		runAt     time.Time
		wantID    string
		idIsFixed bool
	}{
		{nil, "emails", 5, clk.Now(), "", false},
		{&flow.EnqueueOptions{Queue: "bulk", Priority: -1}, "bulk", -1, clk.Now(), "", false},
		{&flow.EnqueueOptions{Delay: time.Hour}, "emails", 5, clk.Now().Add(time.Hour), "", false},
		{&flow.EnqueueOptions{RunID: "mail-1", RunAt: clk.Now().Add(time.Minute)}, "emails", 5, clk.Now().Add(time.Minute), "mail-1", true},
	}
	for i, tt := range tests {
		run := enqueue(t, e, job, email{To: fmt.Sprint(i)}, tt.opts)
		info, err := e.Inspect(ctx, run.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Queue != tt.queue || info.Priority != tt.priority || !info.RunAt.Equal(tt.runAt) {
			t.Errorf("case %d: queue %s, priority %d, due %v; want %s, %d, %v", i, info.Queue, info.Priority, info.RunAt, tt.queue, tt.priority, tt.runAt)
		}
		if tt.idIsFixed && run.ID() != tt.wantID {
			t.Errorf("case %d: ID %s, want %s", i, run.ID(), tt.wantID)
		}
	}
	// The ID is an idempotency key.
	again := enqueue(t, e, job, email{To: "other"}, &flow.EnqueueOptions{RunID: "mail-1"})
	if !again.Existing() || again.ID() != "mail-1" {
		t.Errorf("enqueue of an existing ID: %s, existing %v", again.ID(), again.Existing())
	}
}

// Bad jobs and options are refused with an error, and nothing is recorded.
func TestEnqueueRejectsBadInput(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	ctx := context.Background()
	tests := []struct {
		name string
		job  flow.Job[email]
		opts *flow.EnqueueOptions
		want string
	}{
		{"no name", flow.Job[email]{Handler: job.Handler}, nil, `invalid job name "": is empty`},
		{"no handler", flow.Job[email]{Name: "send-email"}, nil, "Handler is nil"},
		{"negative attempts", flow.Job[email]{Name: "send-email", Handler: job.Handler, MaxAttempts: -1}, nil, "MaxAttempts"},
		{"period without key", job, &flow.EnqueueOptions{UniquePeriod: time.Hour}, "UniquePeriod needs"},
		{"negative period", job, &flow.EnqueueOptions{UniqueKey: "k", UniquePeriod: -time.Second}, "negative UniquePeriod"},
		{"delay and run at", job, &flow.EnqueueOptions{Delay: time.Second, RunAt: time.Now()}, "not both"},
		{"unregistered", flow.Job[email]{Name: "other", Handler: job.Handler}, nil, "unknown workflow"},
	}
	for _, tt := range tests {
		_, err := flow.Enqueue(ctx, e, tt.job, email{}, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	if n := totalRuns(t, e); n != 0 {
		t.Errorf("%d runs recorded by refused enqueues", n)
	}
	if err := flow.RegisterJobSafely(e, flow.Job[email]{Name: "x"}); err == nil {
		t.Error("registering a job without handler succeeded")
	}
	if err := flow.RegisterJobSafely(e, job); err == nil {
		t.Error("registering a job twice succeeded")
	}
}

// While an unfinished run of the job has the key, enqueueing it again
// returns that run; once it finished, the key is free.
func TestUniqueKeyReturnsTheUnfinishedRun(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	rec := &recorder{}
	job := emailJob(rec)
	other := flow.Job[email]{Name: "other-job", Handler: rec.handle}
	flow.RegisterJob(e, job)
	flow.RegisterJob(e, other)
	ctx := context.Background()

	first := enqueue(t, e, job, email{To: "a"}, &flow.EnqueueOptions{UniqueKey: "user-1"})
	dup := enqueue(t, e, job, email{To: "b"}, &flow.EnqueueOptions{UniqueKey: "user-1", Queue: "elsewhere"})
	if !dup.Existing() || dup.ID() != first.ID() {
		t.Errorf("second enqueue with the key: run %s (existing %v), want %s", dup.ID(), dup.Existing(), first.ID())
	}
	if r := enqueue(t, e, job, email{To: "a"}, &flow.EnqueueOptions{UniqueKey: "user-2"}); r.Existing() {
		t.Error("enqueue with another key returned an existing run")
	}
	if r := enqueue(t, e, other, email{To: "a"}, &flow.EnqueueOptions{UniqueKey: "user-1"}); r.Existing() {
		t.Error("enqueue of another job with the key returned an existing run")
	}
	if r := enqueue(t, e, job, email{To: "a"}, nil); r.Existing() {
		t.Error("enqueue without a key returned an existing run")
	}
	info, err := e.Inspect(ctx, first.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.UniqueKey != "user-1" || string(info.Input) != `{"to":"a","subject":""}` {
		t.Errorf("held run: key %q, input %s; the duplicate must change nothing", info.UniqueKey, info.Input)
	}
	if n := totalRuns(t, e); n != 4 {
		t.Errorf("%d runs, want 4", n)
	}

	startEngine(t, e)
	if _, err := first.Result(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	next := enqueue(t, e, job, email{To: "c"}, &flow.EnqueueOptions{UniqueKey: "user-1"})
	if next.Existing() || next.ID() == first.ID() {
		t.Errorf("enqueue after the holder completed: %s, existing %v; want a new run", next.ID(), next.Existing())
	}
	if events := eventKinds(t, e, next.ID()); len(events) == 0 || events[0] != flow.EventRunStarted {
		t.Errorf("history %v", events)
	}
}

// UniqueByArgs makes equal arguments the key, alone or with UniqueKey.
func TestUniqueByArgs(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	byArgs := &flow.EnqueueOptions{UniqueByArgs: true}

	a := enqueue(t, e, job, email{To: "a", Subject: "s"}, byArgs)
	if r := enqueue(t, e, job, email{To: "a", Subject: "s"}, byArgs); !r.Existing() || r.ID() != a.ID() {
		t.Errorf("equal arguments: run %s (existing %v), want %s", r.ID(), r.Existing(), a.ID())
	}
	if r := enqueue(t, e, job, email{To: "a", Subject: "t"}, byArgs); r.Existing() {
		t.Error("other arguments returned an existing run")
	}
	if r := enqueue(t, e, job, email{To: "a", Subject: "s"}, nil); r.Existing() {
		t.Error("equal arguments without UniqueByArgs returned an existing run")
	}
	keyed := &flow.EnqueueOptions{UniqueKey: "tenant-1", UniqueByArgs: true}
	k := enqueue(t, e, job, email{To: "a", Subject: "s"}, keyed)
	if k.Existing() {
		t.Error("key and arguments together matched the arguments alone")
	}
	if r := enqueue(t, e, job, email{To: "a", Subject: "s"}, keyed); !r.Existing() || r.ID() != k.ID() {
		t.Errorf("equal key and arguments: run %s, want %s", r.ID(), k.ID())
	}
	if r := enqueue(t, e, job, email{To: "a", Subject: "s"}, &flow.EnqueueOptions{UniqueKey: "tenant-2", UniqueByArgs: true}); r.Existing() {
		t.Error("another key with equal arguments returned an existing run")
	}
	info, err := e.Inspect(context.Background(), k.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.UniqueKey, "tenant-1#args:") || len(info.UniqueKey) != len("tenant-1#args:")+64 {
		t.Errorf("unique key %q, want tenant-1#args:<sha256>", info.UniqueKey)
	}
}

// With a unique period, the key stays taken for the period after the
// enqueue, even once the run finished (completed or failed); then the next
// enqueue starts a new run.
func TestUniquePeriodHoldsFinishedRuns(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.Clock = clk
	cfg.LeaseTimeout = 1000 * time.Hour
	e := openEngine(t, dbPath(t), cfg)
	rec := &recorder{fail: func(m email) error {
		if m.Subject == "fail" {
			return flow.Permanent(errors.New("refused"))
		}
		return nil
	}}
	job := emailJob(rec)
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)

	for _, subject := range []string{"ok", "fail"} {
		opts := &flow.EnqueueOptions{UniqueByArgs: true, UniquePeriod: time.Hour}
		m := email{To: "a", Subject: subject}
		first := enqueue(t, e, job, m, opts)
		_, _ = first.Result(ctx)
		clk.Advance(59 * time.Minute)
		within := enqueue(t, e, job, m, opts)
		if !within.Existing() || within.ID() != first.ID() {
			t.Errorf("%s: enqueue within the period: run %s (existing %v), want the finished %s", subject, within.ID(), within.Existing(), first.ID())
		}
		// A later enqueue asking for a shorter period still meets the hold.
		if r := enqueue(t, e, job, m, &flow.EnqueueOptions{UniqueByArgs: true}); !r.Existing() {
			t.Errorf("%s: enqueue without a period within the hold started a run", subject)
		}
		clk.Advance(time.Minute)
		after := enqueue(t, e, job, m, opts)
		if after.Existing() || after.ID() == first.ID() {
			t.Errorf("%s: enqueue once the period ended: run %s (existing %v), want a new one", subject, after.ID(), after.Existing())
		}
		_, _ = after.Result(ctx)
		// The new run holds the key for its own period.
		clk.Advance(30 * time.Minute)
		if r := enqueue(t, e, job, m, opts); r.ID() != after.ID() {
			t.Errorf("%s: enqueue within the new run's period: run %s, want %s", subject, r.ID(), after.ID())
		}
	}
	if got := rec.count(); got != 4 {
		t.Errorf("handler called %d times, want 4", got)
	}
}

// Two engines on one file enqueueing the same key at once start one run:
// the database, not a read before the insert, decides.
func TestUniqueKeyRaceAcrossEngines(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	job := emailJob(&recorder{})
	engines := []*flow.Engine{openEngine(t, path, nil), openEngine(t, path, nil)}
	for _, e := range engines {
		flow.RegisterJob(e, job)
	}
	const perEngine = 16
	for round, opts := range []*flow.EnqueueOptions{
		{UniqueKey: "race"},
		{UniqueByArgs: true, UniquePeriod: time.Hour},
	} {
		var mu sync.Mutex
		ids := make(map[string]int)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, e := range engines {
			for range perEngine {
				wg.Go(func() {
					<-start
					run, err := flow.Enqueue(context.Background(), e, job, email{To: fmt.Sprint("round-", round)}, opts)
					if err != nil {
						t.Errorf("enqueue: %v", err)
						return
					}
					mu.Lock()
					ids[run.ID()]++
					mu.Unlock()
				})
			}
		}
		close(start)
		wg.Wait()
		if len(ids) != 1 {
			t.Errorf("round %d: %d distinct runs %v, want 1", round, len(ids), ids)
		}
	}
	if n := totalRuns(t, engines[0]); n != 2 {
		t.Errorf("%d runs recorded, want 2", n)
	}
}

// EnqueueTx checks the key inside the caller's transaction: a rolled-back
// enqueue leaves it free, a committed one takes it.
func TestEnqueueTxUniqueKey(t *testing.T) {
	t.Parallel()
	path := sqlitePath(t)
	e := openEngine(t, path, nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	db := rawDB(t, path) // EnqueueTx takes the caller's *sql.Tx
	ctx := context.Background()
	opts := &flow.EnqueueOptions{UniqueKey: "order-7"}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.EnqueueTx(ctx, e, tx, job, email{To: "rolled back"}, opts); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := totalRuns(t, e); n != 0 {
		t.Fatalf("%d runs after a rolled-back enqueue", n)
	}

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := flow.EnqueueTx(ctx, e, tx, job, email{To: "committed"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := flow.EnqueueTx(ctx, e, tx, job, email{To: "same tx"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if first.Existing() || !dup.Existing() || dup.ID() != first.ID() {
		t.Errorf("in one transaction: first %s (existing %v), second %s (existing %v)", first.ID(), first.Existing(), dup.ID(), dup.Existing())
	}
	if r := enqueue(t, e, job, email{To: "later"}, opts); !r.Existing() || r.ID() != first.ID() {
		t.Errorf("enqueue after the commit: %s, want %s", r.ID(), first.ID())
	}
}

// A job is a workflow: Lookup finds its runs.
func TestJobWorkflowLookup(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	startEngine(t, e)
	run := enqueue(t, e, job, email{To: "x"}, &flow.EnqueueOptions{RunID: "job-1"})
	h, err := flow.Lookup(context.Background(), e, job.Workflow(), run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Result(waitCtx(t)); err != nil {
		t.Errorf("result through Lookup: %v", err)
	}
}

var noopJob = flow.Job[int]{Name: "noop_job", Handler: func(context.Context, int) error { return nil }}

// recordChoices are noopJob with each record a job can keep, for the drain
// benchmarks' sub-benchmarks (record=full, record=lean).
var recordChoices = []struct {
	name string
	job  flow.Job[int]
}{
	{"full", noopJob},
	{"lean", func() flow.Job[int] { j := noopJob; j.Record = flow.LeanRecord; return j }()},
}

// BenchmarkDrainJobs enqueues b.N no-op jobs with the engine stopped, then
// starts it and reports how fast it drains them (jobs/s), FULL sync: the
// figure DESIGN.md's "jobs drained" target is about.
//
//	go test -run '^$' -bench 'DrainJobs$' -benchtime 20000x ./flow/
func BenchmarkDrainJobs(b *testing.B) {
	for _, rc := range recordChoices {
		b.Run("record="+rc.name, func(b *testing.B) { drainJobs(b, rc.job) })
	}
}

func drainJobs(b *testing.B, noopJob flow.Job[int]) {
	ctx := context.Background()
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "drain.db"), &flow.Config{
		Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 64}},
		PollInterval: 50 * time.Millisecond,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
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
	b.ResetTimer()
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	waitCompleted(b, e, b.N, 50*time.Millisecond)
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed, "jobs/s")
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// waitCompleted polls e every interval until n runs are completed.
func waitCompleted(b *testing.B, e *flow.Engine, n int, interval time.Duration) {
	b.Helper()
	for {
		counts, err := e.CountRuns(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if counts[flow.StatusCompleted] == int64(n) {
			return
		}
		time.Sleep(interval)
	}
}

// BenchmarkDrainJobsPG records b.N no-op jobs on PostgreSQL (FLOWLITE_PG_DSN,
// by default the local server) with EnqueueManyTx, 1,000 per transaction,
// then starts one engine (concurrency 64, the default pool) and reports how
// fast it drains them: jobs/s overall, and of the first and last tenth of
// the drain, which are equal when a claim's cost does not depend on the
// backlog. The schema is fresh and never analyzed, as after a bulk insert.
//
//	go test -run '^$' -bench DrainJobsPG -benchtime 10000x ./flow/
func BenchmarkDrainJobsPG(b *testing.B) {
	if err := pgtest.Reachable(); err != nil {
		b.Skipf("no PostgreSQL server: %v", err)
	}
	for _, rc := range recordChoices {
		b.Run("record="+rc.name, func(b *testing.B) { drainJobsPG(b, rc.job) })
	}
}

func drainJobsPG(b *testing.B, noopJob flow.Job[int]) {
	ctx := context.Background()
	dsn, schema := pgtest.Schema(b)
	cfg := &flow.Config{
		Queues:         map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 64}},
		PollInterval:   50 * time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
		ReportInterval: time.Minute,
	}
	e, err := flowpg.Open(ctx, dsn, cfg, &flowpg.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
	// EnqueueManyTx takes the caller's *sql.Tx, begun on the caller's *sql.DB.
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for lo := 0; lo < b.N; lo += 1000 {
		items := make([]flow.EnqueueItem[int], 0, 1000)
		for i := lo; i < min(lo+1000, b.N); i++ {
			items = append(items, flow.EnqueueItem[int]{Args: i})
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := flow.EnqueueManyTx(ctx, e, tx, noopJob, items); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	tenth := max(int64(b.N)/10, 1)
	var firstTenth, lastTenthFrom time.Time
	for {
		counts, err := e.CountRuns(ctx)
		if err != nil {
			b.Fatal(err)
		}
		done := counts[flow.StatusCompleted]
		now := time.Now()
		if firstTenth.IsZero() && done >= tenth {
			firstTenth = now
		}
		if lastTenthFrom.IsZero() && done >= int64(b.N)-tenth {
			lastTenthFrom = now
		}
		if done >= int64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	end := time.Now()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/end.Sub(start).Seconds(), "jobs/s")
	b.ReportMetric(float64(tenth)/firstTenth.Sub(start).Seconds(), "first-tenth-jobs/s")
	b.ReportMetric(float64(tenth)/end.Sub(lastTenthFrom).Seconds(), "last-tenth-jobs/s")
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEnqueueConcurrentPG is BenchmarkEnqueueConcurrent on
// PostgreSQL: b.N no-op jobs enqueued by 16 goroutines at once on an
// engine that works no queue, each start its own transaction (one
// statement, RunStartAlone). Run it with:
//
//	FLOWLITE_PG_TEST=1 go test -run '^$' -bench EnqueueConcurrentPG -benchtime 20000x ./flow/
func BenchmarkEnqueueConcurrentPG(b *testing.B) {
	if err := pgtest.Reachable(); err != nil {
		b.Skipf("no PostgreSQL server: %v", err)
	}
	dsn, schema := pgtest.Schema(b)
	e, err := flowpg.Open(context.Background(), dsn, &flow.Config{
		PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}, &flowpg.Options{Schema: schema, MaxConns: producers})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	enqueueConcurrently(b, e)
}

// BenchmarkEnqueueManyPG records b.N no-op jobs on PostgreSQL (FLOWLITE_PG_DSN,
// by default the local server) through EnqueueMany, 1,000 per call, with
// the engine stopped, and reports jobs/s: the bulk insert River's
// InsertManyFast is measured against in bench/.
//
//	go test -run '^$' -bench EnqueueManyPG -benchtime 20000x ./flow/
func BenchmarkEnqueueManyPG(b *testing.B) {
	if err := pgtest.Reachable(); err != nil {
		b.Skipf("no PostgreSQL server: %v", err)
	}
	ctx := context.Background()
	dsn, schema := pgtest.Schema(b)
	e, err := flowpg.Open(ctx, dsn, &flow.Config{Logger: slog.New(slog.DiscardHandler)}, &flowpg.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
	items := make([]flow.EnqueueItem[int], 1000)
	b.ResetTimer()
	start := time.Now()
	for lo := 0; lo < b.N; lo += len(items) {
		n := min(len(items), b.N-lo)
		for i := range n {
			items[i].Args = lo + i
		}
		if _, err := flow.EnqueueMany(ctx, e, noopJob, items[:n]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
