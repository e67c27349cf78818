package engine

import (
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Sentinel errors. The flow package re-exports them.
var (
	// ErrCancelled is the cause of a run's context when the run was cancelled,
	// and wraps the error Result returns for a cancelled run.
	ErrCancelled = flowtype.ErrCancelled
	// ErrDeadlineExceeded is the cause of a run's context when the run passed
	// its deadline; it matches ErrCancelled, as the run is cancelled.
	ErrDeadlineExceeded = flowtype.ErrDeadlineExceeded
	// ErrRolledBack wraps the error Result returns for a run whose workflow
	// failed and whose completed steps were all compensated.
	ErrRolledBack = flowtype.ErrRolledBack
	// ErrSuspended wraps the error Result returns for a run parked for an
	// operator, e.g. after a compensation exhausted its retries.
	ErrSuspended = flowtype.ErrSuspended
	// ErrRunFinished is returned when an operation needs an unfinished run.
	ErrRunFinished = flowtype.ErrRunFinished
	// ErrRunExists is returned when a run ID is taken by a run of another
	// workflow.
	ErrRunExists = flowtype.ErrRunExists
	// ErrUnknownWorkflow is returned when a workflow version is not
	// registered with the engine.
	ErrUnknownWorkflow = flowtype.ErrUnknownWorkflow
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

// The error types flow returns are defined in flow/flowtype, where go doc
// shows their fields; these aliases keep the engine's names.
type (
	PermanentError      = flowtype.PermanentError
	StepError           = flowtype.StepError
	Error               = flowtype.Error
	NonDeterminismError = flowtype.NonDeterminismError
	DecodeError         = flowtype.DecodeError
	RolledBackError     = flowtype.RolledBackError
	SuspendedError      = flowtype.SuspendedError
	CancelledError      = flowtype.CancelledError
	WriteError          = flowtype.WriteError
)

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
