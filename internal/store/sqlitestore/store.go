package sqlitestore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

// WriteInTx runs fn on a transaction the caller owns and commits.
func (s *Store) WriteInTx(ctx context.Context, sqlTx *sql.Tx, fn func(store.Tx) error) error {
	if sqlTx == nil {
		return errors.New("write in caller's transaction: tx is nil")
	}
	if s.readOnly != "" {
		return s.errReadOnly()
	}
	// The caller's transaction may come from another *sql.DB, on which the
	// store's prepared statements cannot run: use unprepared queries.
	return fn(&tx{reader: reader{q: sqlitedb.New(sqlTx)}, sqlTx: sqlTx})
}

// Reader returns reads served by the read-only pool.
func (s *Store) Reader() store.Reader { return reader{q: s.readQ} }

// newTx binds the writer's prepared queries to a transaction.
func (s *Store) newTx(sqlTx *sql.Tx) *tx {
	return &tx{reader: reader{q: s.writeQ.WithTx(sqlTx)}, sqlTx: sqlTx}
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// reader implements store.Reader over prepared queries bound to a pool or a
// transaction. Its methods, and tx's, live in one file per entity, named
// after the query file they call: runs.go runs the queries of
// db/queries/sqlite/runs.sql, steps.go those of steps.sql, and so on.
type reader struct{ q *sqlitedb.Queries }

// tx implements store.Tx over one database transaction.
type tx struct {
	reader
	sqlTx *sql.Tx
}

func (t *tx) SQL() *sql.Tx { return t.sqlTx }

func derefOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func optional(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
