package flow_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

var noopJob = flow.Job[int]{Name: "noop_job", Handler: func(context.Context, int) error { return nil }}

// BenchmarkDrainJobs enqueues b.N no-op jobs with the engine stopped, then
// starts it and reports how fast it drains them (jobs/s), FULL sync: the
// figure DESIGN.md's "jobs drained" target is about.
//
//	go test -run '^$' -bench DrainJobs -benchtime 20000x ./flow/
func BenchmarkDrainJobs(b *testing.B) {
	ctx := context.Background()
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "drain.db"), &flow.Config{
		Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 64}},
		PollInterval: 50 * time.Millisecond,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
	var g errgroup.Group
	for p := range producers {
		g.Go(func() error {
			for i := p; i < b.N; i += producers {
				if _, err := flow.Enqueue(ctx, e, noopJob, i, nil); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	waitCompleted(b, e, b.N, 50*time.Millisecond)
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed, "jobs/s")
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// waitCompleted polls e every interval until n runs are completed.
func waitCompleted(b *testing.B, e *flow.Engine, n int, interval time.Duration) {
	b.Helper()
	for {
		counts, err := e.CountRuns(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if counts[flow.StatusCompleted] == int64(n) {
			return
		}
		time.Sleep(interval)
	}
}
