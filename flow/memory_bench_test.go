package flow_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// BenchmarkFinishedRunsMemory runs five rounds of 10,000 one-step runs on
// one engine and reports the live heap after the first and after the last
// round, and the growth per finished run between them: memory should stay
// flat however many runs the engine finished. Run it once:
//
//	go test -run '^$' -bench FinishedRunsMemory -benchtime 1x ./flow/
func BenchmarkFinishedRunsMemory(b *testing.B) {
	const rounds, perRound = 5, 10_000
	wf := flow.Workflow[int, int]{Name: "finite", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, noop, n) }}
	for b.Loop() {
		ctx := context.Background()
		e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "memory.db"), &flow.Config{
			Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}},
			PollInterval: 50 * time.Millisecond,
		}, nil)
		if err != nil {
			b.Fatal(err)
		}
		flow.Register(e, wf)
		if err := e.Start(ctx); err != nil {
			b.Fatal(err)
		}
		heap := func() float64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return float64(m.HeapInuse)
		}
		var first float64
		for round := range rounds {
			runs := startRuns(b, e, wf, perRound, flow.DefaultQueue)
			for _, r := range runs {
				if _, err := r.Result(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if round == 0 {
				first = heap()
			}
		}
		last := heap()
		b.ReportMetric(first/(1<<20), "heap-MiB-after-10k")
		b.ReportMetric(last/(1<<20), "heap-MiB-after-50k")
		b.ReportMetric((last-first)/float64((rounds-1)*perRound), "heap-bytes/finished-run")
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
