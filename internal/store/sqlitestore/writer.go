package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/flowlite/flowlite/internal/store"
)

// The writer commits many callers' write transactions in one SQLite
// transaction (group commit). With synchronous=FULL every commit costs an
// fsync, so committing one caller at a time caps the engine at the disk's
// sync rate; a batch shares one fsync among all its callers.
//
// Each caller's work runs inside its own SAVEPOINT, so a caller whose
// function fails is rolled back alone and cannot poison the batch. A caller
// returns only after the batch's COMMIT, so nothing is acknowledged before it
// is durable. Batches form only from callers already waiting: the writer
// never delays a commit to grow one.

// ErrClosed is returned by Write, and by reads, after Close.
var ErrClosed = store.ErrClosed

// writeRequest is one caller's write transaction waiting for the writer.
type writeRequest struct {
	ctx      context.Context
	fn       func(store.Tx) error
	done     chan error
	panicked any // a panic of fn, re-raised in the caller's goroutine
}

// call runs the caller's function, catching a panic so that it rolls back
// like an error and surfaces where the caller can see it.
func (r *writeRequest) call(t store.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.panicked = p
			err = fmt.Errorf("write function panicked: %v", p)
		}
	}()
	return r.fn(t)
}

// Write runs fn in a write transaction and returns after it committed.
// Callers of this process queue for the single writer, honouring ctx until
// their turn comes; once fn started, Write waits for the commit.
func (s *Store) Write(ctx context.Context, fn func(store.Tx) error) error {
	if s.readOnly != "" {
		return s.errReadOnly()
	}
	req := &writeRequest{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return ErrClosed
	}
	err := <-req.done
	if req.panicked != nil {
		panic(req.panicked)
	}
	return err
}

// runWriter serves write requests until the store closes.
func (s *Store) runWriter() {
	defer close(s.writerDone)
	for {
		var first *writeRequest
		select {
		case first = <-s.requests:
		case <-s.closing:
			return
		}
		batch := []*writeRequest{first}
	collect:
		for len(batch) < s.maxBatch {
			select {
			case req := <-s.requests:
				batch = append(batch, req)
			default:
				break collect
			}
		}
		s.commitBatch(batch)
	}
}

// commitBatch runs the batch's functions in one BEGIN IMMEDIATE transaction
// and tells each caller its outcome.
func (s *Store) commitBatch(batch []*writeRequest) {
	results := make([]error, len(batch))
	defer func() {
		for i, req := range batch {
			req.done <- results[i]
		}
	}()
	fail := func(err error) {
		for i := range results {
			if results[i] == nil {
				results[i] = err
			}
		}
	}

	sqlTx, err := s.writer.BeginTx(context.Background(), nil)
	if err != nil {
		fail(fmt.Errorf("begin write: %w", interpretError(err)))
		return
	}
	t := s.newTx(sqlTx)
	committed := 0
	for i, req := range batch {
		if err := req.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if len(batch) == 1 {
			results[i] = req.call(t)
		} else {
			results[i], err = s.inSavepoint(sqlTx, func() error { return req.call(t) })
			if err != nil {
				// The transaction itself is broken: nothing of it commits.
				fail(err)
				_ = sqlTx.Rollback()
				return
			}
		}
		if results[i] == nil {
			committed++
		}
	}
	if committed == 0 {
		_ = ignoreDone(sqlTx.Rollback())
		return
	}
	if err := sqlTx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", interpretError(err)))
		// Callers whose own function failed keep their error; the others
		// learn that their work did not commit.
	}
}

// inSavepoint runs fn inside a savepoint and rolls only fn's work back when
// it fails. fnErr is fn's error; err reports a failure of the savepoint
// statements themselves, after which the transaction cannot go on.
//
// SAVEPOINT statements are not queries sqlc compiles, so their text lives
// here, next to the pragma reads, as the only SQL outside db/queries.
func (s *Store) inSavepoint(sqlTx *sql.Tx, fn func() error) (fnErr, err error) {
	ctx := context.Background()
	if _, err := sqlTx.ExecContext(ctx, "SAVEPOINT write_request"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", interpretError(err))
	}
	if fnErr = fn(); fnErr != nil {
		if _, err := sqlTx.ExecContext(ctx, "ROLLBACK TO write_request"); err != nil {
			return fnErr, fmt.Errorf("rollback to savepoint: %w", interpretError(err))
		}
	}
	if _, err := sqlTx.ExecContext(ctx, "RELEASE write_request"); err != nil {
		return fnErr, fmt.Errorf("release savepoint: %w", interpretError(err))
	}
	return fnErr, nil
}
