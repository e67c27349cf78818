package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

func (t *tx) RunDeleteOne(ctx context.Context, id string) (bool, error) {
	n, err := t.q.RunDeleteOne(ctx, id)
	if err != nil {
		return false, fmt.Errorf("delete run %s: %w", id, interpretError(ctx, err))
	}
	return n == 1, nil
}

func (t *tx) RunMakeDue(ctx context.Context, id string, now int64) (bool, error) {
	n, err := t.q.RunMakeDue(ctx, pgdb.RunMakeDueParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("make run %s due: %w", id, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil
	}
	if err := t.wakeRuns(ctx, store.WakeReady, id); err != nil {
		return false, fmt.Errorf("make run %s due: %w", id, err)
	}
	return true, nil
}

func (t *tx) StepSnooze(ctx context.Context, p store.StepSnoozeParams) error {
	n, err := t.q.StepSnooze(ctx, pgdb.StepSnoozeParams{
		Error: p.Detail, Now: p.Now, RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows(ctx, "snooze step", p.Key, n, err)
}
