package flow_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// The benchmarks start b.N runs and wait for all of them, reporting runs/s
// and steps/s (a step counts its checkpoint; a compensation counts too).
// Run them with:
//
//	go test -run '^$' -bench '^BenchmarkRuns$' -benchtime 3000x ./flow/

var noop = flow.Step[int, int]{Name: "noop", Run: func(_ context.Context, n int) (int, error) { return n + 1, nil }}

var noopUndo = flow.Step[int, int]{
	Name:       "noop_undo",
	Run:        func(_ context.Context, n int) (int, error) { return n + 1, nil },
	Compensate: func(context.Context, int, int) error { return nil },
}

var decline = flow.Step[int, int]{Name: "decline", Run: func(context.Context, int) (int, error) {
	return 0, flow.Permanent(errors.New("declined"))
}}

func benchWorkflows() []struct {
	name  string
	wf    flow.Workflow[int, int]
	steps int
	fails bool
} {
	return []struct {
		name  string
		wf    flow.Workflow[int, int]
		steps int
		fails bool
	}{
		{"OneStep", flow.Workflow[int, int]{Name: "one", Run: func(wc flow.Context, n int) (int, error) {
			return flow.Do(wc, noop, n)
		}}, 1, false},
		{"ThreeSteps", flow.Workflow[int, int]{Name: "three", Run: func(wc flow.Context, n int) (int, error) {
			for range 3 {
				var err error
				if n, err = flow.Do(wc, noop, n); err != nil {
					return 0, err
				}
			}
			return n, nil
		}}, 3, false},
		// Two compensable steps, a third that fails for good, and the two
		// compensations: five step executions.
		{"SagaCompensates", flow.Workflow[int, int]{Name: "saga", Run: func(wc flow.Context, n int) (int, error) {
			for range 2 {
				var err error
				if n, err = flow.Do(wc, noopUndo, n); err != nil {
					return 0, err
				}
			}
			return flow.Do(wc, decline, n)
		}}, 5, true},
	}
}

// producers is how many goroutines start runs in the benchmarks.
const producers = 16

func BenchmarkRuns(b *testing.B) {
	for _, sync := range []flowsqlite.Synchronous{flowsqlite.SynchronousFull, flowsqlite.SynchronousNormal} {
		for _, bw := range benchWorkflows() {
			b.Run(bw.name+"/"+string(sync), func(b *testing.B) {
				ctx := context.Background()
				e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), &flow.Config{
					Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}},
					PollInterval: 50 * time.Millisecond,
				}, &flowsqlite.Options{Synchronous: sync})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				flow.Register(e, bw.wf)
				if err := e.Start(ctx); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				// Producers start runs concurrently, as the request handlers
				// of a service would.
				runs := make([]*flow.Run[int], b.N)
				var g errgroup.Group
				for p := range producers {
					g.Go(func() error {
						for i := p; i < b.N; i += producers {
							var err error
							if runs[i], err = flow.Start(ctx, e, bw.wf, i, nil); err != nil {
								return err
							}
						}
						return nil
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				for _, r := range runs {
					_, err := r.Result(ctx)
					if bw.fails != errors.Is(err, flow.ErrRolledBack) {
						b.Fatalf("result err = %v", err)
					}
				}
				elapsed := time.Since(start).Seconds()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed, "runs/s")
				b.ReportMetric(float64(b.N*bw.steps)/elapsed, "steps/s")
				if err := e.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
