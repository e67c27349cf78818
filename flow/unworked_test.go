package flow_test

import (
	"context"
	"database/sql"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
)

// unworkedLog keeps the queues named by the engine's warnings about runs
// started in a queue it does not work.
type unworkedLog struct {
	mu     sync.Mutex
	queues []string
}

func (l *unworkedLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *unworkedLog) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *unworkedLog) WithGroup(string) slog.Handler                 { return l }
func (l *unworkedLog) Handle(_ context.Context, r slog.Record) error {
	if v := attr(r, "engine_queues"); r.Level != slog.LevelWarn || v.Equal(slog.Value{}) {
		return nil // not the warning about an unworked queue
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queues = append(l.queues, attr(r, "queue").String())
	return nil
}

func (l *unworkedLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.queues)
}

// Starting a run in a queue the engine does not work logs a warning
// naming the queue, through the engine's logger, once per queue, whichever
// way the run was started (Start, StartTx, Enqueue).
func TestStartInAnUnworkedQueueWarnsOncePerQueue(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	// StartTx takes the caller's *sql.Tx, begun on the caller's *sql.DB.
	db, err := sql.Open("sqlite", flowsqlite.DSN(dbPath(t), flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var log unworkedLog
	cfg := testConfig()
	cfg.Logger = slog.New(&log)
	e, err := flowsqlite.New(ctx, db, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	wf := doubler("stranded", 1)
	flow.Register(e, wf)
	job := flow.Job[int]{Name: "mailer", Queue: "mail", Handler: func(context.Context, int) error { return nil }}
	flow.RegisterJob(e, job)
	startEngine(t, e)

	for i := range 3 {
		if _, err := flow.Start(ctx, e, wf, i, &flow.StartOptions{Queue: "orders"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := flow.Enqueue(ctx, e, job, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.StartTx(ctx, e, tx, wf, 1, &flow.StartOptions{Queue: "reports"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	runToEnd(t, ctx, e, wf, 5) // the default queue, which the engine works: no warning
	if got := log.get(); !slices.Equal(got, []string{"orders", "mail", "reports"}) {
		t.Fatalf("warnings name queues %q, want [orders mail reports]: once per queue, none for a worked one", got)
	}
}

// UnworkedQueues names each queue with pending runs that no live engine
// works: an engine that works it hides it while it runs, and it shows again
// once that engine stops, or goes silent past its report's LiveUntil (it
// crashed).
func TestUnworkedQueuesFollowTheLiveEngines(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.Clock = clk
	a := openEngine(t, path, cfg) // works the default queue only
	wf := doubler("stranded", 1)
	flow.Register(a, wf)
	startEngine(t, a)
	for i := range 3 {
		if _, err := flow.Start(ctx, a, wf, i, &flow.StartOptions{Queue: "orders"}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	unworked := func(e *flow.Engine) []flow.UnworkedQueue {
		t.Helper()
		list, err := e.UnworkedQueues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	want := []flow.UnworkedQueue{{Queue: "orders", Pending: 3, OldestAge: 3 * time.Minute}}
	if got := unworked(a); !slices.Equal(got, want) {
		t.Fatalf("UnworkedQueues = %+v, want %+v", got, want)
	}

	// Engine b works "orders" but lacks the workflow: the runs stay
	// pending, but the queue is worked.
	bCfg := testConfig()
	bCfg.Clock = clk
	bCfg.Queues = map[string]flow.QueueConfig{"orders": {}}
	b := openEngine(t, path, bCfg)
	startEngine(t, b)
	if got := unworked(a); len(got) != 0 {
		t.Fatalf("UnworkedQueues with b working orders = %+v, want none", got)
	}
	reports, err := a.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var bReport flow.Report
	for _, r := range reports {
		if slices.Equal(r.Queues, []string{"orders"}) {
			bReport = r
		}
	}
	if !bReport.Live(clk.Now()) || !bReport.StoppedAt.IsZero() {
		t.Fatalf("b's report %+v: want live, listing [orders]", bReport)
	}

	// Silent past its LiveUntil, b counts as crashed.
	clk.Set(bReport.LiveUntil)
	if got := unworked(a); len(got) != 1 || got[0].Queue != "orders" || got[0].Pending != 3 {
		t.Fatalf("UnworkedQueues after b went silent = %+v, want orders with 3 runs", got)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Stopped, b's report says so at once, whatever its LiveUntil.
	startEngine(t, b) // a fresh report, live again
	if got := unworked(a); len(got) != 0 {
		t.Fatalf("UnworkedQueues with b restarted = %+v, want none", got)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := unworked(a); len(got) != 1 || got[0].Queue != "orders" {
		t.Fatalf("UnworkedQueues after b stopped = %+v, want orders", got)
	}
}
