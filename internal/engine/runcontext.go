package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// RunContext is what a workflow body runs with: the run's context plus its
// recorded steps. Each step call is matched to a record by its key: the
// scope of the branch that calls it, the step name, and its occurrence (how
// many times the branch called a step of that name before), so a resumed
// body gets recorded outputs back and only new steps execute.
//
// A RunContext belongs to one goroutine; parallel branches each get their
// own from Branch, sharing the run's state.
type RunContext struct {
	context.Context
	st          *runState
	scope       string // key prefix of the branch; empty at the top level
	occurrences map[string]int
	calls       int  // how many calls this branch made, the next one's position
	parked      bool // this branch parked; only it stops (see park)
	// settled marks a branch of a race whose winner is recorded: it only
	// replays its recorded calls (see Race).
	settled bool
	// cscope is the innermost cancellation scope the context's calls are
	// made in (scope.go); nil outside any.
	cscope *cancelScope
	// owner is the branch (or the top level) a scope's context runs in,
	// which parks for it; nil for a branch or the top level itself.
	owner *RunContext
}

// runState is the state of one execution of a run, shared by its branches.
type runState struct {
	x *execution

	mu      sync.Mutex
	records map[store.StepKey]store.Step
	defs    map[store.StepKey]Step // every step the body called, for the unwind
	// history checks replays against the recorded calls (history.go).
	history    history
	replayOnly bool // no step may execute: the run is unwinding
	// finished marks the replay (Replay) of a history whose body returned.
	finished bool
	// patches holds the patches decided in this execution, by scope and
	// marker name (patch.go).
	patches map[string]bool
	// size is how much the run's history holds (historylimit.go).
	size historySize
	// cancelled holds the key prefixes of the cancellation scopes cancelled
	// so far, those recorded by earlier executions included (scope.go).
	cancelled map[string]bool
	// scopeMu orders the calls of cancellation scopes against their
	// cancels: a wait or a child start holds it shared from its check of
	// its scope to its write, a cancel holds it alone (scope.go).
	scopeMu sync.RWMutex
	// execution is the number of the run's current execution
	// (continueasnew.go): 1 until it first continued as new.
	execution int
	aborted   error
	parked    bool   // some branch asked to release the run until parkAt
	parkAt    int64  // earliest due time asked for
	parkRetry bool   // a retry (not only waits) asked for the release
	parkWhy   string // why the earliest due time was asked for ("": until then)
}

func newRunContext(x *execution, steps []store.Step) *RunContext {
	st := &runState{
		x:         x,
		records:   make(map[store.StepKey]store.Step, len(steps)),
		defs:      make(map[store.StepKey]Step),
		patches:   make(map[string]bool),
		execution: 1,
	}
	for _, s := range steps {
		st.records[s.Key()] = s
	}
	st.cancelled = cancelledScopes(steps)
	st.history = newHistory(st.records, steps)
	st.size = sizeOf(steps)
	return &RunContext{Context: x.runCtx, st: st, occurrences: make(map[string]int)}
}

// RunID returns the ID of the run.
func (rc *RunContext) RunID() string { return rc.st.x.run.ID }

// Workflow returns the workflow version of the run.
func (rc *RunContext) Workflow() flowtype.WorkflowKey { return rc.st.x.def.Key }

// Execution returns the number of the run's current execution: 1 until the
// run first continued as new.
func (rc *RunContext) Execution() int { return rc.st.execution }

// Now returns the engine clock's time.
func (rc *RunContext) Now() time.Time { return rc.st.x.e.now() }

// DefaultRetry returns the engine's default retry policy.
func (rc *RunContext) DefaultRetry() flowtype.RetryPolicy { return rc.st.x.e.cfg.DefaultRetry }

// Branch returns the context of branch i of the n-th parallel call of this
// context: its step keys get their own scope, so branches replay
// deterministically whatever order they ran in.
func (rc *RunContext) Branch(call, i int) *RunContext {
	return &RunContext{
		Context:     rc.Context,
		st:          rc.st,
		scope:       fmt.Sprintf("%sall%d.%d/", rc.scope, call, i),
		occurrences: make(map[string]int),
		cscope:      rc.cscope,
	}
}

// NextOccurrence returns how many times this context asked for name before,
// and counts this time.
func (rc *RunContext) NextOccurrence(name string) int {
	n := rc.occurrences[name]
	rc.occurrences[name]++
	return n
}

// Abort ends the execution of the run with cause: the body's further step
// calls return it, and the engine acts on it once the body returns (a
// flowtype.DecodeError suspends the run).
func (rc *RunContext) Abort(cause error) error {
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	return rc.st.abortLocked(cause)
}

// position returns the position of a call this execution made in its
// branch, which its record keeps for the replay checks.
func (st *runState) position(key store.StepKey) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.history.position(key)
}

func (st *runState) abortLocked(cause error) error {
	if st.aborted == nil {
		st.aborted = cause
	}
	return st.aborted
}

// park asks for the run to be released until at (Unix ms). At the top level
// it aborts the execution. In a parallel branch it stops only that branch:
// its siblings go on until they finish or park in turn, so that every branch
// gets as far as it can in each execution, whatever order the branches run
// in, and no branch waits for a sibling's backoff or timer. Join then parks
// the caller. retry says a step retry asked, rather than a wait.
func (rc *RunContext) park(at int64, retry bool) error {
	return rc.parkFor(at, retry, "")
}

// parkFor is park, saying why the run waits until at, for the release's
// record.
func (rc *RunContext) parkFor(at int64, retry bool, why string) error {
	st := rc.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.parked || at < st.parkAt {
		st.parkAt, st.parkWhy = at, why
	}
	st.parked = true
	st.parkRetry = st.parkRetry || retry
	if l := rc.lane(); l.scope != "" {
		l.parked = true
		return errParked
	}
	return st.abortLocked(errParked)
}

// lane returns the branch (or the top level) rc's calls stop with when
// they park: rc itself, or for a cancellation scope the context it was
// made from.
func (rc *RunContext) lane() *RunContext {
	if rc.owner != nil {
		return rc.owner
	}
	return rc
}

// Join ends a parallel call once its branches returned: when one of them
// parked, the caller parks too (which at the top level stops the execution)
// and Join returns errParked; otherwise it returns nil. Why the execution
// must stop otherwise is for the caller to tell from the branches' errors
// (see Cause).
func (rc *RunContext) Join(branches []*RunContext) error {
	for _, b := range branches {
		if b.parked {
			st := rc.st
			st.mu.Lock()
			defer st.mu.Unlock()
			if l := rc.lane(); l.scope != "" {
				l.parked = true
				return errParked
			}
			return st.abortLocked(errParked)
		}
	}
	return nil
}

// cause returns why the execution must stop, or nil.
func (rc *RunContext) cause() error {
	st := rc.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.aborted != nil {
		return st.aborted
	}
	if st.x.runCtx.Err() != nil {
		return context.Cause(st.x.runCtx)
	}
	return nil
}

// callWorkflow runs the workflow body with panics turned into errors.
func (rc *RunContext) callWorkflow() (output []byte, err error) {
	x := rc.st.x
	err = callWithRecover("workflow "+x.def.Key.String(), func() error {
		var err error
		output, err = x.def.Run(rc, x.run.Input)
		return err
	})
	return output, err
}

// Cause returns why the execution of the run must stop, or nil. Parallel
// helpers check it after their branches return, because a branch's stop
// reason outranks the errors of the others.
func (rc *RunContext) Cause() error { return rc.cause() }

// Engine returns the engine executing the run.
func (rc *RunContext) Engine() *Engine { return rc.st.x.e }

// replayOnly reports whether the run is unwinding: its body only replays
// what it recorded, and nothing new may be written for it.
func (rc *RunContext) replayOnly() bool {
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	return rc.st.replayOnly
}
