package flowtype

import "strconv"

// RunStatus is the lifecycle state of a run, as stored in the database.
//
// pending → running ⇄ waiting → completed | compensating → failed |
// suspended; cancelled. A run waiting out a retry backoff is pending with a
// future due time; a run waiting for a timer, a signal or a child is
// waiting. Neither holds a worker or a lease.
type RunStatus string

// Run states.
const (
	// StatusPending is a run ready to be claimed, now or at its due time.
	StatusPending RunStatus = "pending"
	// StatusRunning is a run an engine has claimed and is executing.
	StatusRunning RunStatus = "running"
	// StatusWaiting is a run waiting for a timer, a signal or a child.
	StatusWaiting RunStatus = "waiting"
	// StatusCompensating is a run whose workflow failed, undoing its
	// completed steps.
	StatusCompensating RunStatus = "compensating"
	// StatusCompleted is a run whose workflow returned its output.
	StatusCompleted RunStatus = "completed"
	// StatusFailed is a run whose workflow failed and whose completed steps
	// were compensated (rolled back).
	StatusFailed RunStatus = "failed"
	// StatusSuspended is a run parked for an operator, e.g. because a
	// compensation exhausted its retries or a stored value no longer
	// decodes.
	StatusSuspended RunStatus = "suspended"
	// StatusCancelled is a run that was cancelled.
	StatusCancelled RunStatus = "cancelled"
)

// Finished reports whether no further transition can happen without an
// operator: completed, failed or cancelled. A suspended run is not
// finished, as an operator can resume it.
func (s RunStatus) Finished() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// WorkflowKey identifies one version of a workflow. A run is pinned to the
// version it started with.
type WorkflowKey struct {
	// Name is the workflow's persisted name.
	Name string
	// Version is the workflow's version number.
	Version int
}

// String returns "name:version", the form the claim query matches on.
func (k WorkflowKey) String() string { return k.Name + ":" + strconv.Itoa(k.Version) }
