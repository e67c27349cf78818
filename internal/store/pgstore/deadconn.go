package pgstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sessions the server ended. When PostgreSQL restarts, or an operator
// ends flowlite's sessions (pg_terminate_backend), every idle connection
// of the pool is dead, and database/sql learns it only by using it: pgx's
// driver checks a connection before reuse only when it sat idle for over a
// second, so under load each dead connection fails the first statement
// sent on it, and then is discarded. Statements that are safe to send
// again on another connection are retried here, so that a restart costs
// the engine the time the server was away and not one failed claim,
// heartbeat or step per pooled connection:
//
//   - the BEGIN of a write transaction (Write, the wake sender): nothing of
//     the transaction ran yet;
//   - a read on the pool (Reader): it changes nothing;
//   - each step of opening a store (retryDeadSession): creating the
//     schema and applying migrations are transactions or run under a lock
//     the session's end releases, and each tests again what is left to do.
//
// A statement inside a transaction is never retried: the transaction died
// with its session, and its caller decides what to do. Retries stop when
// a connection to the server cannot be made (database/sql then returns
// the dial error) or after one more attempt than the pool has
// connections.

// connLost reports whether err says the statement's session is gone: the
// server ended it (SQLSTATE class 57P: admin_shutdown, crash_shutdown,
// cannot_connect_now…; class 08, connection exceptions), or the connection
// broke under it.
func connLost(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// unreachable reports whether err says the server could not be reached or
// the connection broke, without a word from the server (which connLost
// reads from a *pgconn.PgError).
func unreachable(err error) bool {
	var connectErr *pgconn.ConnectError
	return connLost(err) || errors.As(err, &connectErr)
}

// deadConnRetries bounds the retries of one statement: one per connection
// the pool may hold (a pool of unbounded size counts as 32).
func deadConnRetries(db *sql.DB) int {
	n := db.Stats().MaxOpenConnections
	if n <= 0 || n > 32 {
		n = 32
	}
	return n
}

// retryDeadConn reports whether a statement that failed with err on try
// (0-based) should be sent again on another connection of db.
func retryDeadConn(ctx context.Context, db *sql.DB, err error, try int) bool {
	return connLost(err) && ctx.Err() == nil && try < deadConnRetries(db)
}

// readCommitted is the isolation of every transaction the store begins,
// whatever the session's default: the store's locking is designed for
// READ COMMITTED (store.go), under which no serialization failure arises.
// It costs nothing: BEGIN says it.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// begin takes a connection of the pool (writeConn) and begins a
// transaction on it (without ctx's cancellation when detached), retrying
// on another connection when the one it took turns out dead. The caller
// closes conn after the transaction ended. Its errors say "begin write".
func (s *Store) begin(ctx context.Context, detached bool) (*sql.Conn, *sql.Tx, error) {
	txCtx := ctx
	if detached {
		txCtx = context.WithoutCancel(ctx)
	}
	for try := 0; ; try++ {
		conn, err := s.writeConn(ctx)
		if err != nil {
			return nil, nil, err
		}
		sqlTx, err := conn.BeginTx(txCtx, readCommitted)
		if err == nil {
			return conn, sqlTx, nil
		}
		conn.Close()
		if !retryDeadConn(ctx, s.db, err, try) {
			return nil, nil, fmt.Errorf("begin write: %w", interpretError(ctx, err))
		}
	}
}

// retryDeadSession runs one step of opening a store, f, again while it
// fails because the session it ran on was ended (retryDeadConn), and
// returns its last error, interpreted and prefixed with step.
func retryDeadSession(ctx context.Context, db *sql.DB, step string, f func() error) error {
	for try := 0; ; try++ {
		err := f()
		if err == nil {
			return nil
		}
		if !retryDeadConn(ctx, db, err, try) {
			return fmt.Errorf("%s: %w", step, interpretError(ctx, err))
		}
	}
}
