package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

// Partitioned history (Options.HistoryPartitions): the events table is
// partitioned by time, one partition per span, and retention drops a
// partition whole with the runs whose history it holds. The partitions are
// made, and dropped, by functions of the schema
// (00014_history_partitions.sql), each call one statement: the engines'
// cleaners call DropHistoryPartitions on every pass, and the one that takes
// the schema's advisory lock does the work.

// minHistorySpan is the shortest span Options.HistoryPartitions takes: a
// shorter one would have the cleaner make a partition every pass.
const minHistorySpan = time.Second

// partitionHistory turns partitioned history on with the span given, or
// changes the span of the partitions made from now on; 0 leaves the schema
// as it is.
func (s *Store) partitionHistory(ctx context.Context, span time.Duration) error {
	switch {
	case span < 0:
		return fmt.Errorf("history partitions of %v: want a positive span, or 0 to keep what the schema has", span)
	case span == 0 || s.readOnly != "":
		return nil
	case span < minHistorySpan:
		return fmt.Errorf("history partitions of %v: the span must be at least %v", span, minHistorySpan)
	}
	err := pgdb.New(s.conn(s.db)).HistoryPartition(ctx, pgdb.HistoryPartitionParams{SpanMs: span.Milliseconds(), NowMs: time.Now().UnixMilli()})
	if err != nil {
		return fmt.Errorf("partition the history by %v: %w", span, interpretError(ctx, err))
	}
	return nil
}

// HistorySpan reads the span of the history's partitions, 0 when the
// history is one table. It is read each time, not kept from Open: another
// process may have turned the option on since.
func (s *Store) HistorySpan(ctx context.Context) (time.Duration, error) {
	ms, err := pgdb.New(s.conn(s.db)).HistorySpan(ctx)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the history's partition span: %w", interpretError(ctx, err))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// DropHistoryPartitions makes the partitions up to three spans past
// p.Until, then drops the old ones whose every run can go, with those runs.
func (s *Store) DropHistoryPartitions(ctx context.Context, p store.HistoryDropParams) (store.HistoryDropResult, error) {
	if p.Max <= 0 {
		return store.HistoryDropResult{}, fmt.Errorf("drop history partitions: max must be positive, got %d", p.Max)
	}
	if s.readOnly != "" {
		return store.HistoryDropResult{}, s.errReadOnly()
	}
	switch span, err := s.HistorySpan(ctx); {
	case err != nil:
		return store.HistoryDropResult{}, err
	case span == 0:
		return store.HistoryDropResult{}, fmt.Errorf("drop history partitions: the history of schema %s is not partitioned", s.schema)
	}
	q := pgdb.New(s.conn(s.db))
	made, err := q.HistoryPartitionsEnsure(ctx, p.Until)
	if err != nil {
		return store.HistoryDropResult{}, fmt.Errorf("make history partitions: %w", interpretError(ctx, err))
	}
	row, err := q.HistoryPartitionsDrop(ctx, pgdb.HistoryPartitionsDropParams{
		CompletedBefore: p.CompletedBefore, FailedBefore: p.FailedBefore, CancelledBefore: p.CancelledBefore,
		WaitForFeed: p.WaitForFeed, MaxPartitions: int32(min(p.Max, 1<<30)),
	})
	if err != nil {
		return store.HistoryDropResult{Made: int(made)}, fmt.Errorf("drop history partitions: %w", interpretError(ctx, err))
	}
	return store.HistoryDropResult{Made: int(made), Dropped: int(row.Partitions), Runs: int(row.Runs)}, nil
}

// HistoryPartitions lists the history's partitions, oldest first; none
// when it is one table.
func (s *Store) HistoryPartitions(ctx context.Context) ([]store.HistoryPartition, error) {
	rows, err := pgdb.New(s.conn(s.db)).HistoryPartitionList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list history partitions: %w", interpretError(ctx, err))
	}
	out := make([]store.HistoryPartition, len(rows))
	for i, r := range rows {
		out[i] = store.HistoryPartition{Name: r.Name, From: r.Lo, To: r.Hi, Bytes: r.Bytes}
	}
	return out, nil
}

var _ store.HistoryPartitioner = (*Store)(nil)
