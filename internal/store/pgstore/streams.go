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
	msgs, err := store.ReadStreamChunks(from, max, func(from int64, chunks int) ([]store.StreamChunk, error) {
		rows, err := r.q.StreamRead(ctx, pgdb.StreamReadParams{RunID: runID, Stream: stream, FromPosition: from, MaxChunks: int64(chunks)})
		if err != nil {
			return nil, interpretError(ctx, err)
		}
		out := make([]store.StreamChunk, len(rows))
		for i, c := range rows {
			out[i] = store.StreamChunk{RunID: c.RunID, Stream: c.Stream, First: c.FirstPosition, Count: c.Count, Messages: c.Messages,
				At: c.At, Step: c.Step, Occurrence: int(c.Occurrence), Attempt: int(c.Attempt)}
		}
		return out, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read stream %q of run %s from %d: %w", stream, runID, from, err)
	}
	return msgs, nil
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
	doc, err := store.EncodeStreamChunk(p.Values)
	if err != nil {
		return 0, fmt.Errorf("append to stream %q of run %s: %w", p.Stream, p.RunID, err)
	}
	err = t.q.StreamChunkInsert(ctx, pgdb.StreamChunkInsertParams{
		RunID: p.RunID, Stream: p.Stream, FirstPosition: first, Count: int64(len(p.Values)), Messages: doc,
		At: p.At, Step: p.Step, Occurrence: int64(p.Occurrence), Attempt: int64(p.Attempt),
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
