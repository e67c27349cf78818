package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) ExecutionGet(ctx context.Context, runID string) (store.Execution, error) {
	row, err := r.q.ExecutionGet(ctx, runID)
	if err != nil {
		if err = interpretError(err); errors.Is(err, flowtype.ErrRunNotFound) {
			return store.Execution{Number: 1}, nil
		}
		return store.Execution{}, fmt.Errorf("read the execution of run %s: %w", runID, err)
	}
	return store.Execution{Number: int(row.Execution), ContinuedAt: row.ContinuedAt}, nil
}

func (t *tx) RunContinue(ctx context.Context, l store.Lease, p store.RunContinueParams) (int, error) {
	n, err := t.q.RunContinue(ctx, sqlitedb.RunContinueParams{
		Input: p.Input, Version: int64(p.Version), Now: p.Now, ID: l.RunID, Owner: &l.Owner, Fence: l.Fence,
	})
	if err := fencedRows("continue as new", l, n, err); err != nil {
		return 0, err
	}
	next, err := t.q.ExecutionNext(ctx, sqlitedb.ExecutionNextParams{RunID: l.RunID, Now: p.Now})
	if err != nil {
		return 0, fmt.Errorf("count the next execution of run %s: %w", l.RunID, interpretError(err))
	}
	if _, err := t.q.ExecutionStepsDelete(ctx, l.RunID); err != nil {
		return 0, fmt.Errorf("delete the steps of run %s's ended execution: %w", l.RunID, interpretError(err))
	}
	prefix := "execution " + strconv.FormatInt(next-1, 10) + ": "
	if _, err := t.q.ExecutionSignalsRetire(ctx, sqlitedb.ExecutionSignalsRetireParams{Prefix: &prefix, RunID: l.RunID}); err != nil {
		return 0, fmt.Errorf("retire the signals run %s's ended execution received: %w", l.RunID, interpretError(err))
	}
	return int(next), nil
}
