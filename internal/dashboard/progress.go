package dashboard

import "github.com/flowlite/flowlite/flow"

// progressed returns the steps of info whose current attempt reported
// progress, in the run's step order, for the run page's progress bars.
func progressed(info flow.RunInfo) []flow.StepRecord {
	var out []flow.StepRecord
	for _, s := range info.Steps {
		if s.Progress != nil {
			out = append(out, s)
		}
	}
	return out
}
