package flowtest_test

import (
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A test reads the values a run published, the latest per key.
func TestPublishedReadsARunsValues(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	wf := flow.Workflow[int, int]{Name: "export_rows", Run: func(wc flow.Context, n int) (int, error) {
		for i := 1; i <= n; i++ {
			if err := flow.Publish(wc, "rows", i); err != nil {
				return 0, err
			}
		}
		return n, flow.Publish(wc, "phase", "done")
	}}
	run := flowtest.Start(env, wf, 3, nil)
	if _, err := flowtest.Await(env, run); err != nil {
		t.Fatal(err)
	}
	got := env.Published(run.ID())
	if string(got["rows"]) != "3" || string(got["phase"]) != `"done"` || len(got) != 2 {
		t.Fatalf("Published = %q, want rows 3 and phase \"done\"", got)
	}
}
