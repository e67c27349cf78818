package flow_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// BenchmarkStartLatency starts runs one after the other on an idle engine
// and reports how long after flow.Start was called each run's first step
// began (p50, p99, max): the in-process start→first-step latency, FULL
// sync. Run it with:
//
//	go test -run '^$' -bench StartLatency -benchtime 2000x ./flow/
func BenchmarkStartLatency(b *testing.B) {
	ctx := context.Background()
	began := make(chan time.Time, 1)
	step := flow.Step[int, int]{Name: "first", Run: func(_ context.Context, n int) (int, error) {
		began <- time.Now()
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "latency", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, step, n)
	}}
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "latency.db"), &flow.Config{PollInterval: time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.Register(e, wf)
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	latencies := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, (<-began).Sub(start))
		if _, err := r.Result(ctx); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(latencies)
	at := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(at(1), "max-ms")
}

// BenchmarkJobLatency enqueues b.N no-op jobs at 200 a second (each from
// its own goroutine, on a fixed schedule, so a slow commit does not slow
// the rate) on a started engine, and reports how long after Enqueue was
// called each handler began (p50, p99, max), FULL sync: the in-process
// insert→handler latency the README's latency target is about. Run it
// with:
//
//	go test -run '^$' -bench JobLatency -benchtime 2000x ./flow/
func BenchmarkJobLatency(b *testing.B) {
	ctx := context.Background()
	const rate = 200 // jobs per second
	starts := make([]time.Time, b.N)
	began := make([]time.Time, b.N)
	done := make(chan struct{}, b.N)
	job := flow.Job[int]{Name: "latency_job", Handler: func(_ context.Context, i int) error {
		began[i] = time.Now()
		done <- struct{}{}
		return nil
	}}
	e, err := flowsqlite.Open(ctx, filepath.Join(b.TempDir(), "latency.db"), &flow.Config{PollInterval: time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, job)
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer e.Stop(ctx)
	b.ResetTimer()
	t0 := time.Now()
	errs := make(chan error, b.N)
	for i := range b.N {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * time.Second / rate)))
		starts[i] = time.Now()
		go func() {
			if _, err := flow.Enqueue(ctx, e, job, i, nil); err != nil {
				errs <- err
			}
		}()
	}
	for range b.N {
		select {
		case <-done:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	b.StopTimer()
	latencies := make([]time.Duration, b.N)
	for i := range latencies {
		latencies[i] = began[i].Sub(starts[i])
	}
	slices.Sort(latencies)
	at := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(at(1), "max-ms")
}
