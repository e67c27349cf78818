package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

var _ store.Sharder = (*Store)(nil)

// ShardGet returns the file's place in its shard set (migration 00014).
func (s *Store) ShardGet(ctx context.Context) (store.ShardRecord, bool, error) {
	row, err := s.readQ.ShardGet(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ShardRecord{}, false, nil
	}
	if err != nil {
		return store.ShardRecord{}, false, fmt.Errorf("read shard record of %s: %w", s.path, interpretError(err))
	}
	return store.ShardRecord{
		SetID: row.SetID, Index: int(row.ShardIndex), Count: int(row.ShardCount), CreatedAt: row.CreatedAt,
	}, true, nil
}

// ShardPut records the file's place in a shard set, in one write.
func (s *Store) ShardPut(ctx context.Context, rec store.ShardRecord) error {
	err := s.Write(ctx, func(t store.Tx) error {
		return t.(*tx).q.ShardPut(ctx, sqlitedb.ShardPutParams{
			SetID: rec.SetID, ShardIndex: int64(rec.Index), ShardCount: int64(rec.Count), Now: rec.CreatedAt,
		})
	})
	if err != nil {
		return fmt.Errorf("record shard %d of %d in %s: %w", rec.Index, rec.Count, s.path, err)
	}
	return nil
}
