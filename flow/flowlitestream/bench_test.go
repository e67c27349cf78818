package flowlitestream_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// BenchmarkEnqueueReplication is the enqueue throughput with the file
// replicated by Litestream in the process against the same without, on a
// started engine that works the runs it enqueues (the set-up of issue 26):
//
//	go test ./flow/flowlitestream -run '^$' -bench EnqueueReplication -benchtime 5000x -count 3
//
// Replication must cost at most a tenth of the jobs/s.
func BenchmarkEnqueueReplication(b *testing.B) {
	for _, callers := range []int{1, 16} {
		for _, tc := range []struct {
			name string
			opts func(dir string) *flowsqlite.Options
		}{
			{"off", func(string) *flowsqlite.Options { return nil }},
			{"replicated", func(dir string) *flowsqlite.Options {
				return &flowsqlite.Options{Replication: &flowlitestream.Replication{URL: filepath.Join(dir, "replica"), Logger: quietLog}}
			}},
		} {
			b.Run(tc.name+"/callers="+strconv.Itoa(callers), func(b *testing.B) {
				ctx := context.Background()
				dir := b.TempDir()
				e, err := flowsqlite.Open(ctx, filepath.Join(dir, "enqueue.db"), &flow.Config{Logger: quietLog}, tc.opts(dir))
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				flow.RegisterJob(e, noopJob)
				if err := e.Start(ctx); err != nil {
					b.Fatal(err)
				}
				defer e.Stop(ctx)
				b.ResetTimer()
				start := time.Now()
				var g errgroup.Group
				for p := range callers {
					g.Go(func() error {
						for i := p; i < b.N; i += callers {
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
			})
		}
	}
}
