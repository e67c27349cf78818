package flowtest

import (
	"context"
	"errors"

	"github.com/flowlite/flowlite/flow"
)

// ErrInjected is the error of failures injected with a nil error.
var ErrInjected = errors.New("flowtest: injected failure")

// Attempt is one step or compensation attempt as the Env's interceptor saw
// it.
type Attempt struct {
	RunID        string
	Workflow     string
	Step         string
	Occurrence   int  // how many calls of the step came before in the run
	Attempt      int  // 1-based, per step occurrence (per compensation)
	Compensation bool // the attempt ran the step's compensation
	Injected     bool // the error was injected by FailStep or FailCompensation
	// Err is what the attempt returned, before the engine adds its own
	// context (such as a timeout note); nil for a success.
	Err error
}

type faultKey struct {
	step         string
	compensation bool
}

type fault struct {
	remaining int // < 0: always
	err       error
}

// FailStep makes the next times attempts of every call of the named step
// fail with err instead of running its body; times < 0 makes every attempt
// fail, and 0 removes the rule. A nil err means ErrInjected. Wrap err with
// flow.Permanent to fail without retries. The rule applies to every run of
// the Env and replaces an earlier rule for the step.
func (env *Env) FailStep(step string, times int, err error) {
	env.setFault(faultKey{step: step}, times, err)
}

// FailCompensation is FailStep for the compensation of the named step.
func (env *Env) FailCompensation(step string, times int, err error) {
	env.setFault(faultKey{step: step, compensation: true}, times, err)
}

func (env *Env) setFault(k faultKey, times int, err error) {
	if err == nil {
		err = ErrInjected
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if times == 0 {
		delete(env.faults, k)
		return
	}
	env.faults[k] = &fault{remaining: times, err: err}
}

// takeFault consumes one injected failure for the attempt and returns its
// error, or returns nil.
func (env *Env) takeFault(info flow.AttemptInfo) error {
	k := faultKey{step: info.Step, compensation: info.Compensation}
	env.mu.Lock()
	defer env.mu.Unlock()
	f := env.faults[k]
	if f == nil {
		return nil
	}
	if f.remaining > 0 {
		f.remaining--
		if f.remaining == 0 {
			delete(env.faults, k)
		}
	}
	return f.err
}

// interceptor records every attempt and injects failures. The caller's
// interceptor, if any, wraps the body (and sees injected failures as the
// body's).
func (env *Env) interceptor(user flow.Interceptor) flow.Interceptor {
	return func(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
		injected := false
		body := func(ctx context.Context) error {
			if err := env.takeFault(info); err != nil {
				injected = true
				return err
			}
			return call(ctx)
		}
		var err error
		if user != nil {
			err = user(ctx, info, body)
		} else {
			err = body(ctx)
		}
		env.mu.Lock()
		env.attempts = append(env.attempts, Attempt{
			RunID: info.RunID, Workflow: info.Workflow.Name, Step: info.Step, Occurrence: info.Occurrence,
			Attempt: info.Attempt, Compensation: info.Compensation, Injected: injected, Err: err,
		})
		env.mu.Unlock()
		return err
	}
}

// Attempts returns every step and compensation attempt of the run, in the
// order they ended.
func (env *Env) Attempts(runID string) []Attempt {
	env.mu.Lock()
	defer env.mu.Unlock()
	var out []Attempt
	for _, a := range env.attempts {
		if a.RunID == runID {
			out = append(out, a)
		}
	}
	return out
}

// AllAttempts returns every step and compensation attempt of every run of
// the Env, in the order they ended; e.g. after RunStep, which does not
// return its run.
func (env *Env) AllAttempts() []Attempt {
	env.mu.Lock()
	defer env.mu.Unlock()
	return append([]Attempt(nil), env.attempts...)
}
