package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) StepList(ctx context.Context, runID string) ([]store.Step, error) {
	rows, err := r.q.StepList(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list steps of run %s: %w", runID, interpretError(ctx, err))
	}
	steps := make([]store.Step, len(rows))
	for i, row := range rows {
		steps[i] = stepFromRow(row)
	}
	return steps, nil
}

func (t *tx) StepWait(ctx context.Context, p store.StepBeginParams) error {
	err := t.q.StepWait(ctx, pgdb.StepWaitParams{
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence), Input: nonNil(p.Input),
		Position: position(p.Position), Now: p.Now,
	})
	if err != nil {
		return fmt.Errorf("record wait %s: %w", p.Key, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) StepReopen(ctx context.Context, key store.StepKey) error {
	n, err := t.q.StepReopen(ctx, pgdb.StepReopenParams{RunID: key.RunID, Name: key.Name, Occurrence: int64(key.Occurrence)})
	if err != nil {
		return fmt.Errorf("reopen wait %s: %w", key, interpretError(ctx, err))
	}
	if n == 0 {
		return fmt.Errorf("reopen wait %s: %w: not a completed record", key, flowtype.ErrConflict)
	}
	return nil
}

func (t *tx) StepBegin(ctx context.Context, p store.StepBeginParams) (int, error) {
	if p.New {
		n, err := t.q.StepBeginNew(ctx, pgdb.StepBeginNewParams{
			RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence), Input: nonNil(p.Input),
			Position: position(p.Position), Now: p.Now,
		})
		if err != nil {
			return 0, fmt.Errorf("begin step %s: %w", p.Key, interpretError(ctx, err))
		}
		if n == 1 {
			return 1, nil
		}
	}
	attempts, err := t.q.StepBegin(ctx, pgdb.StepBeginParams{
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence), Input: nonNil(p.Input),
		Position: position(p.Position), Now: p.Now,
	})
	if errors.Is(err, sql.ErrNoRows) {
		// The step finished, or its run does not exist.
		if _, err := t.q.RunGet(ctx, p.Key.RunID); errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("begin step %s: %w", p.Key, errNoSuchRun)
		}
		return 0, fmt.Errorf("begin step %s: %w: step already finished", p.Key, flowtype.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("begin step %s: %w", p.Key, interpretError(ctx, err))
	}
	return int(attempts), nil
}

// StepBeginMany inserts the first attempts of the steps marked New in one
// statement, then begins the rest, and any New step that had a record
// after all, one by one.
func (t *tx) StepBeginMany(ctx context.Context, ps []store.StepBeginParams) ([]int, error) {
	attempts := make([]int, len(ps))
	var rows []stepBeginRow
	for _, p := range ps {
		if p.New {
			rows = append(rows, newStepBeginRow(p))
		}
	}
	if len(rows) > 0 {
		doc, err := json.Marshal(rows)
		if err != nil {
			return nil, fmt.Errorf("begin %d steps: %w", len(rows), err)
		}
		inserted, err := t.q.StepBeginNewMany(ctx, doc)
		if err != nil {
			return nil, fmt.Errorf("begin %d steps: %w", len(rows), interpretError(ctx, err))
		}
		begun := make(map[store.StepKey]bool, len(inserted))
		for _, r := range inserted {
			begun[store.StepKey{RunID: r.RunID, Name: r.Name, Occurrence: int(r.Occurrence)}] = true
		}
		for i, p := range ps {
			if p.New && begun[p.Key] {
				attempts[i] = 1
			}
		}
	}
	for i, p := range ps {
		if attempts[i] != 0 {
			continue
		}
		p.New = false
		n, err := t.StepBegin(ctx, p)
		if err != nil {
			return nil, err
		}
		attempts[i] = n
	}
	return attempts, nil
}

func (t *tx) StepComplete(ctx context.Context, p store.StepCompleteParams) error {
	n, err := t.q.StepComplete(ctx, pgdb.StepCompleteParams{
		Output: p.Output, Compensable: p.Compensable, Now: p.Now,
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows(ctx, "complete step", p.Key, n, err)
}

func (t *tx) StepFail(ctx context.Context, p store.StepFailParams) error {
	status := store.StepRetrying
	if p.Final {
		status = store.StepFailed
	}
	n, err := t.q.StepFail(ctx, pgdb.StepFailParams{
		Status: string(status), Error: p.Error, Now: p.Now,
		ErrorCode: p.Failure.Code, ErrorPermanent: p.Failure.Permanent, ErrorDetails: p.Failure.Details,
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows(ctx, "fail step", p.Key, n, err)
}

func (t *tx) StepCancel(ctx context.Context, p store.StepFailParams) error {
	n, err := t.q.StepCancel(ctx, pgdb.StepCancelParams{
		Error: p.Error, Now: p.Now,
		ErrorCode: p.Failure.Code, ErrorPermanent: p.Failure.Permanent, ErrorDetails: p.Failure.Details,
		RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows(ctx, "cancel step", p.Key, n, err)
}

func (t *tx) StepCompensationArm(ctx context.Context, runID string) error {
	if _, err := t.q.StepCompensationArm(ctx, runID); err != nil {
		return fmt.Errorf("arm compensations of run %s: %w", runID, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) StepCompensationBegin(ctx context.Context, key store.StepKey) (int, error) {
	attempts, err := t.q.StepCompensationBegin(ctx, pgdb.StepCompensationBeginParams{
		RunID: key.RunID, Name: key.Name, Occurrence: int64(key.Occurrence),
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("begin compensation of step %s: %w: nothing to compensate", key, flowtype.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("begin compensation of step %s: %w", key, interpretError(ctx, err))
	}
	return int(attempts), nil
}

func (t *tx) StepCompensationEnd(ctx context.Context, key store.StepKey, state store.CompensationState, errMsg string) error {
	n, err := t.q.StepCompensationEnd(ctx, pgdb.StepCompensationEndParams{
		Compensation: string(state), Error: errMsg,
		RunID: key.RunID, Name: key.Name, Occurrence: int64(key.Occurrence),
	})
	return stepRows(ctx, "end compensation of step", key, n, err)
}

func (t *tx) StepCompensationRetryFailed(ctx context.Context, runID string) (int64, error) {
	n, err := t.q.StepCompensationRetryFailed(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("retry failed compensations of run %s: %w", runID, interpretError(ctx, err))
	}
	return n, nil
}

func (t *tx) StepCompensationSkipFailed(ctx context.Context, runID string) (int64, error) {
	n, err := t.q.StepCompensationSkipFailed(ctx, runID)
	if err != nil {
		return 0, fmt.Errorf("skip failed compensations of run %s: %w", runID, interpretError(ctx, err))
	}
	return n, nil
}

func stepRows(ctx context.Context, op string, key store.StepKey, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, key, interpretError(ctx, err))
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", op, key, flowtype.ErrConflict)
	}
	return nil
}

func stepFromRow(s pgdb.Step) store.Step {
	return store.Step{
		RunID: s.RunID, Name: s.Name, Occurrence: int(s.Occurrence), Status: store.StepStatus(s.Status),
		Attempts: int(s.Attempts), Input: s.Input, Output: s.Output, Error: s.Error,
		CompletedSeq: s.CompletedSeq.Int64, Compensable: s.Compensable,
		Compensation: store.CompensationState(s.Compensation), CompensationAttempts: int(s.CompensationAttempts),
		CompensationError: s.CompensationError, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt.Int64,
		Position: positionFromRow(s.Position),
		Failure:  store.Failure{Code: s.ErrorCode, Permanent: s.ErrorPermanent, Details: s.ErrorDetails},
	}
}

// positionFromRow reads a stored position; NULL is -1 (unknown).
func positionFromRow(p sql.NullInt64) int {
	if !p.Valid {
		return -1
	}
	return int(p.Int64)
}

// position stores a call's position; a negative one (unknown) as NULL.
func position(p int) sql.NullInt64 {
	return sql.NullInt64{Int64: int64(p), Valid: p >= 0}
}
