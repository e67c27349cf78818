package flowtype

import "fmt"

// IDReusePolicy says whether a start may take the run ID of a finished
// run (Temporal's WorkflowIdReusePolicy; go-workflows lets a child's ID be
// reused once the first child finished). The zero value, ReuseNever, is
// flowlite's original rule: a run ID names one run for as long as that run
// is retained.
type IDReusePolicy int

// Run ID reuse policies, for flow.StartOptions.IDReuse and
// flow.ChildOptions.IDReuse.
const (
	// ReuseNever keeps a taken ID's run: Start returns it (the ID is the
	// start's idempotency key), and StartChild fails with ErrRunExists.
	ReuseNever IDReusePolicy = iota
	// ReuseFinished lets the start take the ID of a finished (completed,
	// failed or cancelled) run: that run's record, with its steps, history
	// and signals, is deleted, and a new run starts under the ID.
	ReuseFinished
	// ReuseFailed is ReuseFinished for a failed or cancelled run only: a
	// completed run keeps its ID, as under ReuseNever (Temporal's
	// AllowDuplicateFailedOnly).
	ReuseFailed
)

// String returns "never", "finished" or "failed".
func (p IDReusePolicy) String() string {
	switch p {
	case ReuseNever:
		return "never"
	case ReuseFinished:
		return "finished"
	case ReuseFailed:
		return "failed"
	}
	return fmt.Sprintf("IDReusePolicy(%d)", int(p))
}

// Allows reports whether the policy lets a start take the ID of a run in
// status s.
func (p IDReusePolicy) Allows(s RunStatus) bool {
	switch p {
	case ReuseFinished:
		return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
	case ReuseFailed:
		return s == StatusFailed || s == StatusCancelled
	}
	return false
}
