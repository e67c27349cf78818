package flowtest_test

import (
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// Await advances through continue-as-new: a loop that sleeps an hour per
// iteration and continues as new every 2 iterations runs its 7 iterations
// on the manual clock, in 4 executions, to the right count.
func TestAwaitAdvancesThroughContinueAsNew(t *testing.T) {
	env := flowtest.New(t, nil)
	type state struct{ Done, Left int }
	wf := flow.Workflow[state, int]{Name: "hourly", Run: func(wc flow.Context, s state) (int, error) {
		for range 2 {
			if s.Left == 0 {
				return s.Done, nil
			}
			if err := flow.Sleep(wc, time.Hour); err != nil {
				return 0, err
			}
			s.Done, s.Left = s.Done+1, s.Left-1
		}
		return 0, flow.ContinueAsNew(wc, s)
	}}
	start := env.Now()
	out, run, err := flowtest.RunWorkflow(env, wf, state{Left: 7})
	if err != nil || out != 7 {
		t.Fatalf("RunWorkflow = %d, %v; want 7", out, err)
	}
	if got := env.Executions(run.ID()); got != 4 {
		t.Errorf("Executions = %d, want 4", got)
	}
	if moved := env.Now().Sub(start); moved < 7*time.Hour {
		t.Errorf("clock moved %s, want at least 7h", moved)
	}
}
