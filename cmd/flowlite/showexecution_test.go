package main

import (
	"context"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// continuing counts down, continuing as new at each step of the count.
var continuing = flow.Workflow[int, int]{Name: "continuing", Run: func(wc flow.Context, n int) (int, error) {
	if n == 0 {
		return flow.Execution(wc), nil
	}
	return 0, flow.ContinueAsNew(wc, n-1)
}}

// show prints the execution of a run that continued as new, in the table
// and in --json, and nothing of it for a run in its first.
func TestShowExecution(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		flow.Register(e, continuing)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		run, err := flow.Start(ctx, e, continuing, 3, &flow.StartOptions{RunID: "looped"})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := run.Result(ctx); err != nil || out != 4 {
			t.Fatalf("Result = %d, %v; want execution 4", out, err)
		}
		if out := cli("show", "looped"); !strings.Contains(out, "Execution") || !strings.Contains(out, "4 (continued as new") {
			t.Errorf("show prints no execution 4:\n%s", out)
		}
		if out := cli("--json", "show", "looped"); !strings.Contains(out, `"execution": 4`) || !strings.Contains(out, `"continued_at"`) {
			t.Errorf("show --json has no execution 4:\n%s", out)
		}
		if _, err := flow.Start(ctx, e, continuing, 0, &flow.StartOptions{RunID: "once"}); err != nil {
			t.Fatal(err)
		}
		if out := cli("--json", "show", "once"); strings.Contains(out, `"execution"`) {
			t.Errorf("show --json of a run in its first execution names one:\n%s", out)
		}
	})
}
