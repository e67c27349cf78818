package store

import (
	"context"
	"strconv"
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

// StepBeginParams starts an attempt of a step.
type StepBeginParams struct {
	Key      StepKey
	Input    []byte
	Position int // the call's index in its branch (see Step.Position)
	Now      int64
	// New says the caller knows of no record of the step, so the first
	// attempt is likely: StepBegin may then try a plain insert, cheaper
	// than the insert-or-update it otherwise runs. It never changes the
	// outcome: a record that exists is handled as without New.
	New bool
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

// StepReader reads the steps of a run.
type StepReader interface {
	// StepList returns the records of a run's calls in the order they
	// started: by start time, and in the order they were inserted within
	// one millisecond (going back in a history relies on that order).
	StepList(ctx context.Context, runID string) ([]Step, error)
}

// StepTx writes step occurrences and their compensations inside a write
// transaction.
type StepTx interface {
	// StepBegin records the start of an attempt and returns its number.
	StepBegin(ctx context.Context, p StepBeginParams) (attempt int, err error)
	// StepBeginMany is StepBegin of each of ps, in set-based statements
	// where the adapter has them (the first attempts of steps marked New);
	// it returns the attempts in the order of ps.
	StepBeginMany(ctx context.Context, ps []StepBeginParams) (attempts []int, err error)
	StepComplete(ctx context.Context, p StepCompleteParams) error
	// StepWait records a durable wait the first time a run reaches it; an
	// existing record is left as it is.
	StepWait(ctx context.Context, p StepBeginParams) error
	StepFail(ctx context.Context, p StepFailParams) error
	// StepCancel fails for good, with p's error, a call that has no
	// outcome yet: a running or retrying step, or an open wait (p.Final
	// is not read). The call's cancellation scope was cancelled.
	// flowtype.ErrConflict when the call has no record or an outcome.
	StepCancel(ctx context.Context, p StepFailParams) error
	// StepCompensationArm marks the compensation of every completed,
	// compensable step of a run pending; the unwind of the run starts.
	StepCompensationArm(ctx context.Context, runID string) error
	StepCompensationBegin(ctx context.Context, key StepKey) (attempt int, err error)
	StepCompensationEnd(ctx context.Context, key StepKey, state CompensationState, errMsg string) error
	StepCompensationRetryFailed(ctx context.Context, runID string) (int64, error)
	StepCompensationSkipFailed(ctx context.Context, runID string) (int64, error)
	// StepReopen turns a completed wait back into an open one (status
	// waiting, no output), keeping its input and position;
	// flowtype.ErrConflict when the step is not a completed record.
	StepReopen(ctx context.Context, key StepKey) error
}
