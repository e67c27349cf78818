package store

import (
	"context"
)

// Event is one entry of a run's append-only history.
type Event struct {
	ID         int64
	RunID      string
	At         int64
	Kind       string
	Step       string
	Occurrence int
	Attempt    int
	Detail     string
}

// EventReader reads the history of a run.
type EventReader interface {
	EventList(ctx context.Context, runID string) ([]Event, error)
}

// EventTx appends to the history of a run inside a write transaction, so an
// event commits together with the state change it records.
type EventTx interface {
	EventAppend(ctx context.Context, e Event) error
	// EventAppendMany appends events in order, as EventAppend would one by
	// one, in a few statements rather than one per event.
	EventAppendMany(ctx context.Context, events []Event) error
}
