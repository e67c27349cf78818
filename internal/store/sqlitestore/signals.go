package sqlitestore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) SignalList(ctx context.Context, runID string) ([]store.Signal, error) {
	rows, err := r.q.SignalList(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list signals of run %s: %w", runID, interpretError(err))
	}
	signals := make([]store.Signal, len(rows))
	for i, row := range rows {
		signals[i] = signalFromRow(row)
	}
	return signals, nil
}

func (t *tx) SignalSend(ctx context.Context, sig store.Signal) (bool, error) {
	n, err := t.q.SignalSend(ctx, sqlitedb.SignalSendParams{
		RunID: sig.RunID, Name: sig.Name, Payload: sig.Payload, Key: optionalString(sig.Key), SentAt: sig.SentAt,
	})
	if err != nil {
		return false, fmt.Errorf("send signal %s to run %s: %w", sig.Name, sig.RunID, interpretError(err))
	}
	return n == 1, nil
}

func (t *tx) SignalNext(ctx context.Context, runID, name string) (store.Signal, error) {
	row, err := t.q.SignalNext(ctx, sqlitedb.SignalNextParams{RunID: runID, Name: name})
	if err != nil {
		return store.Signal{}, fmt.Errorf("next signal %s of run %s: %w", name, runID, interpretError(err))
	}
	return signalFromRow(row), nil
}

func (t *tx) SignalConsume(ctx context.Context, id int64, consumedBy string) error {
	n, err := t.q.SignalConsume(ctx, sqlitedb.SignalConsumeParams{ConsumedBy: &consumedBy, ID: id})
	if err != nil {
		return fmt.Errorf("consume signal %d: %w", id, interpretError(err))
	}
	if n == 0 {
		return fmt.Errorf("consume signal %d: %w: already received", id, flowtype.ErrConflict)
	}
	return nil
}

func (t *tx) SignalReject(ctx context.Context, runID, consumedBy, rejectedBy string) ([]int64, error) {
	ids, err := t.q.SignalReject(ctx, sqlitedb.SignalRejectParams{RejectedBy: &rejectedBy, RunID: runID, ConsumedBy: &consumedBy})
	if err != nil {
		return nil, fmt.Errorf("reject the signal received by %s: %w", consumedBy, interpretError(err))
	}
	return ids, nil
}

func signalFromRow(r sqlitedb.Signal) store.Signal {
	return store.Signal{
		ID: r.ID, RunID: r.RunID, Name: r.Name, Payload: r.Payload, Key: deref(r.Key),
		SentAt: r.SentAt, ConsumedBy: deref(r.ConsumedBy),
	}
}
