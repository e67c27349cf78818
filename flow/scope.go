package flow

import (
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// ErrScopeCancelled is what the calls of a cancellation scope return once
// the scope was cancelled (see WithCancel). It matches context.Canceled,
// and not ErrCancelled: the run goes on.
var ErrScopeCancelled = flowtype.ErrScopeCancelled

// CancelFunc cancels a cancellation scope (see WithCancel). Calls after
// the first do nothing. It is a call of the workflow body, recorded as
// such: call it from the body or one of its branches, never from a step's
// Run (a step's effects belong in the step; a RunTx step would wait for
// its own transaction).
type CancelFunc func()

// WithCancel returns the Context of a new cancellation scope inside wc,
// and the function that cancels it, as context.WithCancel does for a
// context: the workflow body can end a part of itself (a timer, a wait for
// a signal, a step, a child, branches of All or First) without cancelling
// the run, which goes on and may do more work.
//
// Calling cancel ends everything started with the scope's Context, or
// with a Context made from it (branches, inner scopes), that has not
// finished:
//
//   - Sleep, SleepUntil, Receive and Child.Result return an error matching
//     ErrScopeCancelled, at once;
//   - a step not yet begun is not begun (Do returns such an error);
//   - a running step's ctx is cancelled, with ErrScopeCancelled as its
//     cause; the step fails for good (a *StepError matching
//     ErrScopeCancelled) and is not retried, unless its body returned a
//     result regardless, which is kept; a step waiting out a retry
//     backoff fails the same way;
//   - a child started in the scope that has not finished is cancelled
//     (its unwind compensates its steps), detached or not; its Result
//     awaited outside the scope then reports a *ChildError matching
//     ErrCancelled;
//   - a StartChild, Call, All or First made in the scope after it was
//     cancelled returns the error without starting anything.
//
// What completed stays completed: steps of the scope keep their outputs,
// and if the run later fails, its unwind compensates them with the run's
// other steps, in reverse completion order. Cancelling a scope is not
// undoing it; to undo the completed steps of a cancelled part, call steps
// that do so.
//
// cancel is part of the body, so it is recorded and replayed like a
// step: a resumed run calls it at the same point and it changes nothing
// again. Its record (named "<scope>/flow.cancel") and a scope_cancelled
// event listing what it ended show in the run's history, in flowlite
// show and on the dashboard; the calls it ended show as failed with
// "scope cancelled". A scope's calls are recorded under its name,
// "scope<n>/" before their own (n counts the scopes the enclosing
// Context made), as a branch's are.
//
// The scope's Context belongs to the goroutine of wc, as wc does: pass it
// to All or First to run branches in the scope. cancel may be called from
// any branch, and more than once (only the first call counts). Cancelling
// a scope whose work has all finished records the cancel and ends
// nothing. Do not branch on the scope's Err or Done in the body: whether a
// parallel branch's cancel came before some point is decided by the
// records, which the calls' errors report the same way on every replay.
func WithCancel(wc Context) (Context, CancelFunc) {
	sc, cancel := wc.runContext().WithCancel()
	return workflowContext{sc, wc.engine()}, cancel
}

// Timeout runs fn in a cancellation scope that is cancelled once d has
// passed on the engine clock, as a durable timer: a timeout that survives
// restarts and replays the same way. fn's own result is returned when it
// finishes first, or when it returns a result although the time was up
// (a step that completed regardless). When the time is up first, fn's
// calls end as WithCancel describes, and Timeout returns fn's error
// wrapped with "timed out after d": it matches ErrScopeCancelled (and
// context.Canceled) when fn returned the error of a call the timeout
// ended.
//
// It is WithCancel and All: fn runs in one branch, a Sleep of d in the
// other, and whichever finishes first cancels the scope, so the timer's
// record ends when fn does. The scope's calls are recorded under its name
// (scope<n>/all0.0/ for fn's), and one more call records its cancel; an
// execution that parked on the timer while fn finished resumes at once.
func Timeout[T any](wc Context, d time.Duration, fn func(Context) (T, error)) (T, error) {
	var zero, out T
	var fnErr error
	var timedOut bool
	sc, cancel := WithCancel(wc)
	_, err := All(sc,
		func(b Context) (struct{}, error) {
			out, fnErr = fn(b)
			if !b.runContext().Stopped() {
				cancel() // fn returned: its timer ends
			}
			return struct{}{}, fnErr
		},
		func(b Context) (struct{}, error) {
			err := Sleep(b, d)
			if errors.Is(err, ErrScopeCancelled) {
				return struct{}{}, nil // fn finished first
			}
			if err != nil {
				return struct{}{}, err // the run stops (the timer parks)
			}
			timedOut = true
			cancel()
			return struct{}{}, nil
		})
	if err != nil && (fnErr == nil || !errors.Is(err, fnErr)) {
		return zero, err // the run stops: a branch parked, or it must stop
	}
	if fnErr != nil && timedOut {
		return zero, fmt.Errorf("timed out after %s: %w", d, fnErr)
	}
	if fnErr != nil {
		return zero, fnErr
	}
	return out, nil
}
