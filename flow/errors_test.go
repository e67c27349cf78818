package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// engineErrors are flowlite's sentinels a workflow body can get from a
// step that called the engine, each as a step would return it: wrapped,
// or as the error type that matches it.
var engineErrors = []struct {
	name string
	err  error // what the step returns
	is   error // the sentinel it matches
}{
	{"exists", fmt.Errorf("start: %w", flow.ErrRunExists), flow.ErrRunExists},
	{"finished", fmt.Errorf("cancel run r: %w: run r is completed", flow.ErrRunFinished), flow.ErrRunFinished},
	{"unknown-workflow", fmt.Errorf("start: %w", flow.ErrUnknownWorkflow), flow.ErrUnknownWorkflow},
	{"conflict", fmt.Errorf("resume: %w", flow.ErrConflict), flow.ErrConflict},
	{"cancelled", &flow.CancelledError{RunID: "r"}, flow.ErrCancelled},
	{"deadline", fmt.Errorf("run r: %w", flow.ErrDeadlineExceeded), flow.ErrDeadlineExceeded},
	{"rolled-back", &flow.RolledBackError{RunID: "r", Cause: "boom"}, flow.ErrRolledBack},
	{"suspended", &flow.SuspendedError{RunID: "r", Reason: "why"}, flow.ErrSuspended},
	{"too-large", fmt.Errorf("start: input: %w", flow.ErrPayloadTooLarge), flow.ErrPayloadTooLarge},
	{"invalid-name", &flow.NameError{Kind: "queue", Name: "", Rule: "is empty"}, flow.ErrInvalidName},
	{"timeout", fmt.Errorf("call: %w", context.DeadlineExceeded), context.DeadlineExceeded},
	{"busy", fmt.Errorf("start: %w", flow.ErrBusy), flow.ErrBusy},
	{"unavailable", fmt.Errorf("start: %w", flow.ErrUnavailable), flow.ErrUnavailable},
	{"closed", fmt.Errorf("start: %w", flow.ErrClosed), flow.ErrClosed},
	{"disk-full", fmt.Errorf("start: %w", flow.ErrDiskFull), flow.ErrDiskFull},
	{"read-only", fmt.Errorf("start: %w", flow.ErrReadOnly), flow.ErrReadOnly},
	{"timed-out", fmt.Errorf("wait: %w", flow.ErrTimedOut), flow.ErrTimedOut},
	{"schedule-not-found", fmt.Errorf("pause schedule s: %w", flow.ErrScheduleNotFound), flow.ErrScheduleNotFound},
	{"bad-spec", fmt.Errorf("schedule s: %w: never fires", flow.ErrBadSpec), flow.ErrBadSpec},
	{"definition-frozen", fmt.Errorf("put definition d: %w", flow.ErrDefinitionFrozen), flow.ErrDefinitionFrozen},
	{"not-supported", fmt.Errorf("backup: %w", flow.ErrNotSupported), flow.ErrNotSupported},
	{"shard-set", fmt.Errorf("start: %w", flow.ErrShardSet), flow.ErrShardSet},
	{"sharded", fmt.Errorf("changes: %w", flow.ErrSharded), flow.ErrSharded},
}

// A step error that matches one of flowlite's sentinels keeps matching it,
// and only it (and what it implies: a passed deadline is a cancellation),
// once recorded: on the first execution, and on the replay after the
// engine restarted. The body signals a run that does not exist
// (ErrRunNotFound, through SignalRun), and steps return the engine's other
// sentinels; it then waits for a signal, so that a second engine replays
// all of it. At dedb742 the first execution already lost them: "signal
// signal to run no-such-run: get run no-such-run: not found" did not match
// ErrRunNotFound.
func TestEngineErrorsKeepTheirIdentityInAWorkflow(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var mu sync.Mutex
	var executions [][]string // per execution of the body: what did not match as it should
	wf := flow.Workflow[int, string]{Name: "engine-errors", Run: func(wc flow.Context, _ int) (string, error) {
		var wrong []string
		check := func(name string, err, want error) {
			var se *flow.StepError
			if !errors.As(err, &se) {
				wrong = append(wrong, fmt.Sprintf("%s: %v is no StepError", name, err))
				return
			}
			if !errors.Is(err, want) {
				wrong = append(wrong, fmt.Sprintf("%s: %v does not match %v", name, err, want))
			}
			for _, other := range engineErrors {
				if other.is != want && errors.Is(err, other.is) && !errors.Is(want, other.is) {
					wrong = append(wrong, fmt.Sprintf("%s: %v also matches %v", name, err, other.is))
				}
			}
			if want != flow.ErrRunNotFound && errors.Is(err, flow.ErrRunNotFound) {
				wrong = append(wrong, fmt.Sprintf("%s: %v also matches ErrRunNotFound", name, err))
			}
		}
		check("not-found", flow.SignalRun(wc, "no-such-run", "signal", 1), flow.ErrRunNotFound)
		for _, c := range engineErrors {
			step := flow.Step[int, int]{Name: "return-" + c.name, Run: func(context.Context, int) (int, error) {
				return 0, flow.Permanent(c.err)
			}}
			_, err := flow.Do(wc, step, 0)
			check(c.name, err, c.is)
		}
		mu.Lock()
		executions = append(executions, wrong)
		mu.Unlock()
		if _, err := flow.Receive[string](wc, "go", 0); err != nil {
			return "", err
		}
		return strings.Join(wrong, "; "), nil
	}}
	register := func(e *flow.Engine) { flow.Register(e, wf) }
	e1, close1 := engineSession(t, path, testConfig(), register)
	run, err := flow.Start(ctx, e1, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e1, run.ID(), flow.StatusWaiting)
	close1()

	e2, _ := engineSession(t, path, testConfig(), register)
	if _, err := flow.Signal(ctx, e2, run.ID(), "go", "now", nil); err != nil {
		t.Fatal(err)
	}
	r2, err := flow.Lookup(ctx, e2, wf, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Result(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(executions) < 2 {
		t.Fatalf("the body ran %d time(s), want a first execution and a replay", len(executions))
	}
	for i, wrong := range executions {
		what := "first execution"
		if i > 0 {
			what = fmt.Sprintf("replay %d", i)
		}
		for _, w := range wrong {
			t.Errorf("%s: %s", what, w)
		}
	}
}

// TestBusyTimeoutAndErrBusy: a third process holding BEGIN EXCLUSIVE keeps
// a Start waiting for Options.BusyTimeout, after which it fails with
// ErrBusy naming the file and the wait, and writes nothing.
func TestBusyTimeoutAndErrBusy(t *testing.T) {
	skipOnPostgres(t, "the busy timeout of SQLite's single write lock")
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openSQLiteEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowsqlite.Options{BusyTimeout: 300 * time.Millisecond})
	wf := flow.Workflow[int, int]{Name: "id", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)

	// Fault injection: a third process's exclusive lock, on a connection of
	// its own.
	locker := rawDB(t, path)
	conn, err := locker.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "blocked"})
	waited := time.Since(start)
	if !errors.Is(err, flow.ErrBusy) {
		t.Fatalf("Start under an exclusive lock: %v, want ErrBusy", err)
	}
	for _, want := range []string{path, "busy timeout of 300ms", "database is locked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if waited < 300*time.Millisecond || waited > slowBound(3*time.Second) {
		t.Errorf("Start gave up after %s, want about the busy timeout of 300ms", waited)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Inspect(ctx, "blocked"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Errorf("the refused Start left a run behind: %v", err)
	}
	startEngine(t, e)
	if got := runToEnd(t, ctx, e, wf, 7); got != 7 {
		t.Errorf("after the lock: %d, want 7", got)
	}
}

// A database that refuses writes (here: capped at a page count, as a full
// disk would be) while a run records its outcome must not leave the caller
// waiting for a lease to expire: the engine retries the write, gives up
// with a *flow.WriteError that matches ErrDiskFull, counts and logs it, and
// loses nothing recorded. Once the database takes writes again, the run
// resumes from its last checkpoint and completes.
func TestFullDatabaseFailsResultInsteadOfHanging(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	const lease, busy = 2 * time.Second, 500 * time.Millisecond

	// Create the schema and one finished run while there is room.
	small := flow.Workflow[string, int]{Name: "small", Run: func(_ flow.Context, s string) (int, error) { return len(s), nil }}
	big := flow.Step[int, string]{Name: "big", Run: func(_ context.Context, n int) (string, error) {
		return strings.Repeat("x", n), nil
	}}
	var bodies atomic.Int32
	fill := flow.Workflow[int, int]{Name: "fill", Run: func(wc flow.Context, n int) (int, error) {
		bodies.Add(1)
		s, err := flow.Do(wc, big, n)
		return len(s), err
	}}
	e0 := openEngine(t, path, nil)
	flow.Register(e0, small)
	startEngine(t, e0)
	if out := runOnce(t, ctx, e0, small, "before", "small-1"); out != 6 {
		t.Fatalf("small run = %d", out)
	}
	if err := e0.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e0.Close()

	// Reopen with the database capped just above its size (fault
	// injection: a full disk is a pragma on the engine's own *sql.DB).
	capped, err := sql.Open("sqlite", flowsqlite.DSNBusy(path, flowsqlite.SynchronousFull, busy)+"&_pragma=max_page_count(120)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capped.Close() })
	logs := &syncBuffer{}
	e1, err := flowsqlite.New(ctx, capped, &flow.Config{
		PollInterval: 10 * time.Millisecond, LeaseTimeout: lease, WorkerID: "full",
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}, &flowsqlite.Options{BusyTimeout: busy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e1.Close() })
	flow.Register(e1, fill)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, fill, 2<<20, &flow.StartOptions{RunID: "fill-1"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = run.Result(ctx)
	var we *flow.WriteError
	if !errors.As(err, &we) || !errors.Is(err, flow.ErrDiskFull) || we.RunID != "fill-1" {
		t.Fatalf("Result = %v, want a *flow.WriteError matching ErrDiskFull; logs:\n%s", err, logs.String())
	}
	// The engine retries for half the lease, then once more to give the
	// run back; Result must not wait for more (before, it waited for ctx).
	if waited := time.Since(start); waited > 5*lease {
		t.Errorf("Result took %s: it waited for something else than the write's retries", waited)
	}
	if m := e1.Metrics(); m.WriteFailures == 0 || !strings.Contains(m.LastWriteError, "full") {
		t.Errorf("metrics: %d write failures, last %q; want the failures counted", m.WriteFailures, m.LastWriteError)
	}
	if !strings.Contains(logs.String(), "write failed for good") {
		t.Errorf("the failure was not logged:\n%s", logs.String())
	}
	e1.Close()

	// The earlier run is intact, and with room again the run completes.
	e2 := openSQLiteEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond, LeaseTimeout: lease, RescueInterval: 100 * time.Millisecond}, &flowsqlite.Options{BusyTimeout: busy})
	flow.Register(e2, fill)
	flow.Register(e2, small)
	startEngine(t, e2)
	earlier, err := flow.Lookup(ctx, e2, small, "small-1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := earlier.Result(ctx); err != nil || out != 6 {
		t.Fatalf("the earlier run after the failure: %d, %v; want it intact", out, err)
	}
	handle, err := flow.Lookup(ctx, e2, fill, "fill-1")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := handle.Result(ctx); err != nil || out != 2<<20 {
		t.Fatalf("after the database has room: %d, %v", out, err)
	}
	counts, err := e2.CountRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[flow.StatusCompleted] != 2 {
		t.Fatalf("completed runs = %v, want the earlier run and the resumed one", counts)
	}
}

// runOnce starts the run id of wf and waits for its output.
func runOnce[In, Out any](t *testing.T, ctx context.Context, e *flow.Engine, wf flow.Workflow[In, Out], in In, id string) Out {
	t.Helper()
	r, err := flow.Start(ctx, e, wf, in, &flow.StartOptions{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
