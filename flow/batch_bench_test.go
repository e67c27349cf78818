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

// BenchmarkEnqueueMany records b.N no-op jobs in batches of 1000, FULL
// sync, with the engine stopped, and reports jobs/s: through EnqueueMany
// (one transaction per batch), and for comparison through EnqueueTx called
// 1000 times in one transaction of the caller's. Run it with:
//
//	go test -run '^$' -bench EnqueueMany -benchtime 100000x ./flow/
func BenchmarkEnqueueMany(b *testing.B) {
	const batch = 1000
	for _, mode := range []string{"EnqueueMany", "EnqueueTxLoop"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "bulk.db")
			e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 50 * time.Millisecond}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			flow.RegisterJob(e, noopJob)
			db := rawDB(b, path)
			items := make([]flow.EnqueueItem[int], batch)
			b.ResetTimer()
			start := time.Now()
			for done := 0; done < b.N; done += batch {
				n := min(batch, b.N-done)
				for i := range n {
					items[i].Args = done + i
				}
				if mode == "EnqueueMany" {
					if _, err := flow.EnqueueMany(ctx, e, noopJob, items[:n]); err != nil {
						b.Fatal(err)
					}
					continue
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if _, err := flow.EnqueueTx(ctx, e, tx, noopJob, done+i, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}

// BenchmarkEnqueueConcurrent records b.N no-op jobs with Enqueue from 16
// goroutines at once (as request handlers would), FULL sync, with the
// engine stopped, and reports jobs/s: the "enqueue from 16 callers"
// figure, which group commit serves. Run it with:
//
//	go test -run '^$' -bench EnqueueConcurrent -benchtime 20000x ./flow/
func BenchmarkEnqueueConcurrent(b *testing.B) {
	ctx := context.Background()
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "enqueue.db"), &flow.Config{PollInterval: 50 * time.Millisecond}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	enqueueConcurrently(b, e)
}

// enqueueConcurrently records b.N no-op jobs on e with Enqueue from
// producers goroutines at once, and reports jobs/s.
func enqueueConcurrently(b *testing.B, e *flow.Engine) {
	ctx := context.Background()
	flow.RegisterJob(e, noopJob)
	b.ResetTimer()
	start := time.Now()
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
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}
