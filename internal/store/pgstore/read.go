package pgstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// snapshotRead is the transaction of Read: REPEATABLE READ takes one
// snapshot at the transaction's first statement and keeps it, and a
// transaction that only reads never fails with a serialization error at
// that level, so the store's rule of no retries holds (store.go).
var snapshotRead = &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}

// Read runs fn in one REPEATABLE READ READ ONLY transaction on a pooled
// connection: each of fn's statements sees what was committed when the
// first one began, and nothing committed after. It takes no row lock, so
// no write waits for it. ctx bounds the whole of it, as it bounds a read of
// Reader; a connection found dead as the transaction begins is replaced,
// as for those reads.
func (s *Store) Read(ctx context.Context, fn func(store.Reader) error) error {
	if s.closed.Load() {
		return flowtype.ErrClosed
	}
	var sqlTx *sql.Tx
	for try := 0; ; try++ {
		var err error
		if sqlTx, err = s.db.BeginTx(ctx, snapshotRead); err == nil {
			break
		}
		if !retryDeadConn(ctx, s.db, err, try) {
			return fmt.Errorf("begin read: %w", interpretError(ctx, err))
		}
	}
	// Nothing was written: ending the transaction either way is the same,
	// and a rollback cannot fail for a conflict.
	defer sqlTx.Rollback()
	return fn(reader{q: pgdb.New(s.conn(sqlTx)), s: s})
}
