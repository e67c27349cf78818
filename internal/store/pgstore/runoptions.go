package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

// setStartOptions records the start options of the run p, inserted just
// before in the same transaction; a run without any costs nothing.
func (t *tx) setStartOptions(ctx context.Context, p store.RunInsertParams) error {
	if p.StartOptions.IsZero() {
		return nil
	}
	if _, err := t.q.RunSetStartOptions(ctx, pgdb.RunSetStartOptionsParams{
		ID: p.ID, Timeout: nullInt(p.Timeout), Detached: p.Detached, ContextValues: p.Context,
		ConcurrencyKey: p.ConcurrencyKey,
	}); err != nil {
		return fmt.Errorf("insert run %s: record its start options: %w", p.ID, interpretError(ctx, err))
	}
	return nil
}

// startOptionsFromRow returns the start options of a run row.
func startOptionsFromRow(r pgdb.Run) store.StartOptions {
	return store.StartOptions{Timeout: r.Timeout.Int64, Detached: r.Detached, Context: r.ContextValues, ConcurrencyKey: r.ConcurrencyKey}
}

func (t *tx) RunDeleteForReuse(ctx context.Context, id, parentID string, completedToo bool) (bool, error) {
	n, err := t.q.RunDeleteForReuse(ctx, pgdb.RunDeleteForReuseParams{ID: id, CompletedToo: completedToo, ParentID: parentID})
	if err != nil {
		return false, fmt.Errorf("delete run %s to reuse its ID: %w", id, interpretError(ctx, err))
	}
	return n == 1, nil
}
