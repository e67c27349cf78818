package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Replayed is what a replay of a recorded run found.
type Replayed struct {
	// Calls is how many calls the body made that matched a record.
	Calls int
	// Returned reports whether the body returned; Output and Err are then
	// what it returned.
	Returned bool
	Output   []byte
	Err      error
	// Frontier names the first call the history has no outcome for (the
	// run was waiting or executing there when its history was taken), when
	// the body reached one; the replay stops there.
	Frontier string
}

// Replay runs the body of the workflow def against a recorded run (its row
// and its step records, typically read from an exported history), with the
// checks every resumed execution makes (history.go) and nothing else: the
// run is replay-only, as during an unwind, so a call with a recorded
// outcome returns it, and the first call without one stops the body
// instead of running. No step body, compensation or RunTx runs and nothing
// is written, so a replay has no side effects and needs no lease.
//
// finished says whether the recorded body returned (the run completed, or
// its workflow failed): then a call beyond the recorded ones diverges too,
// and is reported as a *NonDeterminismError whose Recorded says the body
// returned there. Otherwise such a call is where the recorded run stood,
// and the replay ends clean at that frontier.
func (e *Engine) Replay(ctx context.Context, def Workflow, run store.Run, steps []store.Step, finished bool) (Replayed, error) {
	runCtx, cancel := context.WithCancelCause(withRunValues(ctx, run))
	defer cancel(nil)
	x := &execution{e: e, run: run, def: def, leaseCtx: runCtx, cancelLease: cancel, runCtx: runCtx, cancelRun: cancel}
	rc := newRunContext(x, steps)
	rc.st.replayOnly = true
	rc.st.finished = finished
	output, bodyErr := rc.callWorkflow()

	st := rc.st
	st.mu.Lock()
	defer st.mu.Unlock()
	out := Replayed{Calls: len(st.history.visited)}
	var divergence *flowtype.NonDeterminismError
	var frontier *ReplayError
	switch cause := st.aborted; {
	case cause == nil:
		if err := st.history.unvisited(run.ID); err != nil {
			return out, err
		}
		out.Returned, out.Output, out.Err = true, output, bodyErr
		return out, nil
	case errors.As(cause, &divergence):
		return out, divergence
	case errors.As(cause, &frontier):
		key, position, ok := st.newCall(frontier.Step)
		if !ok {
			return out, fmt.Errorf("replay run %s: %w", run.ID, cause)
		}
		scope := scopeOf(key.Name)
		if finished {
			return out, &flowtype.NonDeterminismError{
				RunID: run.ID, Branch: strings.TrimSuffix(scope, "/"), Position: position,
				Recorded: "no call (the recorded body returned)", Replayed: describeCall(strings.TrimPrefix(key.Name, scope)),
			}
		}
		out.Frontier = describeCall(strings.TrimPrefix(key.Name, scope))
		return out, nil
	case errors.Is(cause, errParked):
		// A branch parked on a recorded retry or wait: where the run stood.
		out.Frontier = "a wait or retry in a parallel branch"
		return out, nil
	default:
		return out, fmt.Errorf("replay run %s: %w", run.ID, cause)
	}
}

// newCall returns the key and position of the call of this execution whose
// ReplayError named it (StepKey.String), with st.mu held.
func (st *runState) newCall(name string) (store.StepKey, int, bool) {
	for key, position := range st.history.calls {
		if key.String() == name {
			return key, position, true
		}
	}
	return store.StepKey{}, 0, false
}
