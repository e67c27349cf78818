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
	}); err != nil {
		return fmt.Errorf("insert run %s: record its start options: %w", p.ID, interpretError(ctx, err))
	}
	return nil
}

// startOptionsFromRow returns the start options of a run row.
func startOptionsFromRow(r pgdb.Run) store.StartOptions {
	return store.StartOptions{Timeout: r.Timeout.Int64, Detached: r.Detached, Context: r.ContextValues}
}
