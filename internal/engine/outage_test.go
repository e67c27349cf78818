package engine

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *syncLog) count(s string) int { return strings.Count(l.String(), s) }

// A claimer polling a database that is unavailable for a while logs one
// warning when its claims start failing and one line when they succeed
// again, not an error per poll; and it claims again once it is back.
func TestClaimerLogsAnOutageOnce(t *testing.T) {
	t.Parallel()
	s := openTestStore(t)
	as := &awayStore{Store: s}
	logs := &syncLog{}
	e, err := New(as, Config{
		PollInterval: 5 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(Workflow{Key: jobKey, Run: func(*RunContext, []byte) ([]byte, error) { return []byte(`1`), nil }}); err != nil {
		t.Fatal(err)
	}
	startTestEngine(t, e)
	as.awayWrites.Store(true)
	time.Sleep(300 * time.Millisecond) // dozens of polls
	as.awayWrites.Store(false)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := e.StartRun(ctx, StartParams{ID: "after", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if run, err := e.Wait(ctx, "after"); err != nil || run.Status != flowtype.StatusCompleted {
		t.Fatalf("run after the outage: %s, %v", run.Status, err)
	}
	back := `level=INFO msg="claim runs of queue default: database available again"`
	for deadline := time.Now().Add(5 * time.Second); logs.count(back) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond) // the claimer's next poll
	}
	for _, c := range []struct {
		line string
		want int
	}{
		{`level=WARN msg="claim runs: database unavailable; retrying every poll until it is back" queue=default`, 1},
		{`level=ERROR msg="claim runs"`, 0},
		{back, 1},
	} {
		if n := logs.count(c.line); n != c.want {
			t.Errorf("%d log lines %s, want %d; log:\n%s", n, c.line, c.want, logs)
		}
	}
}

// A run's outcome whose write finds the database unavailable for longer
// than the write retry budget is still written once the database is back,
// by the execution that has it, rather than given up: the run completes
// without a rescue, and Result (Wait) returns its outcome rather than a
// write error.
func TestOutcomeWrittenAfterLongOutage(t *testing.T) {
	t.Parallel()
	s := openTestStore(t)
	as := &awayStore{Store: s}
	const lease = 600 * time.Millisecond // a retry budget of 300ms
	e, err := New(as, Config{PollInterval: 10 * time.Millisecond, LeaseTimeout: lease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	outage := make(chan struct{})
	err = e.Register(Workflow{Key: jobKey, Run: func(rc *RunContext, _ []byte) ([]byte, error) {
		return rc.Step(Step{Name: "work", Input: []byte(`{}`), Run: func(context.Context, *sql.Tx) ([]byte, error) {
			// The database goes away as the step ends: its checkpoint and
			// the run's outcome commit together, in the write that fails.
			as.awayWrites.Store(true)
			close(outage)
			return []byte(`"done"`), nil
		}})
	}})
	if err != nil {
		t.Fatal(err)
	}
	startTestEngine(t, e)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := e.StartRun(ctx, StartParams{ID: "r", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	<-outage
	time.AfterFunc(3*lease, func() { as.awayWrites.Store(false) })
	run, err := e.Wait(ctx, "r")
	if err != nil || run.Status != flowtype.StatusCompleted || string(run.Output) != `"done"` {
		t.Fatalf("Wait after a %s outage = %s %s, %v; want completed \"done\"", 3*lease, run.Status, run.Output, err)
	}
	hist, err := s.Reader().EventList(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	claims := 0
	for _, ev := range hist {
		if ev.Kind == flowtype.EventRunClaimed {
			claims++
		}
		if ev.Kind == flowtype.EventRunRescued || claims > 1 {
			t.Fatalf("history has %s (%s): the outcome was not written by the execution that had it", ev.Kind, ev.Detail)
		}
	}
}

// Stop during an outage waits for a run's unwritable outcome no longer
// than the write retry budget (and a backoff), not until the database is
// back.
func TestStopDuringOutageIsBounded(t *testing.T) {
	t.Parallel()
	s := openTestStore(t)
	as := &awayStore{Store: s}
	e, err := New(as, Config{PollInterval: 10 * time.Millisecond, LeaseTimeout: 600 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	outage := make(chan struct{})
	err = e.Register(Workflow{Key: jobKey, Run: func(rc *RunContext, _ []byte) ([]byte, error) {
		return rc.Step(Step{Name: "work", Input: []byte(`{}`), Run: func(context.Context, *sql.Tx) ([]byte, error) {
			as.awayWrites.Store(true)
			close(outage)
			return []byte(`"done"`), nil
		}})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartRun(t.Context(), StartParams{ID: "r", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	<-outage
	time.Sleep(time.Second) // past the budget: the write is retried for the outage
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("Stop took %s during an outage", took)
	}
}
