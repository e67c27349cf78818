package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/flowlite/flowlite/internal/store"
)

// Read runs fn in one read transaction on the reader pool. In WAL mode a
// read transaction reads the snapshot its first statement saw until it
// ends, whatever the writer commits meanwhile, and a writer never waits
// for it. It is begun deferred (read-only: the DSN's BEGIN IMMEDIATE,
// which takes the write lock, is for the writer's transactions), and
// rolled back, as it wrote nothing. While it is open, a checkpoint cannot
// move past its snapshot, so fn should only read.
func (s *Store) Read(ctx context.Context, fn func(store.Reader) error) error {
	sqlTx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", interpretError(err))
	}
	defer sqlTx.Rollback()
	return fn(reader{q: s.readQ.WithTx(sqlTx)})
}
