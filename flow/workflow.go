package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/engine"
)

// Context is what a workflow body receives: the run's context (cancelled
// when the run is cancelled) plus its durable state. Pass it to Do.
type Context interface {
	context.Context
	// RunID returns the ID of the run.
	RunID() string
	runContext() *engine.RunContext
	// engine is the engine the workflow was registered with, which routes
	// calls across shards (SignalRun); nil in a replay.
	engine() *Engine
}

type workflowContext struct {
	rc *engine.RunContext
	e  *Engine
}

func (w workflowContext) Deadline() (time.Time, bool)    { return w.rc.Deadline() }
func (w workflowContext) Done() <-chan struct{}          { return w.rc.Done() }
func (w workflowContext) Err() error                     { return w.rc.Err() }
func (w workflowContext) Value(key any) any              { return w.rc.Value(key) }
func (w workflowContext) RunID() string                  { return w.rc.RunID() }
func (w workflowContext) runContext() *engine.RunContext { return w.rc }
func (w workflowContext) engine() *Engine                { return w.e }

// Workflow is a typed, durable function of steps.
//
// Name and Version are persisted with every run. A run finishes on the
// version it started with, so change a workflow's steps (their order,
// names or types) only under a new Version, and keep registering the old
// one until its runs finish. A new run takes the version of the value it is
// started with: keep one value per version and start new runs with the
// newest (see docs/upgrading.md).
type Workflow[In, Out any] struct {
	// Name identifies the workflow, persisted.
	Name string
	// Version of the workflow body; zero means 1.
	Version int
	// Run is the body. It runs again from the top on every resume, so it must
	// be deterministic: call steps with Do, and read time with Now.
	Run func(wc Context, in In) (Out, error)

	// firstStep names the step the body always calls first, with the
	// recorded input {} (a job's one step; see Job.Workflow), so that a
	// claim can record its first attempt (engine.Workflow.FirstStep).
	firstStep string
	// leanFirst keeps a lean record of the runs (Job.Record).
	leanFirst bool
}

func (w Workflow[In, Out]) version() int {
	if w.Version == 0 {
		return 1
	}
	return w.Version
}

// definition builds the engine's untyped view of w, registered with e.
func (w Workflow[In, Out]) definition(e *Engine) engine.Workflow {
	var first engine.FirstStep
	if w.firstStep != "" {
		// The recorded input of a step whose input is struct{}.
		first = engine.FirstStep{Name: w.firstStep, Input: []byte("{}"), Lean: w.leanFirst}
	}
	return engine.Workflow{
		Key:       workflowKey(w.Name, w.version()),
		FirstStep: first,
		Run: func(rc *engine.RunContext, input []byte) ([]byte, error) {
			in, err := codec.Decode[In](input)
			if err != nil {
				return nil, rc.Abort(&DecodeError{RunID: rc.RunID(), What: "input", Type: codec.TypeName[In](), Err: err})
			}
			out, err := w.Run(workflowContext{rc, e}, in)
			if err != nil {
				return nil, continuation[In](e, rc, w.Name, err)
			}
			return codec.Encode(out)
		},
	}
}

// Do calls step s with in inside a workflow body. If this call of s (its
// name and how many times the body called it before) completed in an
// earlier execution of the run, Do returns the recorded output without
// running it; otherwise it runs and checkpoints it.
//
// An error is a *StepError when the step failed for good, which the body may
// handle; any other error means the run cannot go on in this execution
// (cancelled, lease lost, waiting for a retry, a stored value that does not
// decode): the body should return it.
//
// A step name that breaks the naming rules (see MaxNameBytes) fails the
// call with a *NameError before anything is recorded; steps are not
// registered, so this is the first place to check it. The body may return
// that error (the run then fails and is compensated) or handle it; the run
// is not suspended, since no deploy can fix a name the code passes.
func Do[In, Out any](wc Context, s Step[In, Out], in In) (Out, error) {
	var zero Out
	if err := engine.CheckName("step", s.Name); err != nil {
		return zero, fmt.Errorf("run %s: do: %w", wc.RunID(), err)
	}
	rc := wc.runContext()
	def, err := s.definition(rc.RunID(), in, rc.DefaultRetry())
	if err != nil {
		return zero, rc.Abort(err)
	}
	output, err := rc.Step(def)
	if err != nil {
		return zero, err
	}
	out, err := codec.Decode[Out](output)
	if err != nil {
		return zero, rc.Abort(&DecodeError{RunID: rc.RunID(), Step: s.Name, What: "output", Type: codec.TypeName[Out](), Err: err})
	}
	return out, nil
}

// nowStep records the engine clock so that replays read the same time.
var nowStep = Step[struct{}, time.Time]{
	Name: "flow.now",
	Run:  func(ctx context.Context, _ struct{}) (time.Time, error) { return engine.ClockFrom(ctx).Now(), nil },
}

// Now returns the current time, recorded on first execution so that every
// replay of the body sees the same value.
func Now(wc Context) (time.Time, error) {
	return Do(wc, nowStep, struct{}{})
}
