package flow

import (
	"context"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// EventRunRequeued is recorded on a dead letter when it is requeued; its
// detail names the new run, whose run_started event names the dead letter.
const EventRunRequeued = flowtype.EventRunRequeued

// DeadLetterFilter selects dead letters; zero fields match all.
type DeadLetterFilter struct {
	// Workflow is a workflow or job name.
	Workflow string
	Queue    string
	// FailedAfter and FailedBefore bound when the runs failed: at or after
	// FailedAfter, and before FailedBefore.
	FailedAfter  time.Time
	FailedBefore time.Time
	// Limit caps how many DeadLetters returns; default 100. Bulk operations
	// ignore it.
	Limit int
}

func (f DeadLetterFilter) store() store.DeadFilter {
	d := store.DeadFilter{Workflow: f.Workflow, Queue: f.Queue}
	if !f.FailedAfter.IsZero() {
		d.FinishedAfter = f.FailedAfter.UnixMilli()
	}
	if !f.FailedBefore.IsZero() {
		d.FinishedBefore = f.FailedBefore.UnixMilli()
	}
	return d
}

// DeadLetters lists the dead letters f matches, the most recently failed
// first, without their steps (Inspect and History show them); RunInfo.Error
// says why each failed.
//
// A dead letter is a run that failed for good: status StatusFailed, i.e.
// its workflow returned an error (for a Job: its handler exhausted its
// attempts or returned a permanent error) and the completed steps were
// compensated. It stays one until Requeue, PurgeDead, or retention
// (Config.Retention) deletes it. Cancelled runs are not dead letters
// (someone, or a deadline, stopped them on purpose), nor are suspended runs
// (they wait for an operator: Resume, Skip, Cancel).
func (e *Engine) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]RunInfo, error) {
	runs, err := gather(ctx, e, func(ctx context.Context, inner *Engine) ([]store.Run, error) {
		return inner.core.DeadLetters(ctx, f.store(), f.Limit)
	}, lastFailedRuns(f.Limit))
	if err != nil {
		return nil, err
	}
	out := make([]RunInfo, len(runs))
	for i, r := range runs {
		out[i] = runInfo(r)
	}
	return out, nil
}

// Requeue starts the dead letter runID again from scratch, as a new run,
// and returns the new run's ID: runID + "/requeue-1" (a requeue of that run
// gets "/requeue-2", and so on). The new run has the dead letter's workflow
// version, queue, priority, input and unique key, no parent, and its
// deadline, if any, as far from now as it was from the dead letter's start;
// an engine working its queue and registering its version takes it at once.
//
// The dead letter is kept as it failed, steps and history included, and is
// no longer a dead letter. The two are linked both ways: RunInfo.RequeuedAs
// and an EventRunRequeued event on the dead letter, RunInfo.RequeuedFrom and
// the detail of the new run's EventRunStarted. So what happened stays
// auditable, and the new run's ID is fresh: the IDs derived from it (its
// children's, its steps' IdempotencyKey) do not collide with those of the
// failed attempt, whose effects were compensated.
//
// Requeueing a run that is not a dead letter (not failed, or already
// requeued) is an error wrapping ErrConflict, and so is requeueing one
// whose unique key an unfinished run holds; nothing changes then. An
// unknown run is ErrRunNotFound, and a new run ID taken by another run
// ErrRunExists.
func (e *Engine) Requeue(ctx context.Context, runID string) (string, error) {
	// The new run's ID starts with runID's, so it is placed with runID.
	return byRun(e, runID, func(inner *Engine) (string, error) { return inner.core.Requeue(ctx, runID) })
}

// RequeueDead requeues every dead letter f matches, as Requeue does, in
// transactions of up to 100 runs, and returns how many it requeued. It
// handles the dead letters that exist when it starts: runs failing while
// it works, the ones it requeued included, are left for a later call. A
// dead letter whose unique key an unfinished run holds is left as it is,
// logged, and not counted. On error, the runs requeued before it stay
// requeued, and the count says how many.
func (e *Engine) RequeueDead(ctx context.Context, f DeadLetterFilter) (int, error) {
	return sumAll(e, func(inner *Engine) (int, error) { return inner.core.RequeueDead(ctx, f.store()) })
}

// PurgeDead deletes every dead letter f matches, with its steps, events and
// signals, in transactions of up to 100 runs, and returns how many it
// deleted. It handles the dead letters that exist when it starts, and, like
// retention, keeps a failed child of an unfinished parent, which may still
// read the child's outcome. Requeued runs are no longer dead letters:
// retention deletes them.
func (e *Engine) PurgeDead(ctx context.Context, f DeadLetterFilter) (int, error) {
	return sumAll(e, func(inner *Engine) (int, error) { return inner.core.PurgeDead(ctx, f.store()) })
}

// PurgeDeadRuns deletes the dead letters runIDs, with their steps, events
// and signals, in one transaction: all of them, or none when one of them
// cannot go. The error then names that run and why: ErrRunNotFound for an
// unknown run; ErrConflict for a run that is not failed, was requeued, or
// is the failed child of an unfinished parent (which may still read its
// outcome). On a sharded engine it is one transaction per shard: all
// runs are located first (an unknown one fails the call with nothing
// deleted), but a run that cannot go leaves those of other shards deleted.
func (e *Engine) PurgeDeadRuns(ctx context.Context, runIDs ...string) error {
	return e.onRuns(ctx, "purge dead run", runIDs, func(inner *Engine, ids []string) error {
		return inner.core.PurgeDeadRuns(ctx, ids)
	})
}
