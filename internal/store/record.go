package store

import (
	"strconv"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// RunStatus is the lifecycle state of a run. It is defined in
// flow/flowtype, where go doc shows its states.
type RunStatus = flowtype.RunStatus

// Run states. pending → running ⇄ waiting → completed | compensating →
// failed | suspended; cancelled. A run waiting for the next attempt of a
// step is pending with a future RunAt; a run waiting for a timer, a signal
// or a child is waiting. Neither holds a lease.
const (
	RunPending      = flowtype.StatusPending
	RunRunning      = flowtype.StatusRunning
	RunWaiting      = flowtype.StatusWaiting
	RunCompensating = flowtype.StatusCompensating
	RunCompleted    = flowtype.StatusCompleted
	RunFailed       = flowtype.StatusFailed
	RunSuspended    = flowtype.StatusSuspended
	RunCancelled    = flowtype.StatusCancelled
)

// StepStatus is the state of one step occurrence.
type StepStatus string

// Step states.
const (
	StepRunning   StepStatus = "running"
	StepRetrying  StepStatus = "retrying"
	StepWaiting   StepStatus = "waiting"
	StepCompleted StepStatus = "completed"
	StepFailed    StepStatus = "failed"
)

// CompensationState is the state of the compensation of a completed step.
type CompensationState string

// Compensation states. None means nothing is to be undone: the step has no
// compensate hook, or its run has not started unwinding.
const (
	CompensationNone      CompensationState = "none"
	CompensationPending   CompensationState = "pending"
	CompensationRunning   CompensationState = "running"
	CompensationRetrying  CompensationState = "retrying"
	CompensationCompleted CompensationState = "completed"
	CompensationFailed    CompensationState = "failed"
	CompensationSkipped   CompensationState = "skipped"
)

// WorkflowKey identifies one version of a workflow. It is defined in
// flow/flowtype, where go doc shows its fields.
type WorkflowKey = flowtype.WorkflowKey

// Run is a stored run. Times are Unix milliseconds.
type Run struct {
	ID              string
	Workflow        string
	Version         int
	Queue           string
	Priority        int
	Status          RunStatus
	Input           []byte
	Output          []byte
	Error           string
	Reason          string
	CancelRequested bool
	RunAt           int64
	Deadline        int64  // zero: none
	ParentID        string // the run that started this one as a child
	WakeSeq         int64
	Fence           int64
	LeaseOwner      string
	LeaseExpiresAt  int64
	CreatedAt       int64
	UpdatedAt       int64
	FinishedAt      int64
	UniqueKey       string // empty: none
	StartedAt       int64  // first claim; zero until then
	RequeuedFrom    string // the dead letter this run requeues
	RequeuedAs      string // the run that requeued this dead letter
}

// Lease returns the lease the run was claimed with.
func (r Run) Lease() Lease { return Lease{RunID: r.ID, Owner: r.LeaseOwner, Fence: r.Fence} }

// Lease identifies one claim of a run: the owner and the fence token the
// claim produced. Writes made under a lease apply only while it is current.
type Lease struct {
	RunID string
	Owner string
	Fence int64
}

// Step is a stored step occurrence.
type Step struct {
	RunID                string
	Name                 string
	Occurrence           int
	Status               StepStatus
	Attempts             int
	Input                []byte
	Output               []byte
	Error                string
	CompletedSeq         int64
	Compensable          bool
	Compensation         CompensationState
	CompensationAttempts int
	CompensationError    string
	StartedAt            int64
	FinishedAt           int64
	// Position is the index of the call among the calls of its branch;
	// -1 for calls recorded before positions were (not checked on replay).
	Position int
	// Failure is the shape of the error of a step that failed; its Message
	// is Error.
	Failure Failure
}

// Failure is the recorded shape of a step's error beyond its message: the
// code of the flow.Error it carried, whether it was permanent, and the
// flow.Error's details.
type Failure struct {
	Code      string
	Permanent bool
	Details   []byte
}

// Key returns the identity of the step within its run.
func (s Step) Key() StepKey { return StepKey{RunID: s.RunID, Name: s.Name, Occurrence: s.Occurrence} }

// StepKey identifies a step occurrence: a step name and how many times the
// run called a step of that name before.
type StepKey struct {
	RunID      string
	Name       string
	Occurrence int
}

// Event is one entry of a run's append-only history.
type Event struct {
	ID         int64
	RunID      string
	At         int64
	Kind       string
	Step       string
	Occurrence int
	Attempt    int
	Detail     string
}

// UnrunnableCount counts ready runs of a workflow version a process lacks.
type UnrunnableCount struct {
	Workflow WorkflowKey
	Runs     int64
}

// RescuedRun is a run whose expired lease the rescuer removed.
type RescuedRun struct {
	ID             string
	LeaseExpiresAt int64
	Fence          int64
}

// RunInsertParams describes a new run.
type RunInsertParams struct {
	ID       string
	Workflow WorkflowKey
	Queue    string
	Priority int
	Input    []byte
	RunAt    int64
	Deadline int64  // zero: none
	ParentID string // empty: not a child
	// UniqueKey, when set, makes the insert do nothing while a run of the
	// workflow holds the same key (see QueueReader.RunGetKeyHolder), or a
	// hold of it is current.
	UniqueKey string
	// UniqueStates are the states in which the run holds UniqueKey for
	// good; nil means the unfinished ones (pending, running, waiting,
	// compensating, suspended), which it must include.
	UniqueStates []RunStatus
	Now          int64
}

// RunReleaseParams says when a released run is due again.
type RunReleaseParams struct {
	RunAt   int64
	Waiting bool  // waiting for a timer, signal or child (else pending)
	WakeSeq int64 // the run's wake_seq when the worker claimed it
	Now     int64
}

// Signal is an external event sent to a run.
type Signal struct {
	ID         int64
	RunID      string
	Name       string
	Payload    []byte
	Key        string // empty: no deduplication
	SentAt     int64
	ConsumedBy string // the wait that received it; empty while pending
}

// RunClaimParams selects runs to lease.
type RunClaimParams struct {
	Queue          string
	Known          []WorkflowKey
	Owner          string
	Max            int
	Now            int64
	LeaseExpiresAt int64
}

// RunFinishParams records the outcome of a run. FinishedAt is zero for a
// suspended run, which is not finished.
type RunFinishParams struct {
	Status     RunStatus
	Output     []byte
	Error      string
	Reason     string
	FinishedAt int64
	Now        int64
}

// RunSetStatusParams is a guarded state change of an unleased run.
type RunSetStatusParams struct {
	ID         string
	Expected   RunStatus
	Status     RunStatus
	Reason     string
	RunAt      int64
	FinishedAt int64
	Now        int64
}

// RunListParams filters runs; empty fields match everything.
type RunListParams struct {
	Status   RunStatus
	Workflow string
	Queue    string
	Since    int64 // created at or after, Unix ms; zero: no bound
	Before   int64 // created before, Unix ms; zero: no bound
	Limit    int
}

// StepBeginParams starts an attempt of a step.
type StepBeginParams struct {
	Key      StepKey
	Input    []byte
	Position int // the call's index in its branch (see Step.Position)
	Now      int64
}

// StepCompleteParams checkpoints the output of a step.
type StepCompleteParams struct {
	Key         StepKey
	Output      []byte
	Compensable bool
	Now         int64
}

// StepFailParams records a failed attempt; Final is true when no attempt
// follows.
type StepFailParams struct {
	Key     StepKey
	Error   string
	Failure Failure
	Final   bool
	Now     int64
}

// String returns "name#occurrence of run ID" for messages.
func (k StepKey) String() string {
	return k.Name + "#" + strconv.Itoa(k.Occurrence) + " of run " + k.RunID
}

// UnfinishedStates returns the states of an unfinished run, in which a run
// with a unique key always holds it.
func UnfinishedStates() []RunStatus {
	return []RunStatus{RunPending, RunRunning, RunWaiting, RunCompensating, RunSuspended}
}

// AllStates returns the states of a run, in lifecycle order.
func AllStates() []RunStatus {
	return []RunStatus{RunPending, RunRunning, RunWaiting, RunCompensating, RunSuspended, RunCompleted, RunFailed, RunCancelled}
}
