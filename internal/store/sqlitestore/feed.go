package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

var _ store.FeedNotifier = (*Store)(nil)

// FeedCommitted returns a channel closed after the writer's next commit.
// A transaction the caller commits itself (WriteInTx), or another
// process's, is not seen: the feed's readers poll for those.
func (s *Store) FeedCommitted() <-chan struct{} { return s.committed.Wait() }

// EventFeed reads every event after after: the writer commits one
// transaction at a time, so every ID below a visible one is visible too,
// and nothing needs holding back.
func (r reader) EventFeed(ctx context.Context, after int64, max int) ([]store.Event, error) {
	rows, err := r.q.EventFeed(ctx, sqlitedb.EventFeedParams{After: after, MaxEvents: int64(max)})
	if err != nil {
		return nil, fmt.Errorf("read change feed after %d: %w", after, interpretError(err))
	}
	return eventsFromRows(rows), nil
}

func (r reader) FeedPurgedThrough(ctx context.Context) (int64, error) {
	n, err := r.q.FeedPurgedThrough(ctx)
	if err != nil {
		return 0, fmt.Errorf("read change feed's purged position: %w", interpretError(err))
	}
	return n, nil
}

func (r reader) FeedLast(ctx context.Context) (int64, error) {
	n, err := r.q.FeedLast(ctx)
	if err != nil {
		return 0, fmt.Errorf("read change feed's last position: %w", interpretError(err))
	}
	return n, nil
}

func (r reader) FeedConsumerGet(ctx context.Context, name string) (store.FeedConsumer, error) {
	row, err := r.q.FeedConsumerGet(ctx, name)
	if errors.Is(err, sql.ErrNoRows) {
		return store.FeedConsumer{}, fmt.Errorf("feed consumer %s: %w", name, flowtype.ErrRunNotFound)
	}
	if err != nil {
		return store.FeedConsumer{}, fmt.Errorf("read feed consumer %s: %w", name, interpretError(err))
	}
	return feedConsumer(row), nil
}

func (r reader) FeedConsumerList(ctx context.Context) ([]store.FeedConsumer, error) {
	rows, err := r.q.FeedConsumerList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list feed consumers: %w", interpretError(err))
	}
	out := make([]store.FeedConsumer, len(rows))
	for i, row := range rows {
		out[i] = feedConsumer(row)
	}
	return out, nil
}

func (r reader) FeedConsumerMinPosition(ctx context.Context) (int64, error) {
	n, err := r.q.FeedConsumerMinPosition(ctx)
	if err != nil {
		return 0, fmt.Errorf("read feed consumers' lowest position: %w", interpretError(err))
	}
	return n, nil
}

func feedConsumer(row sqlitedb.FeedConsumer) store.FeedConsumer {
	return store.FeedConsumer{Name: row.Name, Position: row.Position, CreatedAt: row.CreatedAt, AckedAt: row.AckedAt}
}

func (t *tx) FeedConsumerAck(ctx context.Context, name string, position, now int64) error {
	if name == "" {
		return errors.New("acknowledge feed position: consumer name is empty")
	}
	err := t.q.FeedConsumerAck(ctx, sqlitedb.FeedConsumerAckParams{Name: name, Position: position, Now: now})
	if err != nil {
		return fmt.Errorf("acknowledge feed position %d of consumer %s: %w", position, name, interpretError(err))
	}
	return nil
}

func (t *tx) FeedConsumerDelete(ctx context.Context, name string) (bool, error) {
	n, err := t.q.FeedConsumerDelete(ctx, name)
	if err != nil {
		return false, fmt.Errorf("delete feed consumer %s: %w", name, interpretError(err))
	}
	return n > 0, nil
}
