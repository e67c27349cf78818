package flow

import (
	"github.com/flowlite/flowlite/flow/flowtype"
)

// ErrScopeCancelled is what the calls of a cancellation scope return once
// the scope was cancelled (see WithCancel). It matches context.Canceled,
// and not ErrCancelled: the run goes on.
var ErrScopeCancelled = flowtype.ErrScopeCancelled

// CancelFunc cancels a cancellation scope (see WithCancel). Calls after
// the first do nothing.
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
