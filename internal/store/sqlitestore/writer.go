package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The writer commits many callers' write transactions in one SQLite
// transaction (group commit). With synchronous=FULL every commit costs an
// fsync, so committing one caller at a time caps the engine at the disk's
// sync rate; a batch shares one fsync among all its callers.
//
// Each caller's work runs inside its own SAVEPOINT, so a caller whose
// function fails is rolled back alone and cannot poison the batch. Its
// statements run detached from its context (see detach.go), which is
// checked before and after its function instead; a batch whose transaction
// is lost anyway is retried without the caller at fault (see commitBatch). A caller
// returns only after the batch's COMMIT, so nothing is acknowledged before it
// is durable. Batches form only from callers already waiting: the writer
// never delays a commit to grow one.
//
// A retry calls the functions of the callers it retries again. A caller
// whose function must run at most once (store.OnlyOnce: a RunTx step's body,
// whose effects outside the transaction no rollback undoes) runs last in
// its batch, one per batch: no later caller can lose its work, and a loss
// during its own function is its error, not a retry.

// writeRequest is one caller's write transaction waiting for the writer.
type writeRequest struct {
	ctx      context.Context
	fn       func(store.Tx) error
	once     bool // fn must not be called twice (store.OnlyOnce)
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
	req := &writeRequest{ctx: ctx, fn: fn, once: store.IsOnlyOnce(ctx), done: make(chan error, 1)}
	select {
	case s.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return flowtype.ErrClosed
	}
	err := <-req.done
	if req.panicked != nil {
		panic(req.panicked)
	}
	return err
}

// runWriter serves write requests, and holds (HoldWrites), until the store
// closes.
func (s *Store) runWriter() {
	defer close(s.writerDone)
	var held *writeRequest // a second once-caller, kept for the next batch
	for {
		// A hold goes before the next batch, however many callers wait:
		// whoever holds the writer is already waiting for the batch in
		// progress, and gets the write lock at its end.
		select {
		case h := <-s.holds:
			s.serveHold(h)
			continue
		default:
		}
		var batch []*writeRequest
		once := held
		held = nil
		if once == nil {
			select {
			case h := <-s.holds:
				s.serveHold(h)
				continue
			case req := <-s.requests:
				if req.once {
					once = req
				} else {
					batch = append(batch, req)
				}
			case <-s.closing:
				return
			}
		}
		room := func() bool {
			if once != nil {
				return len(batch)+1 < s.maxBatch
			}
			return len(batch) < s.maxBatch
		}
	collect:
		for room() {
			select {
			case req := <-s.requests:
				switch {
				case !req.once:
					batch = append(batch, req)
				case once == nil:
					once = req
				default:
					held = req
					break collect
				}
			default:
				break collect
			}
		}
		if once != nil {
			batch = append(batch, once) // last: see the top of this file
		}
		s.commitBatch(batch)
		s.noteWALSize()
	}
}

// A writeHold keeps the writer between two of its transactions until
// released: see HoldWrites.
type writeHold struct{ release chan struct{} }

// HoldWrites keeps this store's writer from starting a transaction until
// release is called, and returns once the writer is between two
// transactions. Callers' writes wait meanwhile (they queue as usual).
//
// It is for a connection of this process that needs SQLite's write lock,
// several times in a row, while the writer is busy: the writer takes the
// lock again a few microseconds after each commit, and SQLite's busy
// handler, which polls with sleeps of milliseconds, keeps losing that race.
// Litestream's checkpoints are such writes (flow/flowlitestream).
func (s *Store) HoldWrites(ctx context.Context) (release func(), err error) {
	if s.readOnly != "" {
		return nil, s.errReadOnly()
	}
	h := &writeHold{release: make(chan struct{})}
	select {
	case s.holds <- h: // received by the writer, between transactions
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closing:
		return nil, flowtype.ErrClosed
	}
	var once sync.Once
	return func() { once.Do(func() { close(h.release) }) }, nil
}

// serveHold waits, outside any transaction, until h is released or the
// store closes.
func (s *Store) serveHold(h *writeHold) {
	select {
	case <-h.release:
	case <-s.closing:
	}
}

// noteWALSize wakes the WAL watch when the WAL is past half of WALLimit,
// the size at which the watch truncates it. The watch also looks by
// itself, often enough at the WAL's recent rate of growth; but a commit
// burst on a loaded machine, where the watch's timer fires late, could
// carry the WAL past the limit in between. A stat per batch costs about a
// microsecond against the batch's fsync.
func (s *Store) noteWALSize() {
	if s.path == "" || s.checkpointInterval < 0 {
		return
	}
	info, err := os.Stat(s.path + "-wal")
	if err != nil || info.Size() <= s.walLimit/2 {
		return
	}
	select {
	case s.walGrew <- struct{}{}:
	default: // the watch is already woken
	}
}

// commitBatch runs the batch's functions in one BEGIN IMMEDIATE transaction
// and tells each caller its outcome. One caller never fails another: when
// the batch's transaction is lost as a whole (an interrupt, SQLITE_FULL,
// an I/O error roll it back, not just the failing statement), the callers
// whose work was lost with it are retried in a fresh transaction, and after
// a second loss each alone, so that only the caller at fault keeps failing.
// A once-caller (last in the batch, so only a loss during its own function
// can lose its work) is not retried once its function ran: it gets the
// error that lost the transaction.
func (s *Store) commitBatch(batch []*writeRequest) {
	for round := 0; len(batch) > 0; round++ {
		if round < 2 {
			batch = s.commitGroup(batch)
			continue
		}
		for _, req := range batch {
			// A group of one runs no savepoint and so is never retried.
			s.commitGroup([]*writeRequest{req})
		}
		return
	}
}

// commitGroup runs one transaction for group, tells each caller whose
// outcome it settled, and returns the callers to retry: those whose work
// was rolled back with the whole transaction through no fault of theirs.
func (s *Store) commitGroup(group []*writeRequest) (retry []*writeRequest) {
	results := make([]error, len(group))
	settled := make([]bool, len(group))
	defer func() {
		for i, req := range group {
			if settled[i] {
				req.done <- results[i]
			}
		}
	}()
	settle := func(i int, err error) { results[i], settled[i] = err, true }
	failRest := func(err error) {
		for i := range group {
			if !settled[i] {
				settle(i, err)
			}
		}
	}

	sqlTx, err := s.begin()
	if err != nil {
		failRest(err)
		return nil
	}
	t := s.newTx(sqlTx)
	committed := 0
	for i, req := range group {
		if len(group) == 1 {
			settle(i, req.callChecked(t))
			if results[i] == nil {
				committed++
			}
			break
		}
		called := false
		fnErr, txErr := s.inSavepoint(sqlTx, func() error { called = true; return req.callChecked(t) })
		if txErr != nil {
			// The transaction is gone: nothing of it commits. The callers
			// before i whose function succeeded lost their work, and those
			// after i have not run: retry them. Caller i is retried too
			// unless its own context ended (its statement was the one
			// interrupted) or it is a once-caller whose function ran; if
			// it is at fault otherwise, the retries that end with each
			// caller alone single it out.
			_ = ignoreDone(sqlTx.Rollback())
			for j := range group {
				switch {
				case j < i && results[j] != nil:
					// Its own failure, rolled back alone: settled.
				case j == i && req.ctx.Err() != nil:
					settle(j, cmp.Or(fnErr, req.ctx.Err()))
				case j == i && req.once && called:
					settle(j, cmp.Or(fnErr, txErr))
				case j < i && group[j].once:
					// Not reached while a once-caller runs last; were it
					// to run earlier, its function must not run again.
					settle(j, fmt.Errorf("transaction lost after the write function ran: %w", txErr))
				default:
					settled[j] = false
					retry = append(retry, group[j])
				}
			}
			return retry
		}
		settle(i, fnErr)
		if fnErr == nil {
			committed++
		}
	}
	if committed == 0 {
		_ = ignoreDone(sqlTx.Rollback())
		return nil
	}
	if err := sqlTx.Commit(); err != nil {
		// Callers whose own function failed keep their error; the others
		// learn that their work did not commit.
		err = fmt.Errorf("commit: %w", s.busyError(interpretError(err), 0))
		for i := range group {
			if results[i] == nil {
				results[i] = err
			}
		}
		return nil
	}
	s.committed.Notify()
	return nil
}

// begin starts the batch's BEGIN IMMEDIATE transaction. SQLite waits out a
// lock held by another connection for busy_timeout itself, but a few busy
// cases return at once (e.g. while another process recovers the WAL), so a
// BUSY is retried with backoff until the busy timeout is spent; only then
// does the batch fail, with ErrBusy naming the file and the wait.
func (s *Store) begin() (*sql.Tx, error) {
	start := time.Now()
	backoff := time.Millisecond
	for {
		sqlTx, err := s.writer.BeginTx(context.Background(), nil)
		if err == nil {
			return sqlTx, nil
		}
		err = interpretError(err)
		waited := time.Since(start)
		if !errors.Is(err, flowtype.ErrBusy) || waited+backoff > s.busyTimeout {
			return nil, fmt.Errorf("begin write: %w", s.busyError(err, waited))
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// callChecked runs the caller's function unless its context ended, and
// reports the context's error when it ended while the function ran: the
// statements ran detached from it (see detach.go), so the check here is
// what makes a caller that gave up roll back rather than commit.
func (r *writeRequest) callChecked(t store.Tx) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	err := r.call(t)
	if err == nil {
		err = r.ctx.Err()
	}
	return err
}

// inSavepoint runs fn inside a savepoint and rolls only fn's work back when
// it fails. fnErr is fn's error; err reports a failure of the savepoint
// statements themselves, which means the transaction was rolled back as a
// whole (ROLLBACK TO or RELEASE then find no savepoint) or cannot go on.
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
