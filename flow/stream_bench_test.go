package flow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// BenchmarkStreamWrite runs b.N one-step workflows on the suite's backend
// whose step produces 1,000 messages (an LLM's tokens), once writing them
// to a stream (flow.WriteStreamCtx, batched into the attempt's flushes)
// and once only formatting them, and reports the time per run of each:
// the ratio is what streaming costs a step.
//
//	go test ./flow -run '^$' -bench StreamWrite -benchtime 200x
func BenchmarkStreamWrite(b *testing.B) {
	for _, write := range []bool{false, true} {
		name := "without"
		if write {
			name = "with"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			e := openEngine(b, filepath.Join(b.TempDir(), "flow.db"), nil)
			step := flow.Step[int, int]{Name: "tokens", Run: func(ctx context.Context, n int) (int, error) {
				for i := range n {
					token := fmt.Sprintf("token %d", i)
					if write {
						if err := flow.WriteStreamCtx(ctx, "tokens", token); err != nil {
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
		})
	}
}
