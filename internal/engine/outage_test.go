package engine

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
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
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "o.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	as.awayWrites.Store(true)
	time.Sleep(300 * time.Millisecond) // dozens of polls
	as.awayWrites.Store(false)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := e.StartRun(ctx, StartParams{ID: "after", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if run, err := e.Wait(ctx, "after"); err != nil || run.Status != store.RunCompleted {
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
