package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) StepList(ctx context.Context, runID string) ([]store.Step, error) {
	rows, err := r.q.StepList(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, interpretError(err))
	}
	steps := make([]store.Step, len(rows))
	for i, row := range rows {
		steps[i] = stepFromRow(row)
	}
	return steps, nil
}

func (t *tx) StepWait(ctx context.Context, p store.StepBeginParams) error {
	err := t.q.StepWait(ctx, sqlitedb.StepWaitParams{
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence), Input: p.Input,
		Position: position(p.Position), Now: p.Now,
	})
	if err != nil {
		return fmt.Errorf("record wait %s: %w", p.Key, interpretError(err))
	}
	return nil
}

func (t *tx) StepReopen(ctx context.Context, key store.StepKey) error {
	n, err := t.q.StepReopen(ctx, sqlitedb.StepReopenParams{RunID: key.RunID, Name: key.Name, Occurrence: int64(key.Occurrence)})
	if err != nil {
		return fmt.Errorf("reopen wait %s: %w", key, interpretError(err))
	}
	if n == 0 {
		return fmt.Errorf("reopen wait %s: %w: not a completed record", key, flowtype.ErrConflict)
	}
	return nil
}

func (t *tx) StepBegin(ctx context.Context, p store.StepBeginParams) (int, error) {
	if p.New {
		n, err := t.q.StepBeginNew(ctx, sqlitedb.StepBeginNewParams{
			RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence), Input: p.Input,
			Position: position(p.Position), Now: p.Now,
		})
		if err != nil {
			return 0, fmt.Errorf("begin step %s: %w", p.Key, interpretError(err))
		}
		if n == 1 {
			return 1, nil
		}
	}
	attempts, err := t.q.StepBegin(ctx, sqlitedb.StepBeginParams{
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence), Input: p.Input,
		Position: position(p.Position), Now: p.Now,
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("begin step %s: %w: step already finished", p.Key, flowtype.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("begin step %s: %w", p.Key, interpretError(err))
	}
	return int(attempts), nil
}

// StepBeginMany begins ps one by one: a statement costs SQLite no round
// trip.
func (t *tx) StepBeginMany(ctx context.Context, ps []store.StepBeginParams) ([]int, error) {
	attempts := make([]int, len(ps))
	for i, p := range ps {
		n, err := t.StepBegin(ctx, p)
		if err != nil {
			return nil, err
		}
		attempts[i] = n
	}
	return attempts, nil
}

func (t *tx) StepComplete(ctx context.Context, p store.StepCompleteParams) error {
	n, err := t.q.StepComplete(ctx, sqlitedb.StepCompleteParams{
		Output: p.Output, Compensable: boolInt(p.Compensable), Now: &p.Now,
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows("complete step", p.Key, n, err)
}

func (t *tx) StepFail(ctx context.Context, p store.StepFailParams) error {
	status := store.StepRetrying
	if p.Final {
		status = store.StepFailed
	}
	n, err := t.q.StepFail(ctx, sqlitedb.StepFailParams{
		Status: string(status), Error: p.Error, Now: &p.Now,
		ErrorCode: p.Failure.Code, ErrorPermanent: boolInt(p.Failure.Permanent), ErrorDetails: p.Failure.Details,
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows("fail step", p.Key, n, err)
}

func (t *tx) StepCancel(ctx context.Context, p store.StepFailParams) error {
	n, err := t.q.StepCancel(ctx, sqlitedb.StepCancelParams{
		Error: p.Error, Now: &p.Now,
		ErrorCode: p.Failure.Code, ErrorPermanent: boolInt(p.Failure.Permanent), ErrorDetails: p.Failure.Details,
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows("cancel step", p.Key, n, err)
}

func (t *tx) StepCompensationArm(ctx context.Context, runID string) error {
	if _, err := t.q.StepCompensationArm(ctx, runID); err != nil {
		return fmt.Errorf("arm compensations of run %s: %w", runID, interpretError(err))
	}
	return nil
}

func (t *tx) StepCompensationBegin(ctx context.Context, key store.StepKey) (int, error) {
	attempts, err := t.q.StepCompensationBegin(ctx, sqlitedb.StepCompensationBeginParams{
		RunID: key.RunID, Name: key.Name, Occurrence: int64(key.Occurrence),
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("begin compensation of step %s: %w: nothing to compensate", key, flowtype.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("begin compensation of step %s: %w", key, interpretError(err))
	}
	return int(attempts), nil
}

func (t *tx) StepCompensationEnd(ctx context.Context, key store.StepKey, state store.CompensationState, errMsg string) error {
	n, err := t.q.StepCompensationEnd(ctx, sqlitedb.StepCompensationEndParams{
		Compensation: string(state), Error: errMsg,
		RunID: key.RunID, Name: key.Name, Occurrence: int64(key.Occurrence),
	})
	return stepRows("end compensation of step", key, n, err)
}

func (t *tx) StepCompensationRetryFailed(ctx context.Context, runID string) (int64, error) {
	n, err := t.q.StepCompensationRetryFailed(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("retry failed compensations of run %s: %w", runID, interpretError(err))
	}
	return n, nil
}

func (t *tx) StepCompensationSkipFailed(ctx context.Context, runID string) (int64, error) {
	n, err := t.q.StepCompensationSkipFailed(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("skip failed compensations of run %s: %w", runID, interpretError(err))
	}
	return n, nil
}

func stepRows(op string, key store.StepKey, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, key, interpretError(err))
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", op, key, flowtype.ErrConflict)
	}
	return nil
}

func stepFromRow(s sqlitedb.Step) store.Step {
	return store.Step{
		RunID: s.RunID, Name: s.Name, Occurrence: int(s.Occurrence), Status: store.StepStatus(s.Status),
		Attempts: int(s.Attempts), Input: s.Input, Output: s.Output, Error: s.Error,
		CompletedSeq: deref(s.CompletedSeq), Compensable: s.Compensable != 0,
		Compensation: store.CompensationState(s.Compensation), CompensationAttempts: int(s.CompensationAttempts),
		CompensationError: s.CompensationError, StartedAt: s.StartedAt, FinishedAt: deref(s.FinishedAt),
		Position: int(derefOr(s.Position, -1)),
		Failure:  store.Failure{Code: s.ErrorCode, Permanent: s.ErrorPermanent != 0, Details: s.ErrorDetails},
	}
}

// position stores a call's position; a negative one (unknown) as NULL.
func position(p int) *int64 {
	if p < 0 {
		return nil
	}
	v := int64(p)
	return &v
}
