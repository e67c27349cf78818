package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

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

	// Reopen with the database capped just above its size.
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
