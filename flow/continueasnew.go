package flow

import (
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/engine"
)

// Continue-as-new (Temporal's ContinueAsNew): a run that never ends, such
// as a loop that sleeps and reacts for months, records a call per
// iteration, and every resume replays them all, until the history limits
// (Config.MaxHistoryCalls, MaxHistoryBytes) suspend it. Its body instead
// returns ContinueAsNew every so often, carrying the state the loop needs:
// the run's current execution ends, and a new one of the same run ID
// starts at once with that input and an empty history. The run stays
// unfinished throughout: Result and WaitRun return the output of the
// execution that finally returns one.
//
// What carries over, and what does not:
//
//   - The end of the old execution and the new input commit in one write
//     fenced by the run's lease. A crash before it replays the old
//     execution, which returns ContinueAsNew again; after it, the new
//     execution starts. No iteration is lost or doubled.
//   - The step records of the old execution are deleted in that write (the
//     continued_as_new event lists them; the history's events stay), so
//     replays, the history limits and a later compensation see only the
//     current execution's calls: a saga that fails after continuing
//     compensates only the steps of its last execution. Values published
//     with Publish are step records too: publish them again in the new
//     execution if clients read them.
//   - Signals not yet received stay with the run, for the new execution to
//     receive; the received ones stay received.
//   - The run's ID, queue, priority, unique key, deadline (or timeout,
//     counted from its first claim), context values and parent stay. A
//     child started by an old execution runs on (as a detached one would);
//     children of a later execution get default IDs that name it
//     ("<run>/exec2/flow.child:…"), so they never collide with earlier ones.
//   - Timers and waits belong to the execution that made them; there are
//     none pending when its body returns.
//
// Execution numbers start at 1 and go up by one each time; RunInfo and
// `flowlite show` report the current one.

// ContinueOption changes how a run continues as new.
type ContinueOption func(*continueOptions)

type continueOptions struct {
	newest bool
}

// OnNewestVersion makes the new execution run on the newest version of the
// workflow registered with the engine, rather than on the run's own: a
// long-lived loop picks up a deploy at its next continue-as-new without
// patches. The newest version must accept the input given (its In decodes
// it); a run whose input it cannot decode is suspended.
func OnNewestVersion() ContinueOption {
	return func(o *continueOptions) { o.newest = true }
}

// ContinueAsNew returns the error a workflow body returns to end the run's
// current execution and continue as a new one with input (see above):
//
//	return Out{}, flow.ContinueAsNew(wc, next)
//
// The output returned with it is ignored. input must be of the
// workflow's input type (Workflow's In); a body that passes another type
// fails, with an error saying so. The error is for the engine only: a body
// that wraps it keeps the meaning (errors.As), one that handles it
// differently does not continue.
func ContinueAsNew[In any](wc Context, input In, opts ...ContinueOption) error {
	var o continueOptions
	for _, opt := range opts {
		opt(&o)
	}
	encoded, err := codec.Encode(input)
	if err != nil {
		return fmt.Errorf("run %s: continue as new: encode the next input: %w", wc.RunID(), err)
	}
	return &continueAsNew{input: input, typeName: codec.TypeName[In](), encoded: encoded, newest: o.newest}
}

// continueAsNew is ContinueAsNew's error until the workflow's definition
// checks its type and turns it into the engine's.
type continueAsNew struct {
	input    any
	typeName string
	encoded  []byte
	newest   bool
}

func (c *continueAsNew) Error() string { return "continue as new" }

// Execution returns the number of the run's current execution: 1 until it
// first continued as new.
func Execution(wc Context) int { return wc.runContext().Execution() }

// continuation turns a body's ContinueAsNew error into the engine's, after
// checking it carries the workflow's input type In; err otherwise.
func continuation[In any](e *Engine, rc *engine.RunContext, name string, err error) error {
	var c *continueAsNew
	if !errors.As(err, &c) {
		return err
	}
	if _, ok := c.input.(In); !ok {
		return fmt.Errorf("run %s: continue as new with a %s, but workflow %s takes a %s", rc.RunID(), c.typeName, name, codec.TypeName[In]())
	}
	next := &engine.ContinueAsNewError{Input: c.encoded}
	if c.newest && e != nil {
		next.Version = newestVersion(e, name)
	}
	return next
}

// newestVersion is the newest version of the workflow name registered with
// e (zero: none, which keeps the run's own).
func newestVersion(e *Engine, name string) int {
	newest := 0
	for _, k := range e.core.Known() {
		if k.Name == name && k.Version > newest {
			newest = k.Version
		}
	}
	return newest
}

// EventContinuedAsNew: the run continued as new; see
// flowtype.EventContinuedAsNew.
const EventContinuedAsNew = flowtype.EventContinuedAsNew
