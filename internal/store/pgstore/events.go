package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) EventList(ctx context.Context, runID string) ([]store.Event, error) {
	rows, err := r.q.EventList(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, interpretError(ctx, err))
	}
	return eventsFromRows(rows), nil
}

// EventAppend keeps the event for one insert of all the events the
// transaction appends: they are inserted, in the order they were appended,
// by EventAppendMany before the first later statement that could see them
// (one naming the events table, or a DELETE, whose cascade could remove
// the run they belong to; seesEvents), before the caller's own statements
// (SQL), and at the latest before the commit, in Write, or when fn returns,
// in WriteInTx. A run's events then keep their order, reads in the
// transaction see them, and an insert that fails (a run that does not
// exist) fails the write.
//
// Why: the engine appends two to four events in every transaction, each
// a statement of its own, which on PostgreSQL is a round trip and the
// server's work of a statement; one insert costs about what one event did.
func (t *tx) EventAppend(ctx context.Context, e store.Event) error {
	t.events = append(t.events, e)
	t.appended = true
	return nil
}

// flushEvents inserts the appended events, and reports an insert of
// them that failed before.
func (t *tx) flushEvents(ctx context.Context) error {
	if t.flushErr != nil {
		return t.flushErr
	}
	events := t.events
	t.events = nil
	switch len(events) {
	case 0:
		return nil
	case 1:
		e := events[0]
		n, err := t.raw.EventAppend(ctx, pgdb.EventAppendParams{
			RunID: e.RunID, At: e.At, Kind: e.Kind, Step: e.Step,
			Occurrence: int64(e.Occurrence), Attempt: int64(e.Attempt), Detail: e.Detail,
		})
		switch {
		case err != nil:
			t.flushErr = fmt.Errorf("append %s event to run %s: %w", e.Kind, e.RunID, interpretError(ctx, err))
		case n == 0:
			t.flushErr = fmt.Errorf("append %s event to run %s: %w", e.Kind, e.RunID, errNoSuchRun)
		}
	default:
		t.flushErr = t.appendMany(ctx, events)
	}
	return t.flushErr
}

// seesEvents reports whether a statement of the adapter could read the
// events table or remove rows of it.
func seesEvents(query string) bool {
	return strings.Contains(query, DefaultSchema+".events") || strings.Contains(query, "DELETE")
}

// errNoSuchRun fails an append of events to a run that does not exist, as
// the foreign key did before migration 00010: the transaction is then
// rolled back, and nothing of it is kept.
var errNoSuchRun = errors.New("no such run")

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

// EventAppendMany appends events with one statement per chunk of
// store.InsertManyChunk events, after the events appended one by one before them.
func (t *tx) EventAppendMany(ctx context.Context, events []store.Event) error {
	if err := t.flushEvents(ctx); err != nil {
		return err
	}
	return t.appendMany(ctx, events)
}

func (t *tx) appendMany(ctx context.Context, events []store.Event) error {
	if copied, err := t.copyEvents(ctx, events); copied || err != nil {
		return err
	}
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
		n, err := t.raw.EventAppendMany(ctx, doc)
		if err != nil {
			return fmt.Errorf("append %d events: %w", len(rows), interpretError(ctx, err))
		}
		if n != int64(len(rows)) {
			return fmt.Errorf("append %d events: %d of them: %w", len(rows), int64(len(rows))-n, errNoSuchRun)
		}
		t.appended = true
	}
	return nil
}

// eventsFromRows converts rows of the events table.
func eventsFromRows(rows []pgdb.Event) []store.Event {
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
	rows, err := r.q.EventListKind(ctx, pgdb.EventListKindParams{RunID: runID, Kind: kind})
	if err != nil {
		return nil, fmt.Errorf("list %s events of run %s: %w", kind, runID, interpretError(ctx, err))
	}
	return eventsFromRows(rows), nil
}

// EventAppendLeased inserts at once, after the events appended before it
// (its statement names the events table, which flushes them first), so
// that it can report whether the lease held.
func (t *tx) EventAppendLeased(ctx context.Context, l store.Lease, e store.Event) (bool, error) {
	n, err := t.q.EventAppendLeased(ctx, pgdb.EventAppendLeasedParams{
		RunID: l.RunID, Owner: l.Owner, Fence: l.Fence, At: e.At, Kind: e.Kind, Step: e.Step,
		Occurrence: int64(e.Occurrence), Attempt: int64(e.Attempt), Detail: e.Detail,
	})
	if err != nil {
		return false, fmt.Errorf("append %s event to run %s under its lease: %w", e.Kind, l.RunID, interpretError(ctx, err))
	}
	if n > 0 {
		t.appended = true
	}
	return n > 0, nil
}
