//go:build unix

package flow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// BenchmarkDrainShards is BenchmarkDrainJobs on 1 and on 2 shard files
// (flowsqlite.OpenShards), FULL sync: b.N no-op jobs are enqueued with the
// engine stopped (EnqueueMany, spread by run ID), then it starts and the
// benchmark reports how fast they drain (jobs/s). Each shard works the
// queue with concurrency 64 (Config.Queues is per shard). It also reports
// the CPU the process used while draining, in cores (CPU seconds per
// second): how much of the machine the shards kept busy. Run the two
// interleaved, several times, and compare ratios from one sitting:
//
//	go test -run '^$' -bench DrainShards -benchtime 20000x -count 5 ./flow/
func BenchmarkDrainShards(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			paths := make([]string, shards)
			for i := range paths {
				paths[i] = filepath.Join(dir, fmt.Sprintf("drain-%d.db", i))
			}
			e, err := flowsqlite.OpenShards(ctx, paths, &flow.Config{
				Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 64}},
				PollInterval: 50 * time.Millisecond,
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			flow.RegisterJob(e, noopJob)
			const batch = 2000
			for i := 0; i < b.N; i += batch {
				items := make([]flow.EnqueueItem[int], min(batch, b.N-i))
				for j := range items {
					items[j] = flow.EnqueueItem[int]{Args: i + j}
				}
				if _, err := flow.EnqueueMany(ctx, e, noopJob, items); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			cpu0 := cpuSeconds(b)
			start := time.Now()
			if err := e.Start(ctx); err != nil {
				b.Fatal(err)
			}
			waitCompleted(b, e, b.N, 25*time.Millisecond)
			elapsed := time.Since(start).Seconds()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed, "jobs/s")
			b.ReportMetric((cpuSeconds(b)-cpu0)/elapsed, "cores")
			if err := e.Stop(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// cpuSeconds returns the user and system CPU time of the process so far.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
