package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
)

func (r reader) WorkflowList(ctx context.Context) ([]flowtype.WorkflowKey, error) {
	rows, err := r.q.WorkflowList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", interpretError(ctx, err))
	}
	keys := make([]flowtype.WorkflowKey, len(rows))
	for i, row := range rows {
		keys[i] = flowtype.WorkflowKey{Name: row.Name, Version: int(row.Version)}
	}
	return keys, nil
}

func (t *tx) WorkflowRegister(ctx context.Context, k flowtype.WorkflowKey, now int64) error {
	err := t.q.WorkflowRegister(ctx, pgdb.WorkflowRegisterParams{
		Name: k.Name, Version: int64(k.Version), RegisteredAt: now,
	})
	if err != nil {
		return fmt.Errorf("register workflow %s: %w", k, interpretError(ctx, err))
	}
	return nil
}
