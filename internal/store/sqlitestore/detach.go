package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// The writer's transaction is shared: group commit runs many callers'
// work in it, and a RunTx step's body runs the user's SQL on it with the
// step's context. modernc.org/sqlite interrupts the connection when the
// context of a running statement ends, and an interrupted statement rolls
// back the WHOLE transaction, not just the statement: one caller's timeout
// would discard every other caller's work in the batch.
//
// So the writer connection runs every statement inside a transaction
// detached from its context: a context that already ended refuses the
// statement with its error before it starts (the check between
// statements), but once started a statement runs to its end. Outside a
// transaction (checkpoints, migrations) an interrupt harms only its own
// statement, and statements stay interruptible there.

// sqliteConn is what the writer needs of a modernc.org/sqlite connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// detachConnector opens the writer's connections.
type detachConnector struct {
	drv driver.Driver
	dsn string
}

// openWriterDB opens a pool whose connections detach statements in a
// transaction from their context (see above).
func openWriterDB(dsn string) (*sql.DB, error) {
	// sql.Open connects lazily: this only looks up the registered
	// modernc.org/sqlite driver, whose registered functions and hooks the
	// writer so keeps.
	probe, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	drv := probe.Driver()
	if err := probe.Close(); err != nil {
		return nil, err
	}
	return sql.OpenDB(detachConnector{drv: drv, dsn: dsn}), nil
}

func (c detachConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("sqlite driver connection %T lacks a context-aware method", conn)
	}
	return &detachConn{c: sc}, nil
}

func (c detachConnector) Driver() driver.Driver { return c.drv }

// detachConn wraps one connection. database/sql uses a connection from one
// goroutine at a time, so inTx needs no lock.
type detachConn struct {
	c    sqliteConn
	inTx bool
}

// stmtContext returns the context a statement runs with: ctx itself outside
// a transaction; inside one, ctx's error if it ended, else ctx without its
// cancellation (values kept).
func (c *detachConn) stmtContext(ctx context.Context) (context.Context, error) {
	if !c.inTx {
		return ctx, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

func (c *detachConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *detachConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	ctx, err := c.stmtContext(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	ds, ok := s.(stmtContext)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("sqlite driver statement %T lacks a context-aware method", s)
	}
	return &detachStmt{s: ds, c: c}, nil
}

func (c *detachConn) Close() error { return c.c.Close() }

func (c *detachConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *detachConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	t, err := c.c.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return &detachTx{t: t, c: c}, nil
}

func (c *detachConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ctx, err := c.stmtContext(ctx)
	if err != nil {
		return nil, err
	}
	return c.c.ExecContext(ctx, query, args)
}

func (c *detachConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	ctx, err := c.stmtContext(ctx)
	if err != nil {
		return nil, err
	}
	return c.c.QueryContext(ctx, query, args)
}

func (c *detachConn) Ping(ctx context.Context) error { return c.c.Ping(ctx) }

func (c *detachConn) ResetSession(ctx context.Context) error { return c.c.ResetSession(ctx) }

func (c *detachConn) IsValid() bool { return c.c.IsValid() }

// detachTx ends the connection's transaction state with the transaction.
type detachTx struct {
	t driver.Tx
	c *detachConn
}

func (t *detachTx) Commit() error {
	err := t.t.Commit()
	t.c.inTx = false
	return err
}

func (t *detachTx) Rollback() error {
	err := t.t.Rollback()
	t.c.inTx = false
	return err
}

type stmtContext interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// detachStmt is a prepared statement of a detachConn; it is prepared once
// and run both in and out of transactions, so it asks its connection at
// each run.
type detachStmt struct {
	s stmtContext
	c *detachConn
}

func (s *detachStmt) Close() error  { return s.s.Close() }
func (s *detachStmt) NumInput() int { return s.s.NumInput() }

func (s *detachStmt) Exec(args []driver.Value) (driver.Result, error) {
	return nil, errors.New("sqlite statement: Exec without a context is not supported")
}

func (s *detachStmt) Query(args []driver.Value) (driver.Rows, error) {
	return nil, errors.New("sqlite statement: Query without a context is not supported")
}

func (s *detachStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	ctx, err := s.c.stmtContext(ctx)
	if err != nil {
		return nil, err
	}
	return s.s.ExecContext(ctx, args)
}

func (s *detachStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	ctx, err := s.c.stmtContext(ctx)
	if err != nil {
		return nil, err
	}
	return s.s.QueryContext(ctx, args)
}
