package flowtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// StepWorkflowPrefix starts the name of the workflows RunStep generates.
const StepWorkflowPrefix = "flowtest.step/"

// awaitSlice is how long Await waits for a settled run before it looks
// again for a due time to move the clock to.
const awaitSlice = 10 * time.Millisecond

// Register registers wf with the Env's engine, or fails the test if wf is
// invalid. Registering a name and version the Env already has does nothing:
// the first registration wins.
func Register[In, Out any](env *Env, wf flow.Workflow[In, Out]) {
	env.t.Helper()
	version := wf.Version
	if version == 0 {
		version = 1
	}
	key := fmt.Sprintf("%s@%d", wf.Name, version)
	env.mu.Lock()
	done := env.registered[key]
	env.registered[key] = true
	env.mu.Unlock()
	if done {
		return
	}
	if err := flow.RegisterSafely(env.Engine, wf); err != nil {
		env.t.Fatalf("flowtest: %v", err)
	}
}

// Start registers wf (see Register) and starts a run of it with in, or fails
// the test. opts may be nil.
func Start[In, Out any](env *Env, wf flow.Workflow[In, Out], in In, opts *flow.StartOptions) *flow.Run[Out] {
	env.t.Helper()
	Register(env, wf)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	run, err := flow.Start(ctx, env.Engine, wf, in, opts)
	if err != nil {
		env.t.Fatalf("flowtest: %v", err)
		return nil
	}
	return run
}

// Await waits until run settles and returns its result, as run.Result does:
// the output, or a *flow.RolledBackError, *flow.SuspendedError or
// *flow.CancelledError. While the run waits for a due time (a delayed start,
// a retry backoff), Await moves the clock to it, so waits of any length pass
// at once. If the run has not settled after WaitLimit of real time, Await
// fails the test with the run's state.
func Await[Out any](env *Env, run *flow.Run[Out]) (Out, error) {
	env.t.Helper()
	limit := env.WaitLimit
	if limit <= 0 {
		limit = DefaultWaitLimit
	}
	deadline := time.Now().Add(limit)
	for {
		env.advanceToDue(run.ID())
		ctx, cancel := context.WithTimeout(context.Background(), awaitSlice)
		out, err := run.Result(ctx)
		expired := ctx.Err() != nil
		cancel()
		if !expired || !errors.Is(err, context.DeadlineExceeded) {
			return out, err
		}
		if time.Now().After(deadline) {
			env.t.Fatalf("flowtest: run did not settle within %s:\n%s", limit, env.describe(run.ID()))
			return out, err
		}
	}
}

// advanceToDue moves the clock to the due time of the run if the run is
// ready to be claimed only later. A run in flight is never due later than
// now, because it is claimed only once due and the clock does not go back.
func (env *Env) advanceToDue(runID string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	info, err := env.Engine.Inspect(ctx, runID)
	if err != nil {
		return // Result reports it
	}
	switch info.Status {
	case flow.StatusPending, flow.StatusCompensating:
		if info.RunAt.After(env.Now()) {
			env.advanceTo(info.RunAt)
		}
	}
}

// RunWorkflow registers wf, runs it with in and waits for its result (see
// Start and Await). The run handle gives the run ID for Attempts,
// Compensated and History, and a way to Await the run again after an
// operator action such as Engine.Resume.
func RunWorkflow[In, Out any](env *Env, wf flow.Workflow[In, Out], in In) (Out, *flow.Run[Out], error) {
	env.t.Helper()
	run := Start(env, wf, in, nil)
	out, err := Await(env, run)
	return out, run, err
}

// RunStep runs the step s with in through the engine, inside a one-step
// workflow named StepWorkflowPrefix+s.Name, and waits for its result: its
// retry policy, timeout and checkpoint apply as in any workflow, and the
// clock moves through its retry backoffs. When the step fails for good, the
// error is the *flow.StepError that flow.Do returned, which unwraps to the
// last attempt's error. Its compensation does not run.
func RunStep[In, Out any](env *Env, s flow.Step[In, Out], in In) (Out, error) {
	env.t.Helper()
	// Each call gets its own workflow version, bound to this very step value,
	// so calls with different steps of one name never mix.
	env.mu.Lock()
	env.stepVersions[s.Name]++
	version := env.stepVersions[s.Name]
	env.mu.Unlock()

	var mu sync.Mutex
	var stepErr error
	wf := flow.Workflow[In, Out]{
		Name:    StepWorkflowPrefix + s.Name,
		Version: version,
		Run: func(wc flow.Context, in In) (Out, error) {
			out, err := flow.Do(wc, s, in)
			if se := (*flow.StepError)(nil); errors.As(err, &se) {
				mu.Lock()
				stepErr = err
				mu.Unlock()
			}
			return out, err
		},
	}
	out, _, err := RunWorkflow(env, wf, in)
	if errors.Is(err, flow.ErrRolledBack) {
		mu.Lock()
		defer mu.Unlock()
		if stepErr != nil {
			return out, stepErr
		}
	}
	return out, err
}
