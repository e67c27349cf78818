package flowtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A test reads what a run wrote to a stream, from its body and its steps,
// in order.
func TestStreamReadsARunsStream(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	lines := flow.Step[int, int]{Name: "emit_lines", Run: func(ctx context.Context, n int) (int, error) {
		for i := 1; i <= n; i++ {
			if err := flow.WriteStreamCtx(ctx, "log", fmt.Sprintf("line %d", i)); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "export_log", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.WriteStream(wc, "log", "begin"); err != nil {
			return 0, err
		}
		return flow.Do(wc, lines, n)
	}}
	run := flowtest.Start(env, wf, 2, nil)
	if _, err := flowtest.Await(env, run); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(flowtest.Stream[string](env, run.ID(), "log"))
	if got != "[begin line 1 line 2]" {
		t.Fatalf("Stream = %s, want [begin line 1 line 2]", got)
	}
	if got := flowtest.Stream[string](env, run.ID(), "none"); len(got) != 0 {
		t.Fatalf("Stream of an unwritten stream = %v, want none", got)
	}
}
