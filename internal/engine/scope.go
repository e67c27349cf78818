package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Cancellation scopes: a part of a workflow body that the body itself can
// cancel, without cancelling the run (flow.WithCancel).
//
// A scope's calls are keyed under a prefix of their own, "scope<n>/" after
// the prefix of the context it was made from (n counts the scopes that
// context made), so that its records say which scope they belong to. The
// cancel is a call of the scope, recorded as "<prefix>flow.cancel" in the
// transaction that also ends what the scope left open: its waits and the
// steps waiting out a retry fail with flowtype.ErrScopeCancelled, and its
// unfinished children are cancelled. Its running steps see their context
// end and fail the same way when they return.
//
// Replays are deterministic because the records decide: a call of the
// scope with an outcome returns it, and a call without one returns
// ErrScopeCancelled once the scope's cancel is recorded, from the start of
// every later execution (cancelledScopes), whatever the order in which
// parallel branches reach their calls.

// cancelScope is one cancellation scope of an execution.
type cancelScope struct {
	parent *cancelScope // the enclosing scope; nil at the outermost
	prefix string       // the key prefix of its calls
	cancel context.CancelCauseFunc
	called bool // the body called the cancel in this execution (guarded by scopeMu)
}

// cancelCall is the name of a scope's cancel record, after its prefix.
const cancelCall = "flow.cancel"

// cancelledScopes returns the prefixes of the scopes whose cancel a run
// recorded.
func cancelledScopes(steps []store.Step) map[string]bool {
	cancelled := make(map[string]bool)
	for _, s := range steps {
		if prefix, ok := strings.CutSuffix(s.Name, cancelCall); ok && strings.HasSuffix(prefix, "/") &&
			scopeOf(s.Name) == prefix && s.Status == store.StepCompleted {
			cancelled[prefix] = true
		}
	}
	return cancelled
}

// WithCancel returns the context of a new cancellation scope inside rc,
// and the function that cancels it. The scope's context belongs to rc's
// goroutine, as rc does; parallel calls made with it (All, First) run
// their branches in the scope. The cancel function may be called from any
// branch, more than once: calls after the first do nothing.
func (rc *RunContext) WithCancel() (*RunContext, func()) {
	n := rc.NextOccurrence("flow.scope")
	ctx, cancel := context.WithCancelCause(rc.Context)
	s := &cancelScope{parent: rc.cscope, prefix: fmt.Sprintf("%sscope%d/", rc.scope, n), cancel: cancel}
	sc := &RunContext{
		Context: ctx, st: rc.st, scope: s.prefix, occurrences: make(map[string]int),
		settled: rc.settled, cscope: s, owner: rc.lane(),
	}
	return sc, sc.cancelScope
}

// scopeCancelledLocked reports whether s or a scope around it is
// cancelled, with st.mu held.
func (st *runState) scopeCancelledLocked(s *cancelScope) bool {
	for ; s != nil; s = s.parent {
		if st.cancelled[s.prefix] {
			return true
		}
	}
	return false
}

// scopeCancelled reports whether rc's calls are in a cancelled scope.
func (rc *RunContext) scopeCancelled() bool {
	if rc.cscope == nil {
		return false
	}
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	return rc.st.scopeCancelledLocked(rc.cscope)
}

// holdScope keeps rc's scope from being cancelled between a call's check
// of it and the call's write, so that a cancel finds every call the scope
// began; the returned function lets go. Outside a scope it does nothing.
func (rc *RunContext) holdScope() func() {
	if rc.cscope == nil {
		return func() {}
	}
	rc.st.scopeMu.RLock()
	return rc.st.scopeMu.RUnlock
}

// scopeCancelledFailure is the recorded shape of a call a scope's cancel
// ended.
var scopeCancelledFailure = store.Failure{Code: flowtype.CodeScopeCancelled, Permanent: true}

// cancelScope cancels rc's scope: see the comment at the top of the file.
func (rc *RunContext) cancelScope() {
	st := rc.st
	st.scopeMu.Lock()
	defer st.scopeMu.Unlock()
	s := rc.cscope
	if s.called {
		return // only the first call counts
	}
	s.called = true
	// A cancel recorded by an earlier execution is a call like any other:
	// its lookup replays it (and marks it visited for the replay checks).
	key, rec, err := rc.lookup(cancelCall, nil)
	if errors.Is(err, flowtype.ErrScopeCancelled) {
		return // an enclosing scope was cancelled, and this one with it
	}
	if err != nil {
		return // the execution stops: the body's next call returns why
	}
	st.mu.Lock()
	st.cancelled[s.prefix] = true
	st.mu.Unlock()
	s.cancel(flowtype.ErrScopeCancelled)
	if rec != nil {
		return // a replay: the cancel's effects were recorded with it
	}
	if cause := rc.cause(); cause != nil {
		_ = rc.Abort(cause)
		return
	}
	x := st.x
	var ended endedCalls
	err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		ended = endedCalls{}
		if err := ended.end(ctx, x, tx, s.prefix, now); err != nil {
			return err
		}
		if _, err := tx.StepBegin(ctx, store.StepBeginParams{Key: key, Input: []byte("null"), Position: st.position(key), Now: now}); err != nil {
			return err
		}
		if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: key, Output: []byte("null"), Now: now}); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventScopeCancelled, Step: key.Name, Occurrence: key.Occurrence, Detail: ended.detail()})
	})
	if err != nil {
		_ = rc.Abort(err)
		return
	}
	ended.settle(rc)
}

// endedCalls is what one scope's cancel ended, for its event and for the
// execution's state once it committed.
type endedCalls struct {
	closed   []store.StepKey // waits and retrying steps, now failed
	children []string        // children asked to cancel, theirs included
	queues   []string
	finished int // runs cancelled at once
	names    []string
}

// end ends, in tx, the open calls of the scope with key prefix prefix and
// of the scopes and branches inside it: waits and steps waiting out a
// retry fail, and children that have not finished are cancelled as Cancel
// cancels a run, detached ones too (detaching is about the parent's end;
// a scope's cancel is the body's own decision about the child). Running
// steps are left to their context.
func (ended *endedCalls) end(ctx context.Context, x *execution, tx store.Tx, prefix string, now int64) error {
	steps, err := tx.StepList(ctx, x.run.ID)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if !strings.HasPrefix(s.Name, prefix) {
			continue
		}
		call := strings.TrimPrefix(s.Name, scopeOf(s.Name))
		switch {
		case s.Status == store.StepWaiting || s.Status == store.StepRetrying:
			msg := flowtype.ErrScopeCancelled.Error()
			if err := tx.StepCancel(ctx, store.StepFailParams{Key: s.Key(), Error: msg, Failure: scopeCancelledFailure, Now: now}); err != nil {
				return err
			}
			ev := store.Event{Kind: flowtype.EventStepFailed, Step: s.Name, Occurrence: s.Occurrence, Attempt: s.Attempts, Detail: msg}
			if err := x.event(ctx, tx, now, ev); err != nil {
				return err
			}
			ended.closed = append(ended.closed, s.Key())
			ended.names = append(ended.names, fmt.Sprintf("%s#%d (%s)", s.Name, s.Occurrence, s.Status))
		case s.Status == store.StepCompleted && strings.HasPrefix(call, "flow.child:"):
			var id string
			if err := json.Unmarshal(s.Output, &id); err != nil {
				return &flowtype.DecodeError{RunID: x.run.ID, Step: s.Name, What: "output", Type: "child run ID", Err: err}
			}
			why := fmt.Sprintf("scope %s of parent %s was cancelled", strings.TrimSuffix(prefix, "/"), x.run.ID)
			queue, children, n, err := x.e.cancelTx(ctx, tx, id, now, why)
			if errors.Is(err, flowtype.ErrRunFinished) {
				continue
			}
			if err != nil {
				return err
			}
			ended.children = append(append(ended.children, id), children...)
			ended.queues = append(ended.queues, queue)
			ended.finished += n
			ended.names = append(ended.names, "child "+id)
		}
	}
	return nil
}

// detail is the scope_cancelled event's detail.
func (ended *endedCalls) detail() string {
	if len(ended.names) == 0 {
		return "nothing was left open"
	}
	return "ended: " + strings.Join(ended.names, ", ")
}

// settle brings the execution in line with a committed cancel: the calls
// it failed are failed here too, a branch parked on one of them runs again
// at once rather than at its due time, and the cancelled children hear of
// it now.
func (ended *endedCalls) settle(rc *RunContext) {
	st := rc.st
	x := st.x
	if len(ended.closed) > 0 {
		now := x.e.nowMs()
		st.mu.Lock()
		for _, key := range ended.closed {
			if rec, ok := st.records[key]; ok {
				rec.Status, rec.Error, rec.Failure = store.StepFailed, flowtype.ErrScopeCancelled.Error(), scopeCancelledFailure
				st.records[key] = rec
			}
		}
		// Runs again now if it parks, rather than when the ended waits
		// were due: a parallel branch may have parked on one of them.
		if !st.parked || now < st.parkAt {
			st.parkAt, st.parkWhy = now, "a cancelled scope's calls ended"
		}
		st.parked = true
		st.mu.Unlock()
	}
	if len(ended.children) > 0 {
		x.e.cancelActive(ended.children)
		for range ended.finished {
			x.e.metrics.runFinished(flowtype.StatusCancelled)
		}
		x.e.settled()
		for _, q := range ended.queues {
			x.e.Wake(q)
		}
		x.e.WakeAll()
	}
}

// endCancelled records that the call key, which a cancelled scope reached
// with a record still open (a wait, or a step waiting out a retry or whose
// attempt was interrupted), ended with err, the scope's cancellation, and
// returns err.
func (rc *RunContext) endCancelled(key store.StepKey, err error) error {
	st := rc.st
	st.mu.Lock()
	rec, open := st.records[key]
	open = open && rec.Status != store.StepCompleted && rec.Status != store.StepFailed
	st.mu.Unlock()
	if !open || rc.replayOnly() {
		return err
	}
	x := st.x
	msg := flowtype.ErrScopeCancelled.Error()
	werr := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.StepCancel(ctx, store.StepFailParams{Key: key, Error: msg, Failure: scopeCancelledFailure, Now: now}); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventStepFailed, Step: key.Name, Occurrence: key.Occurrence, Attempt: rec.Attempts, Detail: msg})
	})
	if werr != nil {
		return rc.Abort(werr)
	}
	st.mu.Lock()
	rec.Status, rec.Error, rec.Failure = store.StepFailed, msg, scopeCancelledFailure
	st.records[key] = rec
	st.mu.Unlock()
	return err
}

// scopeStepFailed records that a step's attempt ended because its scope
// was cancelled: the step fails for good with ErrScopeCancelled, not
// retried, whatever the attempt returned.
func (x *execution) scopeStepFailed(rc *RunContext, key store.StepKey, attempt int, bodyErr error) error {
	msg := flowtype.ErrScopeCancelled.Error()
	if bodyErr != nil && !errors.Is(bodyErr, context.Canceled) {
		msg += ": " + bodyErr.Error()
	}
	err := x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		if err := tx.StepFail(ctx, store.StepFailParams{Key: key, Error: msg, Failure: scopeCancelledFailure, Final: true, Now: now}); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventStepFailed, Step: key.Name, Occurrence: key.Occurrence, Attempt: attempt, Detail: msg})
	})
	if err != nil {
		return rc.Abort(err)
	}
	return &flowtype.StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence, Attempts: attempt, Err: recordedError(msg, scopeCancelledFailure)}
}

// Stopped reports whether rc's calls stop in this execution, whatever they
// returned: its branch parked (a wait, a retry backoff), it lost a race,
// or the run must stop. A helper that acts once a function of the body
// returned (flow.Timeout cancels its timer) must not act on a function
// that only stopped: the next execution takes it further.
func (rc *RunContext) Stopped() bool {
	if rc.lostRace() || rc.cause() != nil {
		return true
	}
	rc.st.mu.Lock()
	defer rc.st.mu.Unlock()
	return rc.lane().parked
}
