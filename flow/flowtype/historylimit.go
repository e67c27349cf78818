package flowtype

import "fmt"

// HistoryLimitError reports a run whose history reached a limit of the
// engine (flow.Config.MaxHistoryCalls or MaxHistoryBytes): every resume
// replays the whole history, so a run that grows it without end would
// replay ever slower. The run is suspended before the call that would pass
// the limit, with nothing of that call recorded: an operator can raise the
// limit and resume it, or cancel it. The remedy in code is to split the
// work into child workflows, each with a history of its own.
type HistoryLimitError struct {
	// RunID is the run whose history is full.
	RunID string
	// What is the measure that reached its limit: "calls" or "bytes".
	What string
	// Count is the run's history by that measure, Limit the limit.
	Count, Limit int64
	// Setting names the engine setting of the limit.
	Setting string
}

// Error names the run, the count, the limit and the remedy.
func (e *HistoryLimitError) Error() string {
	return fmt.Sprintf("run %s: its history holds %d %s, the limit (%s) is %d: continue as new (flow.ContinueAsNew) to start a fresh history, split the work into child workflows, each with a history of its own, or raise the limit and resume the run",
		e.RunID, e.Count, e.What, e.Setting, e.Limit)
}
