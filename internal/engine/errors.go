package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors. The flow package re-exports them.
var (
	// ErrCancelled is the cause of a run's context when the run was cancelled,
	// and wraps the error Result returns for a cancelled run.
	ErrCancelled = errors.New("run cancelled")
	// ErrDeadlineExceeded is the cause of a run's context when the run passed
	// its deadline; it matches ErrCancelled, as the run is cancelled.
	ErrDeadlineExceeded = fmt.Errorf("%w: deadline exceeded", ErrCancelled)
	// ErrRolledBack wraps the error Result returns for a run whose workflow
	// failed and whose completed steps were all compensated.
	ErrRolledBack = errors.New("run rolled back")
	// ErrSuspended wraps the error Result returns for a run parked for an
	// operator, e.g. after a compensation exhausted its retries.
	ErrSuspended = errors.New("run suspended")
	// ErrRunFinished is returned when an operation needs an unfinished run.
	ErrRunFinished = errors.New("run already finished")
	// ErrRunExists is returned when a run ID is taken by a run of another
	// workflow.
	ErrRunExists = errors.New("run ID already used by another workflow")
	// ErrUnknownWorkflow is returned when a workflow version is not
	// registered with the engine.
	ErrUnknownWorkflow = errors.New("unknown workflow")
	// ErrLostRace is the cause of a race branch's context once another
	// branch won; the branch's further step calls return it.
	ErrLostRace = errors.New("another branch finished first")

	// errStopping is the cause of a run's context when the engine stops
	// before the run could finish.
	errStopping = errors.New("engine stopping")
	// errParked aborts a run execution that must wait: for the next attempt
	// of a step, a timer, a signal or a child. The executor releases the run
	// until the earliest time any branch asked for.
	errParked = errors.New("run parked")
)

// PermanentError marks an error that must not be retried.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// StepError is returned by a step call when the step failed for good: its
// retries are exhausted or it returned a permanent error. On replay the same
// error is returned from the recorded message.
type StepError struct {
	RunID      string
	Step       string
	Occurrence int
	Attempts   int
	Err        error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("step %s failed after %d attempt(s): %v", e.Step, e.Attempts, e.Err)
}
func (e *StepError) Unwrap() error { return e.Err }

// RecordedError stands for an error read back from the database; its
// original type did not survive the round trip, only its message.
type RecordedError struct{ Message string }

func (e *RecordedError) Error() string { return e.Message }

// DecodeError reports a stored value that cannot be decoded into the Go type
// the code expects, typically after a type changed between deploys. The run
// is suspended, not compensated, and nothing recorded is changed.
type DecodeError struct {
	RunID string
	Step  string // empty for the workflow input or output
	What  string // "input" or "output"
	Type  string
	Err   error
}

func (e *DecodeError) Error() string {
	if e.Step == "" {
		return fmt.Sprintf("run %s: decode workflow %s into %s: %v", e.RunID, e.What, e.Type, e.Err)
	}
	return fmt.Sprintf("run %s: decode %s of step %s into %s: %v", e.RunID, e.What, e.Step, e.Type, e.Err)
}
func (e *DecodeError) Unwrap() error { return e.Err }

// ReplayError reports a workflow whose replay asked for a step the run has
// no record of while only recorded steps may run (during compensation).
type ReplayError struct {
	RunID string
	Step  string
}

func (e *ReplayError) Error() string {
	return fmt.Sprintf("run %s: replay reached step %s, which has no record; was the workflow code changed?", e.RunID, e.Step)
}

// DefinitionError reports a step or workflow value the engine cannot use,
// e.g. a step without a name. It is a bug in the workflow code: the run is
// suspended until a fixed binary resumes it.
type DefinitionError struct {
	RunID   string
	Problem string
}

func (e *DefinitionError) Error() string {
	return fmt.Sprintf("run %s: invalid definition: %s", e.RunID, e.Problem)
}

// RolledBackError is the result of a run whose workflow failed and whose
// completed steps were compensated.
type RolledBackError struct {
	RunID string
	Cause string // the workflow's error message
	// Step names the step that failed for good, with the attempts it made,
	// when the workflow failed because of one (the last to fail, if
	// several did); empty when the workflow failed by itself, was
	// cancelled, or its steps could not be read.
	Step     string
	Attempts int
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("run %s rolled back: %s", e.RunID, e.Cause)
}

func (e *RolledBackError) Is(target error) bool { return target == ErrRolledBack }

// SuspendedError is the result of a run parked for an operator.
type SuspendedError struct {
	RunID  string
	Reason string
}

func (e *SuspendedError) Error() string {
	return fmt.Sprintf("run %s suspended: %s", e.RunID, e.Reason)
}
func (e *SuspendedError) Is(target error) bool { return target == ErrSuspended }

// CancelledError is the result of a cancelled run. Reason says why when
// the run recorded a reason (see CancelReason), e.g. the step that
// cancelled its own run.
type CancelledError struct {
	RunID  string
	Reason string
}

func (e *CancelledError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("run %s cancelled", e.RunID)
	}
	return fmt.Sprintf("run %s cancelled: %s", e.RunID, e.Reason)
}
func (e *CancelledError) Is(t error) bool { return t == ErrCancelled }
