package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

// jsonList is a list of strings as the JSON array json_each reads; a
// []string always marshals.
func jsonList(s []string) string {
	if s == nil {
		s = []string{}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func (t *tx) RunReschedule(ctx context.Context, p store.RunRescheduleParams) (bool, error) {
	n, err := t.q.RunReschedule(ctx, sqlitedb.RunRescheduleParams{RunAt: p.RunAt, Now: p.Now, ID: p.ID, Fence: p.Fence})
	if err != nil {
		return false, fmt.Errorf("reschedule run %s: %w", p.ID, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) RunReset(ctx context.Context, p store.RunResetParams) (bool, error) {
	var deadline *int64
	if p.Deadline != 0 {
		deadline = &p.Deadline
	}
	n, err := t.q.RunReset(ctx, sqlitedb.RunResetParams{
		Now: p.Now, Deadline: deadline, ID: p.ID, Expected: string(p.Expected), Fence: p.Fence,
	})
	if err != nil {
		return false, fmt.Errorf("reset run %s: %w", p.ID, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) StepDiscard(ctx context.Context, runID string, calls []string) (int64, error) {
	if len(calls) == 0 {
		return 0, nil
	}
	n, err := t.q.StepDiscard(ctx, sqlitedb.StepDiscardParams{RunID: runID, Calls: jsonList(calls)})
	if err != nil {
		return 0, fmt.Errorf("discard steps of run %s: %w", runID, interpretError(err))
	}
	return n, nil
}

func (t *tx) StepCompensationClear(ctx context.Context, runID string) error {
	if _, err := t.q.StepCompensationClear(ctx, runID); err != nil {
		return fmt.Errorf("clear compensations of run %s: %w", runID, interpretError(err))
	}
	return nil
}

func (t *tx) SignalRedeliver(ctx context.Context, runID string, waits []string) (int64, error) {
	if len(waits) == 0 {
		return 0, nil
	}
	n, err := t.q.SignalRedeliver(ctx, sqlitedb.SignalRedeliverParams{RunID: runID, Waits: jsonList(waits)})
	if err != nil {
		return 0, fmt.Errorf("redeliver signals of run %s: %w", runID, interpretError(err))
	}
	return n, nil
}

func (t *tx) RunForkInsert(ctx context.Context, p store.RunForkParams) (bool, error) {
	n, err := t.q.RunForkInsert(ctx, sqlitedb.RunForkInsertParams{ID: p.ID, Now: p.Now, FromID: p.FromID})
	if err != nil {
		return false, fmt.Errorf("fork run %s as %s: %w", p.FromID, p.ID, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) StepCopy(ctx context.Context, fromID, toID string, calls []string) (int64, error) {
	if len(calls) == 0 {
		return 0, nil
	}
	n, err := t.q.StepCopy(ctx, sqlitedb.StepCopyParams{ToID: toID, FromID: fromID, Calls: jsonList(calls)})
	if err != nil {
		return 0, fmt.Errorf("copy steps of run %s to %s: %w", fromID, toID, interpretError(err))
	}
	return n, nil
}
