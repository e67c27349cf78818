package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Dead letters. A dead letter is a failed run: its workflow failed for good
// and the completed steps were compensated. Cancelled runs are not dead
// letters (someone, or a deadline, decided they should stop), nor are
// suspended runs (they wait for an operator to resume, skip or cancel
// them). Requeue starts a dead letter again from scratch as a new run,
// which keeps the failed run and its history as they were (see requeue).

// deadBatch bounds how many dead letters one transaction of a bulk
// operation handles.
const deadBatch = 100

// DeadLetters lists the dead letters that f matches, the most recently
// failed first, at most limit (default 100).
func (e *Engine) DeadLetters(ctx context.Context, f store.DeadFilter, limit int) ([]store.Run, error) {
	return e.store.Reader().RunDeadList(ctx, store.DeadListParams{DeadFilter: f, Limit: limit})
}

// Requeue starts the dead letter id again from scratch, as a new run, and
// returns the new run's ID (see requeue). A run that is not a dead letter
// is an error wrapping flowtype.ErrConflict, and nothing changes.
//
// The new run counts in flowtype.EngineMetrics.RunsStarted, as a run started
// with StartRun does: it is a run this engine recorded, which will be
// claimed and finish like any other, so leaving it out would make
// RunsStarted fall behind RunsFinished.
func (e *Engine) Requeue(ctx context.Context, id string) (string, error) {
	var newID, queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		newID, queue, err = e.requeue(ctx, tx, id, e.nowMs())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("requeue run %s: %w", id, err)
	}
	e.metrics.runStarted() // only now: the new run exists once the write committed
	e.Wake(queue)
	return newID, nil
}

// requeue inserts a fresh run of the dead letter id: same workflow version,
// queue, priority, input and unique key; no parent; the deadline, if any,
// as far from now as it was from the dead letter's creation. The new run's
// ID is the dead letter's plus "/requeue-1" ("/requeue-2" when the dead
// letter was itself the first requeue, and so on). The dead letter is kept
// as it failed, steps and history included, and linked to the new run
// (RequeuedAs, and a run_requeued event); the new run links back
// (RequeuedFrom, and its run_started event). So nothing of the failed
// attempt is lost, and the new run is a run like any other: its children
// and its steps' idempotency keys, derived from its ID, do not collide with
// the failed attempt's, whose effects were compensated.
//
// The dead letter's unique key and its holds pass to the new run. Another
// run holding the unique key makes the requeue fail with
// flowtype.ErrConflict (it would be a duplicate).
func (e *Engine) requeue(ctx context.Context, tx store.Tx, id string, now int64) (newID, queue string, err error) {
	run, err := tx.RunGet(ctx, id)
	if err != nil {
		return "", "", err
	}
	switch {
	case run.Status != flowtype.StatusFailed:
		return "", "", fmt.Errorf("%w: run is %s, not failed", flowtype.ErrConflict, run.Status)
	case run.RequeuedAs != "":
		return "", "", fmt.Errorf("%w: run was already requeued as %s", flowtype.ErrConflict, run.RequeuedAs)
	}
	newID = requeueID(run)
	ok, err := tx.RunRequeue(ctx, store.RunRequeueParams{FromID: id, ID: newID, Now: now})
	if err != nil {
		return "", "", err
	}
	if !ok {
		if _, err := tx.RunGet(ctx, newID); err == nil {
			return "", "", fmt.Errorf("%w: the new run's ID %s is taken", flowtype.ErrRunExists, newID)
		}
		if run.UniqueKey != "" {
			if holder, err := tx.RunGetKeyHolder(ctx, run.Workflow, run.UniqueKey); err == nil {
				who := "unfinished"
				if holder.Status.Finished() {
					who = string(holder.Status)
				}
				return "", "", fmt.Errorf("%w: %s run %s holds its unique key %q", flowtype.ErrConflict, who, holder.ID, run.UniqueKey)
			}
		}
		return "", "", fmt.Errorf("%w: run changed meanwhile", flowtype.ErrConflict)
	}
	key := flowtype.WorkflowKey{Name: run.Workflow, Version: run.Version}
	if err := tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventRunRequeued, Detail: "as " + newID}); err != nil {
		return "", "", err
	}
	err = tx.EventAppend(ctx, store.Event{
		RunID: newID, At: now, Kind: flowtype.EventRunStarted,
		Detail: fmt.Sprintf("%s on %s, requeue of %s", key, run.Queue, id),
	})
	return newID, run.Queue, err
}

const requeueSuffix = "/requeue-"

// requeueID returns the ID of the run that requeues run: the ID of the run
// it descends from, plus /requeue-N for its N-th requeue.
func requeueID(run store.Run) string {
	root, n := run.ID, 0
	if run.RequeuedFrom != "" {
		if i := strings.LastIndex(run.ID, requeueSuffix); i >= 0 {
			if k, err := strconv.Atoi(run.ID[i+len(requeueSuffix):]); err == nil && k > 0 {
				root, n = run.ID[:i], k
			}
		}
	}
	return root + requeueSuffix + strconv.Itoa(n+1)
}

// RequeueDead requeues, in transactions of up to 100, every dead letter f
// matches that exists when it starts, and returns how many it requeued. A
// dead letter whose unique key an unfinished run holds is left as it is (it
// would be a duplicate), logged and not counted. Runs that fail while it
// works, including the ones it requeued, are not requeued again. Each run it
// requeued counts in flowtype.EngineMetrics.RunsStarted, as with Requeue.
func (e *Engine) RequeueDead(ctx context.Context, f store.DeadFilter) (int, error) {
	return e.requeueDead(ctx, f, deadBatch)
}

func (e *Engine) requeueDead(ctx context.Context, f store.DeadFilter, batchSize int) (int, error) {
	until, err := e.store.Reader().RunSeqMax(ctx)
	if err != nil {
		return 0, fmt.Errorf("requeue dead letters: %w", err)
	}
	var after store.DeadRun // the cursor: the last dead letter handled
	total := 0
	for {
		var batch []store.DeadRun
		var requeued int
		queues := make(map[string]bool)
		err := e.store.Write(ctx, func(tx store.Tx) error {
			requeued = 0
			clear(queues)
			var err error
			batch, err = tx.RunDeadBatch(ctx, store.DeadBatchParams{
				DeadFilter: f, AfterFinishedAt: after.FinishedAt, AfterSeq: after.Seq, UntilSeq: until, Max: batchSize,
			})
			if err != nil {
				return err
			}
			now := e.nowMs()
			for _, d := range batch {
				newID, queue, err := e.requeue(ctx, tx, d.ID, now)
				if errors.Is(err, flowtype.ErrConflict) || errors.Is(err, flowtype.ErrRunExists) {
					// requeue wrote nothing before it failed.
					e.log.Warn("dead letter left as it is", "run", d.ID, "err", err)
					continue
				}
				if err != nil {
					return err
				}
				e.log.Debug("dead letter requeued", "run", d.ID, "as", newID)
				requeued++
				queues[queue] = true
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("requeue dead letters: %w", err)
		}
		total += requeued
		// Counted only now: the new runs exist once Write returned nil,
		// and a batch that failed requeued none.
		for range requeued {
			e.metrics.runStarted()
		}
		for q := range queues {
			e.Wake(q)
		}
		if len(batch) < batchSize {
			return total, nil
		}
		after = batch[len(batch)-1]
	}
}

// PurgeDead deletes, in transactions of up to 100, every dead letter f
// matches that exists when it starts, with its steps, events and signals,
// and returns how many it deleted. Like the cleaner, it keeps a failed
// child of an unfinished parent, which may still read the child's outcome.
func (e *Engine) PurgeDead(ctx context.Context, f store.DeadFilter) (int, error) {
	return e.purgeDead(ctx, f, deadBatch)
}

func (e *Engine) purgeDead(ctx context.Context, f store.DeadFilter, batchSize int) (int, error) {
	until, err := e.store.Reader().RunSeqMax(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge dead letters: %w", err)
	}
	total := 0
	for {
		var n int
		err := e.store.Write(ctx, func(tx store.Tx) error {
			var err error
			n, err = tx.RunDeadDelete(ctx, store.DeadDeleteParams{DeadFilter: f, UntilSeq: until, Max: batchSize})
			return err
		})
		if err != nil {
			return total, fmt.Errorf("purge dead letters: %w", err)
		}
		total += n
		if n < batchSize {
			return total, nil
		}
	}
}

// PurgeDeadRuns deletes the dead letters ids, with their steps, events and
// signals, in one transaction: all of them or, when one is not a dead letter
// that can go, none. The error then names the first such run and why:
// unknown (flowtype.ErrRunNotFound), or not failed, already requeued, or the
// failed child of an unfinished parent (flowtype.ErrConflict).
func (e *Engine) PurgeDeadRuns(ctx context.Context, ids []string) error {
	err := e.store.Write(ctx, func(tx store.Tx) error {
		for _, id := range ids {
			ok, err := tx.RunDeadDeleteByID(ctx, id)
			if err != nil {
				return err
			}
			if !ok {
				return notPurgeable(ctx, tx, id)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("purge dead letters: %w", err)
	}
	return nil
}

// notPurgeable explains why RunDeadDeleteByID left run id alone.
func notPurgeable(ctx context.Context, tx store.Tx, id string) error {
	run, err := tx.RunGet(ctx, id)
	if errors.Is(err, flowtype.ErrRunNotFound) {
		return fmt.Errorf("run %s: %w", id, flowtype.ErrRunNotFound)
	}
	if err != nil {
		return err
	}
	switch {
	case run.Status != flowtype.StatusFailed:
		return fmt.Errorf("run %s: %w: it is %s, not failed", id, flowtype.ErrConflict, run.Status)
	case run.RequeuedAs != "":
		return fmt.Errorf("run %s: %w: it was requeued as %s, so it is no dead letter", id, flowtype.ErrConflict, run.RequeuedAs)
	case run.ParentID != "":
		return fmt.Errorf("run %s: %w: its parent %s has not finished and may still read its outcome", id, flowtype.ErrConflict, run.ParentID)
	}
	return fmt.Errorf("run %s: %w: changed meanwhile", id, flowtype.ErrConflict)
}
