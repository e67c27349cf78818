package flow

import "github.com/flowlite/flowlite/flow/flowtype"

// Debounce merges a burst of starts of a workflow (or enqueues of a job)
// with one key into one pending run (StartOptions.Debounce,
// EnqueueOptions.Debounce). See [flowtype.Debounce] for the rules, and
// docs/jobs.md, "Debounce and throttle".
type Debounce = flowtype.Debounce

// DebounceMode says what a debounced start does to the key's pending run.
// See [flowtype.DebounceMode].
type DebounceMode = flowtype.DebounceMode

// Debounce modes.
const (
	// DebounceReplace gives the pending run the newest start's input and
	// moves its due time to Window after that start, never past MaxDelay
	// after the run's first start. It is the default.
	DebounceReplace = flowtype.DebounceReplace
	// DebounceDrop drops later starts while the run is pending: the first
	// start wins, with its input and due time (a throttle).
	DebounceDrop = flowtype.DebounceDrop
)

// EventRunDebounced: a start with the pending run's debounce key was merged
// into it; Detail says whether it replaced the input (and the new due
// time) or was dropped.
const EventRunDebounced = flowtype.EventRunDebounced

// cloneDebounce copies d, so that a caller changing its options after the
// start changes nothing of it.
func cloneDebounce(d *Debounce) *Debounce {
	if d == nil {
		return nil
	}
	c := *d
	return &c
}
