package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) QueueList(ctx context.Context) ([]store.Queue, error) {
	rows, err := r.q.QueueList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", interpretError(ctx, err))
	}
	queues := make([]store.Queue, len(rows))
	for i, row := range rows {
		queues[i] = store.Queue{Name: row.Name, Paused: row.Paused, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
	}
	return queues, nil
}

func (r reader) QueuePendingRuns(ctx context.Context) ([]store.QueuePending, error) {
	rows, err := r.q.QueuePendingRuns(ctx)
	if err != nil {
		return nil, fmt.Errorf("count pending runs by queue: %w", interpretError(ctx, err))
	}
	out := make([]store.QueuePending, len(rows))
	for i, row := range rows {
		out[i] = store.QueuePending{Queue: row.Queue, Runs: row.Runs, OldestCreatedAt: row.OldestCreatedAt}
	}
	return out, nil
}

func (r reader) QueueCounts(ctx context.Context, p store.QueueCountsParams) ([]store.QueueCounts, error) {
	rows, err := r.q.QueueCounts(ctx, pgdb.QueueCountsParams{Now: p.Now, MinuteAgo: p.MinuteAgo, HourAgo: p.HourAgo})
	if err != nil {
		return nil, fmt.Errorf("count runs by queue: %w", interpretError(ctx, err))
	}
	counts := make([]store.QueueCounts, len(rows))
	for i, row := range rows {
		counts[i] = store.QueueCounts{
			Queue: row.Queue, Status: flowtype.RunStatus(row.Status), Runs: row.Runs, Ready: row.Ready,
			OldestReadyAt: row.OldestReadyAt, FinishedLastMinute: row.FinishedLastMinute,
			FinishedLastHour: row.FinishedLastHour, Dead: row.Dead,
		}
	}
	return counts, nil
}

func (r reader) QueueDurations(ctx context.Context, queue string, since int64, limit int) ([]int64, error) {
	d, err := r.q.QueueDurations(ctx, pgdb.QueueDurationsParams{Queue: queue, Since: since, MaxRuns: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("run durations of queue %s: %w", queue, interpretError(ctx, err))
	}
	return d, nil
}

func (r reader) RunGetKeyHolder(ctx context.Context, workflow, key string) (store.Run, error) {
	row, err := r.q.RunGetKeyHolder(ctx, pgdb.RunGetKeyHolderParams{Workflow: workflow, UniqueKey: someString(key)})
	if err != nil {
		return store.Run{}, fmt.Errorf("get the run of %s holding unique key %q: %w", workflow, key, interpretError(ctx, err))
	}
	return runFromRow(row), nil
}

func (r reader) UniqueHoldGet(ctx context.Context, workflow, key string, now int64) (string, error) {
	id, err := r.q.UniqueHoldGet(ctx, pgdb.UniqueHoldGetParams{Workflow: workflow, Key: key, Now: now})
	if err != nil {
		return "", fmt.Errorf("get hold of unique key %q of %s: %w", key, workflow, interpretError(ctx, err))
	}
	return id, nil
}

func (r reader) RunDeadList(ctx context.Context, p store.DeadListParams) ([]store.Run, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	after, before := finishedRange(p.DeadFilter)
	rows, err := r.q.RunDeadList(ctx, pgdb.RunDeadListParams{
		Workflow: p.Workflow, Queue: p.Queue, FinishedAfter: after, FinishedBefore: before, MaxRuns: int64(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", interpretError(ctx, err))
	}
	runs := make([]store.Run, len(rows))
	for i, row := range rows {
		runs[i] = runFromRow(row)
	}
	return runs, nil
}

func (r reader) RunSeqMax(ctx context.Context) (int64, error) {
	seq, err := r.q.RunSeqMax(ctx)
	if err != nil {
		return 0, fmt.Errorf("read last run sequence: %w", interpretError(ctx, err))
	}
	return seq, nil
}

func (r reader) RunDeadBatch(ctx context.Context, p store.DeadBatchParams) ([]store.DeadRun, error) {
	after, before := finishedRange(p.DeadFilter)
	from := max(after, p.AfterFinishedAt)
	rows, err := r.q.RunDeadBatch(ctx, pgdb.RunDeadBatchParams{
		FromFinished: from, FinishedBefore: before, AfterFinished: p.AfterFinishedAt, AfterSeq: p.AfterSeq,
		UntilSeq: p.UntilSeq, Workflow: p.Workflow, Queue: p.Queue, MaxRuns: int64(p.Max),
	})
	if err != nil {
		return nil, fmt.Errorf("find dead letters: %w", interpretError(ctx, err))
	}
	out := make([]store.DeadRun, len(rows))
	for i, row := range rows {
		out[i] = store.DeadRun{ID: row.ID, Seq: row.Seq, FinishedAt: row.FinishedAt.Int64}
	}
	return out, nil
}

func (t *tx) QueueSetPaused(ctx context.Context, name string, paused bool, now int64) (bool, error) {
	var n int64
	var err error
	if paused {
		n, err = t.q.QueuePause(ctx, pgdb.QueuePauseParams{Name: name, Now: now})
	} else {
		n, err = t.q.QueueResume(ctx, pgdb.QueueResumeParams{Now: now, Name: name})
	}
	if err != nil {
		verb := "resume"
		if paused {
			verb = "pause"
		}
		return false, fmt.Errorf("%s queue %s: %w", verb, name, interpretError(ctx, err))
	}
	if n == 1 && !paused {
		if err := t.wakeQueue(ctx, name); err != nil {
			return false, fmt.Errorf("resume queue %s: %w", name, err)
		}
	}
	return n == 1, nil
}

// UniqueHoldTake takes the key's advisory lock first (UniqueKeyLock), so
// that the drop of a hold that no longer holds reads a holder no
// concurrent take-over can replace before the commit; the upsert itself is
// settled by unique_holds' primary key.
func (t *tx) UniqueHoldTake(ctx context.Context, p store.UniqueHoldParams) (bool, error) {
	states, err := store.StatesMask(p.States, store.AllMask)
	if err != nil {
		return false, fmt.Errorf("hold unique key %q of %s for run %s: %w", p.Key, p.Workflow, p.RunID, err)
	}
	if err := t.lockUniqueKey(ctx, p.Workflow, p.Key); err != nil {
		return false, fmt.Errorf("hold unique key for run %s: %w", p.RunID, err)
	}
	if err := t.q.UniqueHoldDrop(ctx, pgdb.UniqueHoldDropParams{Workflow: p.Workflow, Key: p.Key, Now: p.Now}); err != nil {
		return false, fmt.Errorf("hold unique key %q of %s for run %s: %w", p.Key, p.Workflow, p.RunID, interpretError(ctx, err))
	}
	n, err := t.q.UniqueHoldTake(ctx, pgdb.UniqueHoldTakeParams{
		Workflow: p.Workflow, Key: p.Key, RunID: p.RunID, HeldUntil: p.HeldUntil, States: states, Now: p.Now,
	})
	if err != nil {
		return false, fmt.Errorf("hold unique key %q of %s for run %s: %w", p.Key, p.Workflow, p.RunID, interpretError(ctx, err))
	}
	return n == 1, nil
}

// RunRequeue links the dead letter to the new run before inserting it, so
// that the dead letter no longer holds its unique key (runs_unique skips
// requeued runs) when the copy, which takes the key over, is inserted; an
// insert that does nothing undoes the link. A dead letter with a unique key
// takes the key's advisory lock first, as RunInsert does, and the link
// (RunMarkRequeued) locks the dead letter's row, so two requeues of one
// dead letter cannot both insert a copy.
func (t *tx) RunRequeue(ctx context.Context, p store.RunRequeueParams) (bool, error) {
	from, err := t.q.RunGet(ctx, p.FromID)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("requeue run %s as %s: %w", p.FromID, p.ID, interpretError(ctx, err))
	}
	if from.UniqueKey.Valid {
		if err := t.lockUniqueKey(ctx, from.Workflow, from.UniqueKey.String); err != nil {
			return false, fmt.Errorf("requeue run %s as %s: %w", p.FromID, p.ID, err)
		}
	}
	n, err := t.q.RunMarkRequeued(ctx, pgdb.RunMarkRequeuedParams{RequeuedAs: p.ID, Now: p.Now, ID: p.FromID})
	if err != nil {
		return false, fmt.Errorf("requeue run %s as %s: %w", p.FromID, p.ID, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil // not a dead letter
	}
	n, err = t.q.RunRequeueInsert(ctx, pgdb.RunRequeueInsertParams{ID: p.ID, Now: p.Now, FromID: p.FromID})
	if err != nil {
		return false, fmt.Errorf("requeue run %s as %s: %w", p.FromID, p.ID, interpretError(ctx, err))
	}
	if n == 0 {
		err := t.q.RunUnmarkRequeued(ctx, pgdb.RunUnmarkRequeuedParams{UpdatedAt: from.UpdatedAt, ID: p.FromID, RequeuedAs: p.ID})
		if err != nil {
			return false, fmt.Errorf("requeue run %s as %s: undo the link: %w", p.FromID, p.ID, interpretError(ctx, err))
		}
		return false, nil
	}
	if err := t.q.UniqueHoldMove(ctx, pgdb.UniqueHoldMoveParams{ToRunID: p.ID, FromRunID: p.FromID}); err != nil {
		return false, fmt.Errorf("requeue run %s as %s: move unique holds: %w", p.FromID, p.ID, interpretError(ctx, err))
	}
	if err := t.wakeRuns(ctx, store.WakeReady, p.ID); err != nil {
		return false, fmt.Errorf("requeue run %s as %s: %w", p.FromID, p.ID, err)
	}
	return true, nil
}

func (t *tx) RunDeadDelete(ctx context.Context, p store.DeadDeleteParams) (int, error) {
	after, before := finishedRange(p.DeadFilter)
	n, err := t.q.RunDeadDelete(ctx, pgdb.RunDeadDeleteParams{
		UntilSeq: p.UntilSeq, Workflow: p.Workflow, Queue: p.Queue,
		FinishedAfter: after, FinishedBefore: before, MaxRuns: int64(p.Max),
	})
	if err != nil {
		return 0, fmt.Errorf("delete dead letters: %w", interpretError(ctx, err))
	}
	return int(n), nil
}

func (t *tx) RunDeadDeleteByID(ctx context.Context, id string) (bool, error) {
	n, err := t.q.RunDeadDeleteByID(ctx, id)
	if err != nil {
		return false, fmt.Errorf("delete dead letter %s: %w", id, interpretError(ctx, err))
	}
	return n == 1, nil
}

// finishedRange turns the time bounds of a filter into the query's
// [after, before) range; zero bounds are open.
func finishedRange(f store.DeadFilter) (after, before int64) {
	after, before = f.FinishedAfter, f.FinishedBefore
	if before == 0 {
		before = math.MaxInt64
	}
	return after, before
}
