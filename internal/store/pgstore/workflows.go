package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) WorkflowList(ctx context.Context) ([]store.WorkflowKey, error) {
	rows, err := r.q.WorkflowList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", interpretError(ctx, err))
	}
	keys := make([]store.WorkflowKey, len(rows))
	for i, row := range rows {
		keys[i] = store.WorkflowKey{Name: row.Name, Version: int(row.Version)}
	}
	return keys, nil
}

func (t *tx) WorkflowRegister(ctx context.Context, k store.WorkflowKey, now int64) error {
	err := t.q.WorkflowRegister(ctx, pgdb.WorkflowRegisterParams{
		Name: k.Name, Version: int64(k.Version), RegisteredAt: now,
	})
	if err != nil {
		return fmt.Errorf("register workflow %s: %w", k, interpretError(ctx, err))
	}
	return nil
}
