package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// A cancelled scope's record and what its cancel ended are calls of the
// run: flowlite show lists the cancel and the sleep it failed, and
// flowlite history has the scope_cancelled event naming the sleep.
func TestShowListsACancelledScope(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "flow.db")
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wf := flow.Workflow[int, int]{Name: "scoped", Run: func(wc flow.Context, n int) (int, error) {
		sc, cancel := flow.WithCancel(wc)
		_, err := flow.All(sc,
			func(b flow.Context) (int, error) {
				if err := flow.Sleep(b, time.Hour); !errors.Is(err, flow.ErrScopeCancelled) {
					return 0, err
				}
				return 0, nil
			},
			func(b flow.Context) (int, error) {
				// Long enough that the run parks on both waits before this
				// one is due, so the first branch's sleep is recorded when
				// the scope is cancelled (a 1ms sleep could be over before
				// the other branch got to its wait).
				if err := flow.Sleep(b, 300*time.Millisecond); err != nil {
					return 0, err
				}
				cancel()
				return 0, nil
			})
		return n, err
	}}
	flow.Register(e, wf)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "scoped-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e.Close()

	out := ok(t, path, "show", "scoped-1")
	for _, want := range []string{"scope0/flow.cancel", "scope0/all0.0/flow.sleep", "scope cancelled"} {
		if !strings.Contains(out, want) {
			t.Errorf("flowlite show does not show %q:\n%s", want, out)
		}
	}
	if out := ok(t, path, "history", "scoped-1"); !strings.Contains(out, "scope_cancelled") || !strings.Contains(out, "scope0/all0.0/flow.sleep#0 (waiting)") {
		t.Errorf("flowlite history has no scope_cancelled event naming the sleep:\n%s", out)
	}
}
