package store

import (
	"context"
)

// Signal is an external event sent to a run.
type Signal struct {
	ID         int64
	RunID      string
	Name       string
	Payload    []byte
	Key        string // empty: no deduplication
	SentAt     int64
	ConsumedBy string // the wait that received it; empty while pending
}

// SignalReader reads the signals sent to a run.
type SignalReader interface {
	SignalList(ctx context.Context, runID string) ([]Signal, error)
}

// SignalTx sends and receives signals inside a write transaction.
type SignalTx interface {
	// SignalSend stores a signal; it reports false when a signal with the
	// same key was already sent to the run.
	SignalSend(ctx context.Context, sig Signal) (bool, error)
	// SignalNext returns the oldest signal of that name the run has not
	// received, or flowtype.ErrRunNotFound.
	SignalNext(ctx context.Context, runID, name string) (Signal, error)
	// SignalConsume marks a signal received by the wait consumedBy.
	SignalConsume(ctx context.Context, id int64, consumedBy string) error
	// SignalReject relabels the signals of the run received by the wait
	// consumedBy as rejectedBy, and returns their IDs: the wait set their
	// payload aside and waits again.
	SignalReject(ctx context.Context, runID, consumedBy, rejectedBy string) ([]int64, error)
}
