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
	// EventListKind returns the events of kind in the current execution
	// of a run's history (after its last continued_as_new event), oldest
	// first (none for an unknown run): it reads no further back, however
	// many executions came before.
	EventListKind(ctx context.Context, runID, kind string) ([]Event, error)
}

// EventTx appends to the history of a run inside a write transaction, so an
// event commits together with the state change it records.
type EventTx interface {
	EventAppend(ctx context.Context, e Event) error
	// EventAppendMany appends events in order, as EventAppend would one by
	// one, in a few statements rather than one per event.
	EventAppendMany(ctx context.Context, events []Event) error
	// EventAppendLeased appends e, as EventAppend does, only while l holds
	// the run's lease, and reports whether it did. A lost lease or a run
	// that is gone skips the event without an error, so that one write can
	// carry the events of many runs (step progress) whatever became of
	// some of them. It takes no lock on the run's row: it is for events
	// that may outlive a takeover by one commit, true of the attempt that
	// made them.
	EventAppendLeased(ctx context.Context, l Lease, e Event) (bool, error)
}
