package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) EventList(ctx context.Context, runID string) ([]store.Event, error) {
	rows, err := r.q.EventList(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, interpretError(ctx, err))
	}
	events := make([]store.Event, len(rows))
	for i, row := range rows {
		events[i] = store.Event{
			ID: row.ID, RunID: row.RunID, At: row.At, Kind: row.Kind, Step: row.Step,
			Occurrence: int(row.Occurrence), Attempt: int(row.Attempt), Detail: row.Detail,
		}
	}
	return events, nil
}

func (t *tx) EventAppend(ctx context.Context, e store.Event) error {
	err := t.q.EventAppend(ctx, pgdb.EventAppendParams{
		RunID: e.RunID, At: e.At, Kind: e.Kind, Step: e.Step,
		Occurrence: int64(e.Occurrence), Attempt: int64(e.Attempt), Detail: e.Detail,
	})
	if err != nil {
		return fmt.Errorf("append %s event to run %s: %w", e.Kind, e.RunID, interpretError(ctx, err))
	}
	t.appended = true
	return nil
}
