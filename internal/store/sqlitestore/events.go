package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) EventList(ctx context.Context, runID string) ([]store.Event, error) {
	rows, err := r.q.EventList(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, interpretError(err))
	}
	return eventsFromRows(rows), nil
}

func (t *tx) EventAppend(ctx context.Context, e store.Event) error {
	err := t.q.EventAppend(ctx, sqlitedb.EventAppendParams{
		RunID: e.RunID, At: e.At, Kind: e.Kind, Step: e.Step,
		Occurrence: int64(e.Occurrence), Attempt: int64(e.Attempt), Detail: e.Detail,
	})
	if err != nil {
		return fmt.Errorf("append %s event to run %s: %w", e.Kind, e.RunID, interpretError(err))
	}
	return nil
}

// eventRow is one event of EventAppendMany's JSON document.
type eventRow struct {
	RunID      string `json:"run_id"`
	At         int64  `json:"at"`
	Kind       string `json:"kind"`
	Step       string `json:"step"`
	Occurrence int    `json:"occurrence"`
	Attempt    int    `json:"attempt"`
	Detail     string `json:"detail"`
}

// EventAppendMany appends events with one prepared statement per chunk of
// store.InsertManyChunk events.
func (t *tx) EventAppendMany(ctx context.Context, events []store.Event) error {
	for start := 0; start < len(events); start += store.InsertManyChunk {
		chunk := events[start:min(start+store.InsertManyChunk, len(events))]
		rows := make([]eventRow, len(chunk))
		for i, e := range chunk {
			rows[i] = eventRow{RunID: e.RunID, At: e.At, Kind: e.Kind, Step: e.Step, Occurrence: e.Occurrence, Attempt: e.Attempt, Detail: e.Detail}
		}
		doc, err := json.Marshal(rows)
		if err != nil {
			return fmt.Errorf("append %d events: %w", len(rows), err)
		}
		if err := t.q.EventAppendMany(ctx, string(doc)); err != nil {
			return fmt.Errorf("append %d events: %w", len(rows), interpretError(err))
		}
	}
	return nil
}

// eventsFromRows converts rows of the events table.
func eventsFromRows(rows []sqlitedb.Event) []store.Event {
	events := make([]store.Event, len(rows))
	for i, row := range rows {
		events[i] = store.Event{
			ID: row.ID, RunID: row.RunID, At: row.At, Kind: row.Kind, Step: row.Step,
			Occurrence: int(row.Occurrence), Attempt: int(row.Attempt), Detail: row.Detail,
		}
	}
	return events
}

func (r reader) EventListKind(ctx context.Context, runID, kind string) ([]store.Event, error) {
	rows, err := r.q.EventListKind(ctx, sqlitedb.EventListKindParams{RunID: runID, Kind: kind})
	if err != nil {
		return nil, fmt.Errorf("list %s events of run %s: %w", kind, runID, interpretError(err))
	}
	return eventsFromRows(rows), nil
}

func (t *tx) EventAppendLeased(ctx context.Context, l store.Lease, e store.Event) (bool, error) {
	owner := l.Owner
	n, err := t.q.EventAppendLeased(ctx, sqlitedb.EventAppendLeasedParams{
		RunID: l.RunID, Owner: &owner, Fence: l.Fence, At: e.At, Kind: e.Kind, Step: e.Step,
		Occurrence: int64(e.Occurrence), Attempt: int64(e.Attempt), Detail: e.Detail,
	})
	if err != nil {
		return false, fmt.Errorf("append %s event to run %s under its lease: %w", e.Kind, l.RunID, interpretError(err))
	}
	return n > 0, nil
}
