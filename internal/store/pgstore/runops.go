package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
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
	n, err := t.q.RunReschedule(ctx, pgdb.RunRescheduleParams{RunAt: p.RunAt, Now: p.Now, ID: p.ID, Fence: p.Fence})
	if err != nil {
		return false, fmt.Errorf("reschedule run %s: %w", p.ID, interpretError(ctx, err))
	}
	return n == 1, t.wakeIf(ctx, n == 1, p.ID)
}

func (t *tx) RunReset(ctx context.Context, p store.RunResetParams) (bool, error) {
	deadline := sql.NullInt64{Int64: p.Deadline, Valid: p.Deadline != 0}
	n, err := t.q.RunReset(ctx, pgdb.RunResetParams{
		Now: p.Now, Deadline: deadline, ID: p.ID, Expected: string(p.Expected), Fence: p.Fence,
	})
	if err != nil {
		return false, fmt.Errorf("reset run %s: %w", p.ID, interpretError(ctx, err))
	}
	return n == 1, t.wakeIf(ctx, n == 1, p.ID)
}

func (t *tx) StepDiscard(ctx context.Context, runID string, calls []string) (int64, error) {
	if len(calls) == 0 {
		return 0, nil
	}
	n, err := t.q.StepDiscard(ctx, pgdb.StepDiscardParams{RunID: runID, Calls: jsonList(calls)})
	if err != nil {
		return 0, fmt.Errorf("discard steps of run %s: %w", runID, interpretError(ctx, err))
	}
	return n, nil
}

func (t *tx) StepCompensationClear(ctx context.Context, runID string) error {
	if _, err := t.q.StepCompensationClear(ctx, runID); err != nil {
		return fmt.Errorf("clear compensations of run %s: %w", runID, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) SignalRedeliver(ctx context.Context, runID string, waits []string) (int64, error) {
	if len(waits) == 0 {
		return 0, nil
	}
	n, err := t.q.SignalRedeliver(ctx, pgdb.SignalRedeliverParams{RunID: runID, Waits: jsonList(waits)})
	if err != nil {
		return 0, fmt.Errorf("redeliver signals of run %s: %w", runID, interpretError(ctx, err))
	}
	return n, nil
}

func (t *tx) RunForkInsert(ctx context.Context, p store.RunForkParams) (bool, error) {
	n, err := t.q.RunForkInsert(ctx, pgdb.RunForkInsertParams{ID: p.ID, Now: p.Now, FromID: p.FromID})
	if err != nil {
		return false, fmt.Errorf("fork run %s as %s: %w", p.FromID, p.ID, interpretError(ctx, err))
	}
	return n == 1, t.wakeIf(ctx, n == 1, p.ID)
}

func (t *tx) StepCopy(ctx context.Context, fromID, toID string, calls []string) (int64, error) {
	if len(calls) == 0 {
		return 0, nil
	}
	n, err := t.q.StepCopy(ctx, pgdb.StepCopyParams{ToID: toID, FromID: fromID, Calls: jsonList(calls)})
	if err != nil {
		return 0, fmt.Errorf("copy steps of run %s to %s: %w", fromID, toID, interpretError(ctx, err))
	}
	return n, nil
}

// wakeIf tells the engines listening that run id is ready, or due at its
// new time, when ok says a write made it so.
func (t *tx) wakeIf(ctx context.Context, ok bool, id string) error {
	if !ok {
		return nil
	}
	if err := t.wakeRuns(ctx, store.WakeReady, id); err != nil {
		return fmt.Errorf("wake run %s: %w", id, err)
	}
	return nil
}
