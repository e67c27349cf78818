package flow_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// BenchmarkStreamWrite runs b.N one-step workflows on the suite's backend
// whose step produces 1,000 messages (an LLM's tokens), once writing them
// to a stream (flow.WriteStreamCtx, batched into the attempt's flushes
// and its checkpoint) and once only formatting them, and reports the time
// per run of each: the ratio is what streaming costs a step. In "noop"
// the step does nothing else, the worst case; in "busy" it spends 20 µs
// producing each message (hashing), still a fast producer.
//
//	go test ./flow -run '^$' -bench StreamWrite -benchtime 200x
func BenchmarkStreamWrite(b *testing.B) {
	for _, work := range []time.Duration{0, 20 * time.Microsecond} {
		for _, write := range []bool{false, true} {
			name := "noop/without"
			if work > 0 {
				name = "busy/without"
			}
			if write {
				name = strings.TrimSuffix(name, "without") + "with"
			}
			var report func(ctx context.Context, i int, token string) error
			if write {
				report = func(ctx context.Context, _ int, token string) error { return flow.WriteStreamCtx(ctx, "tokens", token) }
			}
			b.Run(name, func(b *testing.B) { benchmarkStepReports(b, work, report) })
		}
	}
}

// produce spends about d hashing, as a producer of a message would.
func produce(d time.Duration) uint64 {
	var sum uint64
	for start := time.Now(); time.Since(start) < d; {
		h := fnv.New64a()
		h.Write([]byte("a message's worth of work"))
		sum += h.Sum64()
	}
	return sum
}

// BenchmarkStepProgressCost is BenchmarkStreamWrite for progress: the
// step reports flow.SetProgress after each of its 1,000 messages instead
// of writing it.
//
//	go test ./flow -run '^$' -bench StepProgressCost -benchtime 100x
func BenchmarkStepProgressCost(b *testing.B) {
	for _, work := range []time.Duration{0, 20 * time.Microsecond} {
		for _, progress := range []bool{false, true} {
			name := "noop/"
			if work > 0 {
				name = "busy/"
			}
			var report func(ctx context.Context, i int, token string) error
			if progress {
				name += "with"
				report = func(ctx context.Context, i int, _ string) error {
					return flow.SetProgress(ctx, flow.Progress{Done: int64(i + 1), Total: 1000, Message: "tokens"})
				}
			} else {
				name += "without"
			}
			b.Run(name, func(b *testing.B) { benchmarkStepReports(b, work, report) })
		}
	}
}

// benchmarkStepReports runs b.N one-step workflows whose step makes 1,000
// messages, spending work on each, and calls report (unless nil) with
// each.
func benchmarkStepReports(b *testing.B, work time.Duration, report func(ctx context.Context, i int, token string) error) {
	ctx := context.Background()
	e := openEngine(b, filepath.Join(b.TempDir(), "flow.db"), nil)
	step := flow.Step[int, int]{Name: "tokens", Run: func(ctx context.Context, n int) (int, error) {
		for i := range n {
			token := fmt.Sprintf("token %d %d", i, produce(work)%10)
			if report != nil {
				if err := report(ctx, i, token); err != nil {
					return 0, err
				}
			}
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "stream_bench", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, step, n)
	}}
	flow.Register(e, wf)
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Stop(ctx) })
	b.ResetTimer()
	for range b.N {
		run, err := flow.Start(ctx, e, wf, 1000, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
