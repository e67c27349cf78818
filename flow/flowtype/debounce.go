package flowtype

import (
	"fmt"
	"time"
)

// Debounce makes a start of a workflow merge into the workflow's pending
// run with the same Key instead of starting a run of its own, so that a
// burst of starts runs the workflow once (flow.StartOptions.Debounce,
// flow.EnqueueOptions.Debounce).
//
// The first start with a key records an ordinary pending run, due Window
// later: it holds no worker slot meanwhile. Each later start with the key,
// while that run is pending and was never claimed, does what its Mode says
// and returns a handle on that run (Existing reports true):
//
//   - DebounceReplace (the default): the run takes the newest start's input,
//     and its due time moves to Window after that start, but never past
//     MaxDelay after the run's first start, so a steady stream of starts
//     cannot postpone it forever (Inngest's debounce with a timeout,
//     BullMQ's debounce with extend and replace).
//   - DebounceDrop (a throttle): the later start is dropped; the run keeps
//     the first start's input and its due time (BullMQ's throttle mode).
//
// Either way the run's history records an EventRunDebounced saying what
// the start did. Once the run has been claimed (it is running, or ran), or
// was cancelled or deleted, the next start with the key records a new
// debounced run. Keys are compared within the workflow (its name, any
// version), as unique keys are; the database enforces one pending
// debounced run per key, so two processes debouncing one key at once end
// with one run.
//
// Only the input and the due time of the pending run change: its ID,
// queue, priority and other options are those of the start that recorded
// it, and so is its MaxDelay. A debounce excludes a unique key, a RunID, a
// RunAt or Delay (the debounce sets the due time) and ID reuse, and it
// cannot be given to a start in the caller's transaction or in a batch.
type Debounce struct {
	// Key names what the starts debounce, within the workflow. Required,
	// at most 256 bytes.
	Key string
	// Window is how long after a start its run waits for more starts with
	// the key: at least a millisecond.
	Window time.Duration
	// MaxDelay bounds how long after the run's first start its due time may
	// be moved (DebounceReplace); zero means no bound, else it is at least
	// Window.
	MaxDelay time.Duration
	// Mode says what a start does to the pending run; the zero value is
	// DebounceReplace.
	Mode DebounceMode
}

// DebounceMode says what a debounced start does to the key's pending run.
type DebounceMode int

// Debounce modes, for Debounce.Mode.
const (
	// DebounceReplace gives the pending run the start's input and moves its
	// due time to Window after the start, bounded by MaxDelay after the
	// run's first start. It is the default.
	DebounceReplace DebounceMode = iota
	// DebounceDrop drops the start: the first start of the run wins, with
	// its input and due time (a throttle).
	DebounceDrop
)

// String returns "replace" or "drop".
func (m DebounceMode) String() string {
	switch m {
	case DebounceReplace:
		return "replace"
	case DebounceDrop:
		return "drop"
	}
	return fmt.Sprintf("DebounceMode(%d)", int(m))
}
