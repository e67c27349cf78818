package flow_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// BenchmarkStepProgress drains b.N no-op jobs, three times each way, with one engine of
// concurrency 64 on the suite's backend (SQLite, or PostgreSQL with
// FLOWLITE_TEST_BACKEND=postgres): once with handlers that return at once,
// once with handlers that call SetProgress 1,000 times each. It reports
// the median jobs/s of each kind of drain and their ratio (progress/plain: 1 is free, the
// target is within a few percent of it), and the progress events written
// per job.
//
//	go test ./flow -run '^$' -bench StepProgress -benchtime 4000x
func BenchmarkStepProgress(b *testing.B) {
	// The drains alternate, three of each, and each kind reports its
	// median: on a shared machine one drain's figure swings by a third.
	var plain, withProgress []float64
	var events float64
	for range 3 {
		plain = append(plain, drainProgress(b, 0).rate)
		d := drainProgress(b, 1000)
		withProgress, events = append(withProgress, d.rate), d.events
	}
	slices.Sort(plain)
	slices.Sort(withProgress)
	b.ReportMetric(plain[1], "plain-jobs/s")
	b.ReportMetric(withProgress[1], "progress-jobs/s")
	b.ReportMetric(withProgress[1]/plain[1], "ratio")
	b.ReportMetric(events, "events/job")
}

type progressDrain struct{ rate, events float64 }

func drainProgress(b *testing.B, calls int) progressDrain {
	ctx := context.Background()
	var done atomic.Int64
	job := flow.Job[int]{Name: "progress_noop", Queue: "drain", Handler: func(ctx context.Context, n int) error {
		for i := range calls {
			if err := flow.SetProgress(ctx, flow.Progress{Done: int64(i + 1), Total: int64(calls), Message: "rows"}); err != nil {
				return err
			}
		}
		done.Add(1)
		return nil
	}}
	cfg := &flow.Config{
		Queues:       map[string]flow.QueueConfig{"drain": {Concurrency: 64}},
		PollInterval: 50 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	}
	e := openEngine(b, fmt.Sprintf("%s/progress%d.db", b.TempDir(), calls), cfg)
	defer e.Close()
	flow.RegisterJob(e, job)
	var ids []string
	for from := 0; from < b.N; from += 1000 {
		var items []flow.EnqueueItem[int]
		for i := from; i < min(from+1000, b.N); i++ {
			items = append(items, flow.EnqueueItem[int]{Args: i})
		}
		runs, err := flow.EnqueueMany(ctx, e, job, items)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range runs {
			ids = append(ids, r.ID())
		}
	}
	b.StartTimer()
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for done.Load() < int64(b.N) {
		time.Sleep(5 * time.Millisecond)
	}
	// The last outcomes commit after their handlers return.
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	d := progressDrain{rate: float64(b.N) / elapsed}
	if calls > 0 {
		var events int
		for _, id := range ids[:min(len(ids), 100)] {
			ps, err := flow.GetProgress(ctx, e, id)
			if err != nil || len(ps) != 1 || ps[0].Done != int64(calls) {
				b.Fatalf("progress of run %s = %+v, %v; want the last value", id, ps, err)
			}
			h, err := e.History(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			for _, ev := range h {
				if ev.Kind == flow.EventStepProgress {
					events++
				}
			}
		}
		d.events = float64(events) / float64(min(len(ids), 100))
	}
	return d
}
