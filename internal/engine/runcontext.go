package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/internal/store"
)

// RunContext is what a workflow body runs with: the run's context plus its
// recorded steps. Each Step call is matched to a record by step name and
// occurrence (how many times the body called a step of that name before),
// so a resumed body gets recorded outputs back and only new steps execute.
type RunContext struct {
	context.Context
	x *execution

	mu          sync.Mutex
	records     map[store.StepKey]store.Step
	occurrences map[string]int
	defs        map[store.StepKey]Step // every step the body called, for the unwind
	replayOnly  bool                   // no step may execute: the run is unwinding
	aborted     error
}

func newRunContext(x *execution, steps []store.Step) *RunContext {
	rc := &RunContext{
		Context:     x.runCtx,
		x:           x,
		records:     make(map[store.StepKey]store.Step, len(steps)),
		occurrences: make(map[string]int),
		defs:        make(map[store.StepKey]Step),
	}
	for _, s := range steps {
		rc.records[s.Key()] = s
	}
	return rc
}

// RunID returns the ID of the run.
func (rc *RunContext) RunID() string { return rc.x.run.ID }

// Workflow returns the workflow version of the run.
func (rc *RunContext) Workflow() store.WorkflowKey { return rc.x.def.Key }

// Now returns the engine clock's time.
func (rc *RunContext) Now() time.Time { return rc.x.e.now() }

// Abort ends the execution of the run with cause: the body's further step
// calls return it, and the engine acts on it once the body returns (a
// DecodeError suspends the run).
func (rc *RunContext) Abort(cause error) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.abortLocked(cause)
}

func (rc *RunContext) abortLocked(cause error) error {
	if rc.aborted == nil {
		rc.aborted = cause
	}
	return rc.aborted
}

// cause returns why the execution must stop, or nil.
func (rc *RunContext) cause() error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.aborted != nil {
		return rc.aborted
	}
	if rc.x.runCtx.Err() != nil {
		return context.Cause(rc.x.runCtx)
	}
	return nil
}

// callWorkflow runs the workflow body with panics turned into errors.
func (rc *RunContext) callWorkflow() (output []byte, err error) {
	err = callWithRecover("workflow "+rc.x.def.Key.String(), func() error {
		var err error
		output, err = rc.x.def.Run(rc, rc.x.run.Input)
		return err
	})
	return output, err
}

// Step returns the recorded output of this step call, or executes it. An
// error is either a *StepError (the step failed for good; the body may
// handle it) or the reason the execution stops, which the body should
// return.
func (rc *RunContext) Step(def Step) ([]byte, error) {
	rc.mu.Lock()
	if rc.aborted != nil {
		defer rc.mu.Unlock()
		return nil, rc.aborted
	}
	key := store.StepKey{RunID: rc.x.run.ID, Name: def.Name, Occurrence: rc.occurrences[def.Name]}
	rc.occurrences[def.Name]++
	rc.defs[key] = def
	rec, recorded := rc.records[key]
	if recorded && rec.Status == store.StepCompleted {
		rc.mu.Unlock()
		return rec.Output, nil
	}
	if recorded && rec.Status == store.StepFailed {
		rc.mu.Unlock()
		return nil, &StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence,
			Attempts: rec.Attempts, Err: &RecordedError{Message: rec.Error}}
	}
	if rc.replayOnly {
		defer rc.mu.Unlock()
		return nil, rc.abortLocked(&ReplayError{RunID: key.RunID, Step: key.String()})
	}
	rc.mu.Unlock()
	if cause := rc.cause(); cause != nil {
		return nil, rc.Abort(cause)
	}
	return rc.x.runStep(rc, key, def)
}

// errBodyFailed rolls back a transactional step's transaction when its body
// returned an error.
var errBodyFailed = errors.New("step body failed")

// runStep executes one attempt of a step and records its outcome.
func (x *execution) runStep(rc *RunContext, key store.StepKey, def Step) ([]byte, error) {
	var attempt int
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		var err error
		if attempt, err = tx.StepBegin(ctx, store.StepBeginParams{Key: key, Input: def.Input, Now: now}); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: EventStepStarted, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt})
	})
	if err != nil {
		return nil, rc.Abort(err)
	}

	complete := func(ctx context.Context, tx store.Tx, now int64, output []byte) error {
		err := tx.StepComplete(ctx, store.StepCompleteParams{Key: key, Output: output, Compensable: def.Compensate != nil, Now: now})
		if err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: EventStepCompleted, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt})
	}
	var output []byte
	var bodyErr error
	if def.Transactional {
		err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
			if output, bodyErr = x.callStep(key, def, attempt, tx.SQL()); bodyErr != nil {
				return errBodyFailed
			}
			return complete(ctx, tx, x.e.nowMs(), output)
		})
	} else {
		if output, bodyErr = x.callStep(key, def, attempt, nil); bodyErr == nil {
			err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
				return complete(ctx, tx, now, output)
			})
		}
	}
	if bodyErr == nil {
		if err != nil {
			return nil, rc.Abort(err)
		}
		return output, nil
	}
	if err != nil && !errors.Is(err, errBodyFailed) {
		return nil, rc.Abort(err)
	}
	return nil, x.stepFailed(rc, key, def, attempt, bodyErr)
}

// stepFailed records a failed attempt: the step fails for good, or the run
// is released until its next attempt is due.
func (x *execution) stepFailed(rc *RunContext, key store.StepKey, def Step, attempt int, bodyErr error) error {
	cause := rc.cause()
	if cause != nil && !errors.Is(cause, ErrCancelled) {
		// Stopping or lease lost: the attempt is interrupted, not failed.
		return rc.Abort(cause)
	}
	final := cause != nil || def.Retry.final(attempt, bodyErr)
	msg := bodyErr.Error()
	if cause != nil {
		msg = "cancelled: " + msg
	}
	var delay time.Duration
	if !final {
		delay = def.Retry.Backoff(attempt)
	}
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.StepFail(ctx, store.StepFailParams{Key: key, Error: msg, Final: final, Now: now}); err != nil {
			return err
		}
		ev := store.Event{Kind: EventStepFailed, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt, Detail: msg}
		if final {
			return x.event(ctx, tx, now, ev)
		}
		ev.Kind, ev.Detail = EventStepRetried, fmt.Sprintf("%s; next attempt in %s", msg, delay.Round(time.Millisecond))
		if err := x.event(ctx, tx, now, ev); err != nil {
			return err
		}
		return tx.RunRelease(ctx, x.lease, now+delay.Milliseconds(), now)
	})
	if err != nil {
		return rc.Abort(err)
	}
	if cause != nil {
		return rc.Abort(cause)
	}
	if !final {
		x.e.wakeAfter(x.run.Queue, delay)
		return rc.Abort(errRetryScheduled)
	}
	return &StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence, Attempts: attempt, Err: bodyErr}
}

// callStep runs one attempt of a step body under its timeout and the
// engine's interceptor.
func (x *execution) callStep(key store.StepKey, def Step, attempt int, tx *sql.Tx) ([]byte, error) {
	var output []byte
	info := StepInfo{RunID: key.RunID, Workflow: x.def.Key, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt}
	err := x.callAttempt(x.runCtx, info, def.Timeout, func(ctx context.Context) error {
		var err error
		output, err = def.Run(ctx, tx)
		return err
	})
	return output, err
}

// callAttempt runs body with a per-attempt timeout, through the interceptor,
// with panics turned into errors.
func (x *execution) callAttempt(parent context.Context, info StepInfo, timeout time.Duration, body func(context.Context) error) error {
	ctx := context.WithValue(parent, stepInfoKey{}, info)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	what := "step " + info.Step
	if info.Compensation {
		what = "compensation of step " + info.Step
	}
	call := func(ctx context.Context) error { return callWithRecover(what, func() error { return body(ctx) }) }
	var err error
	if x.e.cfg.Intercept != nil {
		err = callWithRecover("interceptor", func() error { return x.e.cfg.Intercept(ctx, info, call) })
	} else {
		err = call(ctx)
	}
	if err != nil && timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		err = fmt.Errorf("attempt %d timed out after %s: %w", info.Attempt, timeout, err)
	}
	return err
}

// DefaultRetry returns the engine's default retry policy.
func (rc *RunContext) DefaultRetry() RetryPolicy { return rc.x.e.cfg.DefaultRetry }

type stepInfoKey struct{}

// StepInfoFrom returns the attempt a step or compensation body runs as.
func StepInfoFrom(ctx context.Context) (StepInfo, bool) {
	info, ok := ctx.Value(stepInfoKey{}).(StepInfo)
	return info, ok
}
