package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

// Streams (store/stream.go). StreamAdvance locks the stream's row until the
// transaction ends, so appends to one stream take turns in commit order.

func (r reader) StreamRead(ctx context.Context, runID, stream string, from int64, max int) ([]store.StreamMessage, error) {
	rows, err := r.q.StreamRead(ctx, pgdb.StreamReadParams{RunID: runID, Stream: stream, FromPosition: from, MaxMessages: int64(max)})
	if err != nil {
		return nil, fmt.Errorf("read stream %q of run %s from %d: %w", stream, runID, from, interpretError(ctx, err))
	}
	out := make([]store.StreamMessage, len(rows))
	for i, m := range rows {
		out[i] = store.StreamMessage{RunID: m.RunID, Stream: m.Stream, Position: m.Position, Value: m.Value, At: m.At,
			Step: m.Step, Occurrence: int(m.Occurrence), Attempt: int(m.Attempt)}
	}
	return out, nil
}

func (r reader) StreamList(ctx context.Context, runID string) ([]store.Stream, error) {
	rows, err := r.q.StreamList(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list streams of run %s: %w", runID, interpretError(ctx, err))
	}
	out := make([]store.Stream, len(rows))
	for i, s := range rows {
		out[i] = store.Stream{RunID: s.RunID, Name: s.Stream, Length: s.Length, ClosedAt: s.ClosedAt}
	}
	return out, nil
}

func (t *tx) StreamAppend(ctx context.Context, p store.StreamAppendParams) (int64, error) {
	if len(p.Values) == 0 {
		return 0, fmt.Errorf("append to stream %q of run %s: no messages", p.Stream, p.RunID)
	}
	length, err := t.q.StreamAdvance(ctx, pgdb.StreamAdvanceParams{RunID: p.RunID, Stream: p.Stream, Count: int64(len(p.Values))})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("append to stream %q of run %s: %w", p.Stream, p.RunID, store.ErrStreamClosed)
	}
	if err != nil {
		return 0, fmt.Errorf("append to stream %q of run %s: %w", p.Stream, p.RunID, interpretError(ctx, err))
	}
	first := length - int64(len(p.Values))
	doc, err := store.StreamMessagesJSON(first, p.Values)
	if err != nil {
		return 0, fmt.Errorf("append to stream %q of run %s: %w", p.Stream, p.RunID, err)
	}
	err = t.q.StreamMessagesInsert(ctx, pgdb.StreamMessagesInsertParams{
		RunID: p.RunID, Stream: p.Stream, At: p.At, Step: p.Step, Occurrence: int64(p.Occurrence), Attempt: int64(p.Attempt),
		Messages: doc,
	})
	if err != nil {
		return 0, fmt.Errorf("append %d messages to stream %q of run %s: %w", len(p.Values), p.Stream, p.RunID, interpretError(ctx, err))
	}
	return first, nil
}

func (t *tx) StreamClose(ctx context.Context, runID, stream string, now int64) error {
	if err := t.q.StreamClose(ctx, pgdb.StreamCloseParams{RunID: runID, Stream: stream, ClosedAt: now}); err != nil {
		return fmt.Errorf("close stream %q of run %s: %w", stream, runID, interpretError(ctx, err))
	}
	return nil
}
