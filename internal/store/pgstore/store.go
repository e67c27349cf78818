package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Write runs fn in its own database transaction, at READ COMMITTED
// whatever the sessions' default (readCommitted), and returns after the
// commit. The wakes of fn's writes are sent after the commit (notify.go).
//
// There is no group commit here: SQLite's writer batches callers because
// one file has one writer and every commit costs an fsync; PostgreSQL runs
// many transactions at once and commits them with its own group commit
// (commit_delay, a shared WAL flush), so each caller simply gets its own
// transaction on a pooled connection, and one caller's failure or panic
// rolls back that transaction alone.
//
// ctx bounds the wait for a connection, and so does the store's
// NetworkTimeout (connWait); once fn starts, the transaction
// runs to its outcome whatever ctx does (it is begun without ctx's
// cancellation, as the store contract asks). Write never calls fn twice:
// under READ COMMITTED no serialization failure arises, and a deadlock the
// database breaks (SQLSTATE 40P01, possible only between transactions that
// update several runs in different orders) is returned to the caller, who
// knows whether its work can run again.
func (s *Store) Write(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return flowtype.ErrClosed
	}
	if s.readOnly != "" {
		return s.errReadOnly()
	}
	conn, sqlTx, err := s.begin(ctx, true) // a dead pooled connection is skipped (deadconn.go)
	if err != nil {
		return err
	}
	defer conn.Close()
	committed := false
	defer func() {
		// Runs on an error and on a panic of fn, which then goes on up to
		// the caller.
		if !committed {
			_ = sqlTx.Rollback()
		}
	}()
	t := s.newTx(sqlTx)
	t.deferWakes = true
	t.conn = conn
	if err := fn(t); err != nil {
		return t.withFlushErr(err)
	}
	if err := t.flushEvents(ctx); err != nil {
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", interpretError(ctx, err))
	}
	committed = true
	s.afterCommit(t.wakes, t.appended)
	return nil
}

// afterCommit sends the wakes a committed write asked for and, when it
// appended events, the change feed's wake (feed.go); and tells the feed
// that a transaction committed.
func (s *Store) afterCommit(wakes []wakeReq, appended bool) {
	if appended && !s.noWakes {
		wakes = append(wakes, wakeReq{kind: wakeFeed})
	}
	s.sendAfterCommit(wakes)
	s.committed.Notify()
}

// writeConn returns a connection of the pool for a write, waiting at most
// connWait for it.
//
// The engine's writes run detached from cancellation, so that what a run
// did is recorded after it was cancelled; without a bound of its own, a
// write waits for a connection for as long as the pool takes to make one.
// While the server is out of reach that is forever: database/sql dials
// for waiting callers one at a time, each dial failing only after its
// timeout, so the waits of many writes add up, and an engine asked to stop
// would not, its executions queued behind each other's dials.
func (s *Store) writeConn(ctx context.Context) (*sql.Conn, error) {
	waitCtx, cancel := context.WithTimeout(ctx, s.connWait)
	defer cancel()
	conn, err := s.db.Conn(waitCtx)
	switch {
	case err == nil:
		return conn, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case waitCtx.Err() != nil:
		// Not the caller's deadline: say so without wrapping
		// context.DeadlineExceeded, which callers take for their own.
		return nil, fmt.Errorf("begin write: %w: no database connection within %s (%v)", flowtype.ErrUnavailable, s.connWait, err)
	}
	return nil, fmt.Errorf("begin write: %w", interpretError(ctx, err))
}

// WriteInTx runs fn on a transaction the caller owns and commits. The
// transaction may come from any *sql.DB on the same database: every query
// names flowlite's schema, so the caller's search_path does not matter.
func (s *Store) WriteInTx(ctx context.Context, sqlTx *sql.Tx, fn func(store.Tx) error) error {
	if sqlTx == nil {
		return errors.New("write in caller's transaction: tx is nil")
	}
	if s.closed.Load() {
		return flowtype.ErrClosed
	}
	if s.readOnly != "" {
		return s.errReadOnly()
	}
	t := s.newTx(sqlTx)
	if err := fn(t); err != nil {
		return t.withFlushErr(err)
	}
	return t.flushEvents(ctx)
}

// Reader returns reads served by the pool, each statement on its own,
// seeing what was committed when it started.
func (s *Store) Reader() store.Reader { return reader{q: pgdb.New(s.conn(s.db)), s: s} }

func (s *Store) newTx(sqlTx *sql.Tx) *tx {
	t := &tx{sqlTx: sqlTx, raw: pgdb.New(s.conn(sqlTx))}
	t.reader = reader{q: pgdb.New(conn{db: sqlTx, s: s, tx: t}), s: s}
	return t
}

// reader implements store.Reader over the generated queries, bound to the
// pool or to a transaction. Its methods, and tx's, live in one file per
// entity, named after the query file they call: runs.go runs the queries
// of db/queries/postgres/runs.sql, steps.go those of steps.sql, and so on.
type reader struct {
	q *pgdb.Queries
	s *Store
}

// tx implements store.Tx over one database transaction.
type tx struct {
	reader
	sqlTx *sql.Tx
	// conn is the store's connection the transaction runs on, for COPY
	// (bulk.go); nil in WriteInTx, whose transaction is the caller's.
	conn *sql.Conn
	// copied holds the IDs of the runs the transaction inserted by COPY
	// (bulk.go).
	copied map[string]bool
	// deferWakes keeps the wakes of the transaction's writes in wakes, for
	// Write to send once it committed; otherwise (WriteInTx) they are sent
	// in the transaction (notify.go).
	deferWakes bool
	wakes      []wakeReq
	// events are the appended events not yet inserted (events.go), and
	// raw runs statements without inserting them first.
	events   []store.Event
	raw      *pgdb.Queries
	flushErr error // of an insert of events no caller could be told of
	// appended is set by EventAppend: the change feed's followers are
	// told of the commit (feed.go).
	appended bool
}

// SQL returns the transaction for the caller's own statements, which may
// read flowlite's events: the appended ones are inserted first.
func (t *tx) SQL() *sql.Tx {
	if err := t.flushEvents(context.Background()); err != nil && t.flushErr == nil {
		t.flushErr = err
	}
	return t.sqlTx
}

// withFlushErr adds to fn's error the failed insert of appended events
// that aborted the transaction, if one did: fn's error is then most likely
// its consequence.
func (t *tx) withFlushErr(err error) error {
	if t.flushErr == nil || errors.Is(err, t.flushErr) {
		return err
	}
	return errors.Join(t.flushErr, err)
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func someString(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }

// nullInt stores zero as NULL ("none"), as the SQLite adapter does.
func nullInt(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: v != 0} }

func someInt(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
