package sqlitestore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

func (t *tx) RunDeleteOne(ctx context.Context, id string) (bool, error) {
	n, err := t.q.RunDeleteOne(ctx, id)
	if err != nil {
		return false, fmt.Errorf("delete run %s: %w", id, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) RunMakeDue(ctx context.Context, id string, now int64) (bool, error) {
	n, err := t.q.RunMakeDue(ctx, sqlitedb.RunMakeDueParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("make run %s due: %w", id, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) StepSnooze(ctx context.Context, p store.StepSnoozeParams) error {
	n, err := t.q.StepSnooze(ctx, sqlitedb.StepSnoozeParams{
		Error: p.Detail, Now: &p.Now, RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows("snooze step", p.Key, n, err)
}
