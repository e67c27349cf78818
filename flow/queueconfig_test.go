package flow_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// A queue configured with a zero QueueConfig works, at DefaultConcurrency,
// like every other zero field of Config means the default.
func TestZeroQueueConcurrencyMeansTheDefault(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"orders": {}}
	e, err := flowsqlite.Open(ctx, dbPath(t), cfg, nil)
	if err != nil {
		t.Fatalf("open with Queues{orders: {}}: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	if got := cfg.Queues["orders"].Concurrency; got != 0 {
		t.Fatalf("Open changed the caller's config: concurrency %d", got)
	}

	// Each run holds its slot until released, so the number of runs in
	// flight at once is the queue's concurrency.
	var mu sync.Mutex
	inFlight, peak := 0, 0
	release := make(chan struct{})
	hold := flow.Step[int, int]{
		Name: "hold",
		Run: func(ctx context.Context, n int) (int, error) {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
			select {
			case <-release:
				return n, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
	}
	wf := flow.Workflow[int, int]{Name: "held", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, hold, n) }}
	flow.Register(e, wf)
	startEngine(t, e)
	runs := make([]*flow.Run[int], flow.DefaultConcurrency+5)
	for i := range runs {
		if runs[i], err = flow.Start(ctx, e, wf, i, &flow.StartOptions{Queue: "orders"}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the queue to fill its slots", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight == flow.DefaultConcurrency
	})
	time.Sleep(50 * time.Millisecond) // a few polls: no run beyond the limit starts
	mu.Lock()
	got := peak
	mu.Unlock()
	if got != flow.DefaultConcurrency {
		t.Fatalf("peak runs in flight = %d, want DefaultConcurrency %d", got, flow.DefaultConcurrency)
	}
	close(release)
	for i, r := range runs {
		if out, err := r.Result(ctx); err != nil || out != i {
			t.Fatalf("run %d: %d, %v", i, out, err)
		}
	}
}

func TestNegativeQueueConcurrencyIsRefusedNamingTheQueue(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{"orders": {Concurrency: -1}}
	e, err := flowsqlite.Open(context.Background(), dbPath(t), cfg, nil)
	if err == nil {
		e.Close()
		t.Fatal("open with concurrency -1: want an error")
	}
	if !strings.Contains(err.Error(), `"orders"`) || !strings.Contains(err.Error(), "-1") {
		t.Fatalf("err = %v, want it to name the queue and the value", err)
	}
}
