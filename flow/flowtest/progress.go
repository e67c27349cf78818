package flowtest

import (
	"context"

	"github.com/flowlite/flowlite/flow"
)

// Progress returns the latest progress of each step attempt of the run
// that reported any (flow.SetProgress), as flow.GetProgress does, or fails
// the test. A finished attempt's last value is always there; a running
// one's shows within the engine's flush interval (200ms).
func (env *Env) Progress(runID string) []flow.StepProgress {
	env.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ps, err := flow.GetProgress(ctx, env.Engine, runID)
	if err != nil {
		env.t.Fatalf("flowtest: progress of run %s: %v", runID, err)
	}
	return ps
}
