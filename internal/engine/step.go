package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Step execution: a workflow body's step call is matched to its record,
// and a new one runs as attempts, each recorded before its body runs and
// checkpointed after, retried by its policy when it fails.

// lookup resolves a call of name in this context: its key, and its record
// when the call completed or failed in an earlier execution. Outside a
// replay-only unwind it also registers def for the unwind.
func (rc *RunContext) lookup(name string, def *Step) (store.StepKey, *store.Step, error) {
	key := store.StepKey{RunID: rc.RunID(), Name: rc.scope + name, Occurrence: rc.NextOccurrence(name)}
	position := rc.calls
	rc.calls++
	st := rc.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.history.check(rc.scope, position, key); err != nil {
		return key, nil, st.abortLocked(err)
	}
	// Recorded calls replay even once the execution must stop, so that every
	// branch registers the steps it completed, which an unwind compensates,
	// however early a sibling stopped the execution.
	if def != nil {
		st.defs[key] = *def
	}
	if rec, ok := st.records[key]; ok && (rec.Status == store.StepCompleted || rec.Status == store.StepFailed) {
		return key, &rec, nil
	}
	if st.aborted != nil {
		return key, nil, st.aborted
	}
	if rc.lane().parked {
		return key, nil, errParked
	}
	if rc.settled || rc.lostRace() {
		return key, nil, ErrLostRace
	}
	if rc.cscope != nil && st.scopeCancelledLocked(rc.cscope) {
		return key, nil, fmt.Errorf("%s: %w", describeCall(strings.TrimPrefix(key.Name, rc.scope)), flowtype.ErrScopeCancelled)
	}
	if st.replayOnly {
		return key, nil, st.abortLocked(&ReplayError{RunID: key.RunID, Step: key.String()})
	}
	if _, retried := st.records[key]; !retried {
		var input []byte
		if def != nil {
			input = def.Input
		}
		if err := st.admitCall(key, input); err != nil {
			return key, nil, st.abortLocked(err)
		}
	}
	return key, nil, nil
}

// Step returns the recorded output of this step call, or executes it. An
// error is either a *StepError (the step failed for good; the body may
// handle it) or the reason the execution stops, which the body should
// return.
func (rc *RunContext) Step(def Step) ([]byte, error) {
	key, rec, err := rc.lookup(def.Name, &def)
	if errors.Is(err, flowtype.ErrScopeCancelled) {
		return nil, rc.endCancelled(key, err)
	}
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec.Status == store.StepFailed {
			return nil, &flowtype.StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence,
				Attempts: rec.Attempts, Err: recordedError(rec.Error, rec.Failure)}
		}
		return rec.Output, nil
	}
	if cause := rc.cause(); cause != nil {
		return nil, rc.Abort(cause)
	}
	return rc.st.x.runStep(rc, key, def)
}

// errBodyFailed rolls back a transactional step's transaction when its body
// returned an error.
var errBodyFailed = errors.New("step body failed")

// errBodyRan fails a transactional step's write that is tried again after
// the transaction its body ran in was lost: the body runs at most once per
// attempt, and the next attempt runs it again, recorded as such.
var errBodyRan = errors.New("the transaction of the step's attempt was lost after its body ran")

// runStep executes one attempt of a step and records its outcome.
func (x *execution) runStep(rc *RunContext, key store.StepKey, def Step) ([]byte, error) {
	rc.st.mu.Lock()
	prior, recorded := rc.st.records[key]
	rc.st.mu.Unlock()
	if recorded && prior.Status == store.StepRunning && prior.Attempts >= def.Retry.MaxAttempts {
		// The last attempt began in an earlier execution and never ended:
		// its worker crashed, stopped or lost its lease. It counts, so the
		// body is not called beyond the policy's attempts.
		interrupted := fmt.Errorf("attempt %d of %d was interrupted (its worker stopped or lost the run's lease) and no attempt is left",
			prior.Attempts, def.Retry.MaxAttempts)
		return nil, x.stepFailed(rc, key, def, prior.Attempts, &flowtype.PermanentError{Err: interrupted})
	}
	attempt, begun := x.takeBegun(key)
	if !begun {
		var heldUntil int64 // the step's rate limiter had no start left
		elsewhere, unlock, err := x.lockStepRate(rc.Context, def.RateLimit)
		if err != nil {
			return nil, rc.Abort(err)
		}
		err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
			var err error
			if def.RateLimit != nil {
				if heldUntil, err = x.takeStepRate(ctx, tx, def.RateLimit, now, elsewhere); err != nil || heldUntil > 0 {
					return err
				}
			}
			// The execution read every record of the run when it began
			// (or there were none), so an unrecorded step is most likely new.
			p := store.StepBeginParams{Key: key, Input: def.Input, Position: rc.st.position(key), Now: now, New: !recorded}
			if attempt, err = tx.StepBegin(ctx, p); err != nil {
				return err
			}
			return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventStepStarted, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt})
		})
		unlock() // after the commit that took the start
		if err != nil {
			return nil, rc.Abort(err)
		}
		if heldUntil > 0 {
			return nil, rc.parkFor(heldUntil, true, rateHeldWhy(key.Name, def.RateLimit, heldUntil))
		}
	}
	if rc.scopeCancelled() {
		// Its scope was cancelled since the call checked it: the attempt
		// ends before its body runs.
		return nil, x.scopeStepFailed(rc, key, attempt, nil)
	}
	var err error

	prog := x.newProgress(key, attempt)
	defer prog.end(false) // when no outcome took its last value (a lost write)
	completed := func(output []byte) checkpoint {
		p := store.StepCompleteParams{Key: key, Output: output, Compensable: def.Compensate != nil, Now: x.e.nowMs()}
		return checkpoint{step: p, attempt: attempt, progress: prog.end(def.Transactional)}
	}
	var output []byte
	var bodyErr error
	if def.Transactional {
		ran := false
		err = x.writeOnce(func(ctx context.Context, tx store.Tx, now int64) error {
			if ran {
				return errBodyRan
			}
			ran = true
			if output, bodyErr = x.callStep(rc, key, def, attempt, prog, nil, tx.SQL()); bodyErr != nil {
				return errBodyFailed
			}
			return x.writeCheckpoint(ctx, tx, completed(output))
		})
	} else {
		// The attempt's last stream writes commit with its outcome
		// (stream.go): with its checkpoint, or before its failure.
		sb := x.newStreamBuffer(key, attempt)
		var streams stepStreams
		if output, bodyErr = x.callStep(rc, key, def, attempt, prog, sb, nil); bodyErr == nil {
			streams, bodyErr = sb.endCompleted(rc.Context)
		}
		if bodyErr == nil {
			// The checkpoint commits with the run's next transaction, which
			// comes before anything can depend on it.
			c := completed(output)
			c.streams = streams
			x.later(c)
		} else {
			sb.endFailed()
		}
	}
	if bodyErr == nil {
		if err != nil {
			return nil, rc.Abort(err)
		}
		rc.st.addOutput(output)
		return output, nil
	}
	x.endProgress(prog) // its outcome's write carries the last value
	if err != nil && !errors.Is(err, errBodyFailed) {
		return nil, rc.Abort(err)
	}
	return nil, x.stepFailed(rc, key, def, attempt, bodyErr)
}

// stepFailed records a failed attempt: the step fails for good, or the run
// is released until its next attempt is due.
func (x *execution) stepFailed(rc *RunContext, key store.StepKey, def Step, attempt int, bodyErr error) error {
	if rc.lostRace() {
		// Another branch won the race: the attempt is interrupted, not failed.
		return ErrLostRace
	}
	cause := rc.cause()
	if cause != nil && !errors.Is(cause, flowtype.ErrCancelled) {
		// Stopping or lease lost: the attempt is interrupted, not failed.
		return rc.Abort(cause)
	}
	if cause == nil && rc.scopeCancelled() {
		// The body's scope was cancelled: the attempt ended with it, and the
		// step is not retried.
		return x.scopeStepFailed(rc, key, attempt, bodyErr)
	}
	if cause == nil {
		if err, ok := x.jobControl(rc, key, attempt, bodyErr); ok {
			return err // snoozed, or cancelled by the step (see jobcontrol.go)
		}
	}
	final := cause != nil || finalAttempt(def.Retry, attempt, bodyErr)
	msg := bodyErr.Error()
	if cause != nil {
		msg = "cancelled: " + msg
	}
	var delay time.Duration
	if !final {
		delay = def.Retry.Backoff(attempt)
	}
	failure := failureOf(bodyErr)
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.StepFail(ctx, store.StepFailParams{Key: key, Error: msg, Failure: failure, Final: final, Now: now}); err != nil {
			return err
		}
		ev := store.Event{Kind: flowtype.EventStepFailed, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt, Detail: msg}
		if final {
			return x.event(ctx, tx, now, ev)
		}
		ev.Kind, ev.Detail = flowtype.EventStepRetried, fmt.Sprintf("%s; next attempt in %s", msg, delay.Round(time.Millisecond))
		return x.event(ctx, tx, now, ev)
	})
	if err != nil {
		return rc.Abort(err)
	}
	if cause != nil {
		return rc.Abort(cause)
	}
	if !final {
		return rc.park(x.e.nowMs()+delay.Milliseconds(), true)
	}
	// The body gets the error as the history has it, as a replay will.
	return &flowtype.StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence, Attempts: attempt, Err: recordedError(msg, failure)}
}

// callStep runs one attempt of a step body under its timeout and the
// engine's interceptor; the body's context carries prog for SetProgress
// and, unless nil (a RunTx step's), streams for WriteStreamStep.
func (x *execution) callStep(rc *RunContext, key store.StepKey, def Step, attempt int, prog *progressSlot, streams *streamBuffer, tx *sql.Tx) ([]byte, error) {
	var output []byte
	info := flowtype.AttemptInfo{RunID: key.RunID, Workflow: x.def.Key, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt}
	err := x.callAttempt(rc.Context, info, def.Timeout, func(ctx context.Context) error {
		var err error
		ctx = context.WithValue(ctx, progressKey{}, prog)
		if streams != nil {
			ctx = context.WithValue(ctx, streamBufferCtxKey{}, streams)
		}
		output, err = def.Run(ctx, tx)
		if err == nil && tx != nil {
			// The shared transaction runs the body's statements detached
			// from ctx (an interrupt would roll back the other callers of
			// its group commit), so a statement that outlived the timeout
			// completed: the attempt fails here instead, and its writes
			// are rolled back with it.
			err = ctx.Err()
		}
		return err
	})
	if err == nil {
		// An output over the limit would fail the same way on every attempt:
		// the step fails for good, with a code the workflow can match
		// (flowtype.ErrPayloadTooLarge), and a transactional step's writes
		// roll back with it.
		if tooLarge := x.e.CheckPayload("output of step "+key.Name, output); tooLarge != nil {
			return nil, &flowtype.PermanentError{Err: &flowtype.Error{Code: flowtype.CodePayloadTooLarge, Message: tooLarge.Error()}}
		}
	}
	return output, err
}

// callAttempt runs body with a per-attempt timeout, through the interceptor,
// with panics turned into errors.
func (x *execution) callAttempt(parent context.Context, info flowtype.AttemptInfo, timeout time.Duration, body func(context.Context) error) error {
	defer x.e.metrics.observeAttempt(info, time.Now())
	ctx := context.WithValue(parent, attemptKey{}, info)
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

type attemptKey struct{}

// AttemptFrom returns the attempt a step or compensation body runs as.
func AttemptFrom(ctx context.Context) (flowtype.AttemptInfo, bool) {
	info, ok := ctx.Value(attemptKey{}).(flowtype.AttemptInfo)
	return info, ok
}
