package flow_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

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

	// Stall: hold the write lock for three leases.
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
