package main

import (
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// executionJSON is what show --json says of a run that continued as new
// (flow.ContinueAsNew): its current execution and when it began. Both are
// left out for a run in its first execution.
type executionJSON struct {
	Execution   int       `json:"execution,omitempty"`
	ContinuedAt time.Time `json:"continued_at,omitzero"`
}

func newExecutionJSON(info flow.RunInfo) executionJSON {
	if info.Execution <= 1 {
		return executionJSON{}
	}
	return executionJSON{Execution: info.Execution, ContinuedAt: utc(info.ContinuedAt)}
}

// executionRow adds to show's header the execution of a run that continued
// as new: its steps below are that execution's only.
func executionRow(h *table, info flow.RunInfo) {
	if info.Execution <= 1 {
		return
	}
	h.row("Execution", fmt.Sprintf("%d (continued as new %s; the steps below are this execution's)",
		info.Execution, rfcMillis(info.ContinuedAt)))
}
