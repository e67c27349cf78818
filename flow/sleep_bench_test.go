package flow_test

import (
	"context"
	"database/sql"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
)

var sleepers = flag.Int("sleepers", 100_000, "runs BenchmarkSleepingRuns parks")

// BenchmarkSleepingRuns parks many runs in a day-long flow.Sleep and reports
// what they cost: database bytes per sleeping run, heap bytes per sleeping
// run, the throughput of other runs while they sleep against the same on an
// empty database (claim_ratio = loaded / empty, measured in this run), and
// how long waking all of them takes. Each throughput is the best of three
// rounds, so that a hiccup of a shared machine does not decide the ratio.
// Run it once:
//
//	go test -run '^$' -bench SleepingRuns -benchtime 1x -timeout 30m ./flow/
func BenchmarkSleepingRuns(b *testing.B) {
	const otherRuns = 2000
	for b.Loop() {
		empty := bestThroughput(b, openBenchEngine(b, clock.NewManual(time.Now())), otherRuns)

		clk := clock.NewManual(time.Now())
		path := filepath.Join(b.TempDir(), "sleepers.db")
		e := openBenchEngineAt(b, path, clk)
		sleeper := flow.Workflow[int, int]{Name: "sleeper", Run: func(wc flow.Context, n int) (int, error) {
			if err := flow.Sleep(wc, 24*time.Hour); err != nil {
				return 0, err
			}
			return n, nil
		}}
		flow.Register(e, sleeper)
		startRuns(b, e, sleeper, *sleepers, "sleepy")
		waitCount(b, e, flow.StatusWaiting, int64(*sleepers))

		runtime.GC()
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		size := checkpointedSize(b, path)
		loaded := bestThroughput(b, e, otherRuns)

		clk.Advance(25 * time.Hour)
		start := time.Now()
		e.WakeAll()
		waitCount(b, e, flow.StatusCompleted, int64(*sleepers+throughputRounds*otherRuns))
		wake := time.Since(start)

		b.ReportMetric(float64(size)/float64(*sleepers), "db-bytes/sleeper")
		b.ReportMetric(float64(mem.HeapInuse)/float64(*sleepers), "heap-bytes/sleeper")
		b.ReportMetric(empty, "runs/s-empty")
		b.ReportMetric(loaded, "runs/s-with-sleepers")
		b.ReportMetric(loaded/empty, "claim-ratio")
		b.ReportMetric(wake.Seconds(), "s-to-wake-all")
		b.ReportMetric(float64(*sleepers)/wake.Seconds(), "wakes/s")
	}
}

func openBenchEngine(b *testing.B, clk *clock.Manual) *flow.Engine {
	return openBenchEngineAt(b, filepath.Join(b.TempDir(), "bench.db"), clk)
}

func openBenchEngineAt(b *testing.B, path string, clk *clock.Manual) *flow.Engine {
	e, err := flowsqlite.Open(context.Background(), path, &flow.Config{
		Clock: clk,
		Queues: map[string]flow.QueueConfig{
			"sleepy": {Concurrency: 64},
			"other":  {Concurrency: 32},
		},
		PollInterval: 50 * time.Millisecond,
		LeaseTimeout: time.Hour, // the manual clock jumps a day
		// The day-long jump would make the cleaner delete the runs this
		// benchmark counts.
		CleanInterval: -1,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return e
}

// throughputRounds is how many times bestThroughput measures.
const throughputRounds = 3

// bestThroughput returns the best of throughputRounds otherThroughput.
func bestThroughput(b *testing.B, e *flow.Engine, n int) float64 {
	best := 0.0
	for range throughputRounds {
		best = max(best, otherThroughput(b, e, n))
	}
	return best
}

// otherThroughput starts n one-step runs on the "other" queue and returns
// runs/s until all completed.
func otherThroughput(b *testing.B, e *flow.Engine, n int) float64 {
	wf := flow.Workflow[int, int]{Name: "other", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, noop, n) }}
	_ = flow.RegisterSafely(e, wf) // already registered on the second call
	start := time.Now()
	runs := startRuns(b, e, wf, n, "other")
	for _, r := range runs {
		if _, err := r.Result(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

func startRuns(b *testing.B, e *flow.Engine, wf flow.Workflow[int, int], n int, queue string) []*flow.Run[int] {
	runs := make([]*flow.Run[int], n)
	var g errgroup.Group
	for p := range producers {
		g.Go(func() error {
			for i := p; i < n; i += producers {
				var err error
				if runs[i], err = flow.Start(context.Background(), e, wf, i, &flow.StartOptions{Queue: queue}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return runs
}

func waitCount(b *testing.B, e *flow.Engine, status flow.RunStatus, want int64) {
	for {
		counts, err := e.CountRuns(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if counts[status] >= want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkpointedSize moves the WAL into the database file and returns the
// file's size.
func checkpointedSize(b *testing.B, path string) int64 {
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return info.Size()
}
