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

// Handle is a run with a typed result: a *flow.Run[Out], or a handle that
// wraps one, such as *flowdef.Run or the run handle flowdefgen generates
// (whose Result is the definition's typed output struct).
type Handle[Out any] interface {
	ID() string
	Result(ctx context.Context) (Out, error)
}

// Await waits until run settles and returns its result, as run.Result does:
// the output, or a *flow.RolledBackError, *flow.SuspendedError or
// *flow.CancelledError. Whenever the engine is idle (no run in flight, none
// ready), Await moves the clock to the next time anything in the Env is
// due: a delayed start, a retry backoff, a flow.Sleep, a Receive timeout, a
// run's deadline, a schedule's next slot, for the awaited run or any other
// (a child it waits for, say). So every durable wait passes at once, in the
// order real time would pass them. Each move goes to the earliest such
// time, never past the awaited run's own next due time, and the clock stops
// once the awaited run settled: Await returns with the clock where the run
// finished, even while other runs of the Env are due later. A wait that no
// time ends (a Receive without timeout whose signal nobody sends) is not
// skipped: if the run has not settled after WaitLimit of real time, Await
// fails the test with the run's state.
func Await[Out any](env *Env, run Handle[Out]) (Out, error) {
	env.t.Helper()
	var out Out
	var err error
	env.awaitUntil(run.ID(), func() bool {
		deadline := time.Now().Add(awaitSlice)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		out, err = run.Result(ctx)
		// An error that comes with the end of the slice is no answer, and a
		// real failure shows again in the next slice. The end is the
		// context's error, or the deadline error a driver can return a
		// moment before the context's timer marks it (pgx, when its dialer
		// times out first).
		ended := ctx.Err() != nil ||
			errors.Is(err, context.DeadlineExceeded) && time.Until(deadline) < time.Millisecond
		return err == nil || !ended
	})
	return out, err
}

// AwaitSlot waits until the schedule name (see flow.Schedule) starts its run
// for slot, moving the clock there as Await does, then awaits that run and
// returns its result. wf is the scheduled workflow; slot is a time of the
// schedule's spec, e.g. the schedule's NextAt. If the run has neither
// started nor settled after WaitLimit of real time, AwaitSlot fails the
// test.
func AwaitSlot[In, Out any](env *Env, wf flow.Workflow[In, Out], name string, slot time.Time) (Out, error) {
	env.t.Helper()
	id := flow.ScheduledRunID(name, slot)
	var run *flow.Run[Out]
	var lookupErr error
	env.awaitUntil(id, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		run, lookupErr = flow.Lookup(ctx, env.Engine, wf, id)
		if errors.Is(lookupErr, flow.ErrRunNotFound) {
			time.Sleep(awaitSlice)
			return false
		}
		return true
	})
	if lookupErr != nil {
		env.t.Fatalf("flowtest: run of schedule %s for slot %s: %v", name, slot.UTC().Format(time.RFC3339), lookupErr)
		var zero Out
		return zero, lookupErr
	}
	return Await(env, run)
}

// awaitUntil calls done, moving the clock whenever the engine is idle (see
// Await), until done returns true. Each call of done should block for up
// to about awaitSlice. After WaitLimit of real time it fails the test with
// the state of the run runID.
func (env *Env) awaitUntil(runID string, done func() bool) {
	env.t.Helper()
	limit := env.WaitLimit
	if limit <= 0 {
		limit = DefaultWaitLimit
	}
	deadline := time.Now().Add(limit)
	for {
		env.advanceWhenIdle(runID)
		if done() {
			return
		}
		if time.Now().After(deadline) {
			env.t.Fatalf("flowtest: run did not settle within %s:\n%s", limit, env.describe(runID))
			return
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
