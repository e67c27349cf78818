package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// A patch marker is a call of the run's history: flowlite show lists it
// among the steps, and flowlite history has its events.
func TestShowListsPatchMarkers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "flow.db")
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pay := flow.Step[int, int]{Name: "pay_v2", Run: func(_ context.Context, n int) (int, error) { return n, nil }}
	wf := flow.Workflow[int, int]{Name: "patched", Run: func(wc flow.Context, n int) (int, error) {
		if flow.Patched(wc, "pay-v2") {
			return flow.Do(wc, pay, n)
		}
		return n, nil
	}}
	flow.Register(e, wf)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "patched-1"})
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

	if out := ok(t, path, "show", "patched-1"); !strings.Contains(out, "flow.patch:pay-v2") || !strings.Contains(out, "pay_v2") {
		t.Errorf("flowlite show does not list the marker and the patched step:\n%s", out)
	}
	if out := ok(t, path, "history", "patched-1"); !strings.Contains(out, "flow.patch:pay-v2") {
		t.Errorf("flowlite history has no event of the marker:\n%s", out)
	}
}
