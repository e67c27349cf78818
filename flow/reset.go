package flow

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
)

// Event kinds of going back in a run's history.
const (
	// EventRunReset: the run went back to one of its calls (Reset) or was
	// brought back (Revive), and is pending again under its own ID.
	// Detail names the call and the calls whose records it discarded.
	EventRunReset = flowtype.EventRunReset
	// EventRunForked: the run was forked (Fork); Detail names the new run
	// and the call it starts from. The new run's EventRunStarted names
	// this run.
	EventRunForked = flowtype.EventRunForked
)

// ErrStepNotFound is returned by Reset and Fork for a call the run never
// made; the error lists the calls it did make.
var ErrStepNotFound = engine.ErrStepNotFound

// Reset re-runs the run runID from one of its calls, under its own ID (a
// new execution of the same run): the records of the calls before step are
// kept and replay as recorded, step and every call after it run again, and
// the run is pending, due now, with no outcome; an engine working its queue
// and registering its version takes it. step names a call of the workflow
// body itself as Inspect and flowlite show print it, "name#occurrence" (a
// bare name is occurrence 0), not a call inside All or First: a parallel
// call is kept whole when all of its branches' calls started before step,
// and runs again whole otherwise. The history records an EventRunReset
// naming the discarded calls.
//
// What runs again is what a first execution of those calls does, with
// these exceptions: a signal that a discarded receive took is delivered
// again, so the re-run receives it (and a new one waits its turn); the
// deadline, if any, is as far
// from now as it was from the run's creation, and a run started with a
// Timeout has the whole of it again from now. The records kept must still
// stand: going back past a completed step whose compensation ran is
// refused, as its effect was undone; go back to it or before.
//
// The run keeps its ID, so the calls that run again have the same
// IdempotencyKey as in the first execution, and send their signals
// (SignalRun) under the same keys: a service that deduplicates by them
// answers the re-run as it answered the first call (a charge that was
// refunded by its compensation is not made again), and a signal the first
// execution sent is not delivered twice. Fork when the effects must happen
// anew: a fork's ID, and so its keys, are its own.
//
// It resets finished runs (completed, failed, cancelled), suspended runs,
// and pending or waiting runs no engine holds (a run stuck on a signal
// that will never come, or in a long backoff). It refuses, changing
// nothing: a run an engine executes (running or leased: cancel it first,
// or wait until it settles) or unwinds (compensating), and a dead letter
// that was requeued (its requeue carries it on: Fork it), all ErrConflict;
// a finished run whose unique key another run took since (ErrConflict);
// a call the run never made (ErrStepNotFound); an unknown run
// (ErrRunNotFound); and the discarding of a child's start while the child
// run exists (ErrConflict, naming it), since the re-run would find its ID
// taken: delete the child first (a finished child of a finished parent),
// go back to a call after its start, or Fork the run, whose children are
// its own. The write is a compare-and-set on the run's status and
// claim fence: an engine claiming the run meanwhile makes Reset an
// ErrConflict, so two engines never run it at once.
func (e *Engine) Reset(ctx context.Context, runID, step string) error {
	name, occurrence, err := engine.ParseCall(step)
	if err != nil {
		return fmt.Errorf("reset run %s: %w", runID, err)
	}
	return e.onRun(runID, func(c *engine.Engine) error { return c.Reset(ctx, runID, name, occurrence) })
}

// Fork makes a new run that starts from one of the calls of the run
// runID, and returns its ID: runID + "/fork-N", N the first number free.
// The records of the calls before step (chosen as for Reset) are copied to
// the new run and replay there; the new run has runID's workflow version,
// queue, priority, input, Timeout and context values (WithValues), no
// parent and no unique key, the deadline, if any, as far from now as it
// was from runID's creation (a Timeout counts from its first claim), and
// is pending, due now. Its children, and its steps' idempotency keys, derive from its
// own ID, so it starts children of its own. runID itself is left as it
// is, in any state, running included, but for an EventRunForked naming
// the fork; the fork's EventRunStarted names runID. It refuses what Reset
// refuses of the records (a call the run never made, ErrStepNotFound; a
// compensated call before step, ErrConflict) and an unknown run
// (ErrRunNotFound).
func (e *Engine) Fork(ctx context.Context, runID, step string) (string, error) {
	name, occurrence, err := engine.ParseCall(step)
	if err != nil {
		return "", fmt.Errorf("fork run %s: %w", runID, err)
	}
	// The fork's ID starts with runID's, so it is placed with runID.
	return byRun(e, runID, func(inner *Engine) (string, error) { return inner.core.Fork(ctx, runID, name, occurrence) })
}

// Revive brings the cancelled run or dead letter runID back under its own
// ID, as an alternative to Requeue's new run: it goes back, as Reset does,
// to the first call (in the order the calls started) whose record does not
// stand, i.e. that did not complete (the step that failed, was cancelled,
// or was waiting) or whose effect a compensation undid, and runs again from
// there; the calls before it replay as recorded. A run whose records all
// stand replays them and goes on from where it stopped. A dead letter
// revived is a dead letter no more, and keeps its unique key if no other
// run took it since. As with Reset, the calls that run again keep their
// IdempotencyKey: a service that deduplicates by it answers a revived
// dead letter's re-run charge with the first (refunded) one; Requeue,
// whose new run has keys of its own, is the way to make such effects anew.
//
// It refuses, changing nothing: a suspended run (Resume it), a completed
// one (Reset it from a call), an unfinished one, and a requeued dead
// letter, all ErrConflict; an unknown run is ErrRunNotFound. Like Reset it
// is a compare-and-set on the run's status and claim fence.
func (e *Engine) Revive(ctx context.Context, runID string) error {
	return e.onRun(runID, func(c *engine.Engine) error { return c.Revive(ctx, runID) })
}
