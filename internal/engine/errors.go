package engine

import (
	"errors"
	"fmt"
)

// The engine's own errors. The sentinels and error types users match are
// declared in flow/flowtype, which package flow re-exports.
var (
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
