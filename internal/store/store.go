// Package store is the storage seam of flowlite: the interfaces a database
// adapter implements, the record types they exchange, and the sentinel errors
// they return. The engine depends on this package only, never on an adapter,
// so an adapter (SQLite today, PostgreSQL next) can be swapped, and a
// group-commit writer can be put behind Write, without the engine changing.
//
// It imports the standard library and flow/flowtype only: the record types
// flow shows its users (RunStatus, CatchUp, checkpoint modes…) are defined
// there, in a leaf package go doc can show, and aliased here.
package store

import (
	"context"
	"database/sql"
	"errors"
)

// Sentinel errors returned by adapters.
var (
	// ErrNotFound is returned when a run does not exist.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost is returned by fenced writes when the caller no longer
	// holds the lease of the run it writes to.
	ErrLeaseLost = errors.New("lease lost")
	// ErrConflict is returned when a guarded state change does not apply
	// because the row is not in the expected state.
	ErrConflict = errors.New("state conflict")
	// ErrSchemaTooNew is returned when the database was migrated by a newer
	// binary than this one.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrNotDatabase is returned when a file is not a SQLite database.
	ErrNotDatabase = errors.New("file is not a database")
	// ErrReadOnly is returned when the database cannot be written.
	ErrReadOnly = errors.New("database is read-only")
	// ErrClosed is returned by every operation on a store after Close.
	ErrClosed = errors.New("store is closed")
	// ErrBusy is returned when another connection (usually another
	// process) held the database's write lock for longer than the store's
	// busy timeout. Nothing of the failed call was written.
	ErrBusy = errors.New("database is locked")
)

// Store is a database holding runs, their steps and their history.
//
// All writes go through Write, which serializes them through one writer, so
// a later adapter can commit many callers' transactions in one database
// transaction without the engine noticing.
type Store interface {
	// Write runs fn in a write transaction (BEGIN IMMEDIATE on SQLite) and
	// commits it when fn returns nil. It returns after the commit is durable.
	Write(ctx context.Context, fn func(Tx) error) error
	// WriteInTx runs fn on the caller's own transaction; the caller commits.
	WriteInTx(ctx context.Context, tx *sql.Tx, fn func(Tx) error) error
	// Reader returns read-only access outside any write transaction.
	Reader() Reader
	// Close releases the database handles the store opened.
	Close() error
}

// Reader reads state.
type Reader interface {
	RunGet(ctx context.Context, id string) (Run, error)
	RunList(ctx context.Context, p RunListParams) ([]Run, error)
	RunCountByStatus(ctx context.Context) (map[RunStatus]int64, error)
	RunCountUnrunnable(ctx context.Context, known []WorkflowKey) ([]UnrunnableCount, error)
	StepList(ctx context.Context, runID string) ([]Step, error)
	EventList(ctx context.Context, runID string) ([]Event, error)
	SignalList(ctx context.Context, runID string) ([]Signal, error)
	WorkflowList(ctx context.Context) ([]WorkflowKey, error)
	ScheduleReader
	QueueReader
	ReportReader
}

// Tx is a write transaction. Methods that take a Lease are fenced: they
// return ErrLeaseLost when the lease no longer belongs to the caller.
type Tx interface {
	Reader

	// SQL returns the database transaction, for steps whose own writes
	// commit together with their checkpoint.
	SQL() *sql.Tx

	// RunInsert inserts a pending run; it reports false (changing nothing)
	// when a run with that ID already exists, or when p.UniqueKey is taken
	// (see QueueReader).
	RunInsert(ctx context.Context, p RunInsertParams) (bool, error)
	RunClaim(ctx context.Context, p RunClaimParams) ([]Run, error)
	// RunHeartbeat extends a lease and reports whether cancellation of the
	// run was requested.
	RunHeartbeat(ctx context.Context, l Lease, expiresAt, now int64) (cancelRequested bool, err error)
	// RunLeaseCheck proves, without writing, that the lease still belongs
	// to the caller (until the transaction commits), and reports whether
	// cancellation of the run was requested.
	RunLeaseCheck(ctx context.Context, l Lease) (cancelRequested bool, err error)
	RunStartCompensating(ctx context.Context, l Lease, errMsg string, now int64) error
	// RunRelease gives the lease back; the run is due again at p.RunAt, or
	// at once if it was woken after the worker read p.WakeSeq.
	RunRelease(ctx context.Context, l Lease, p RunReleaseParams) error
	// RunWake tells an unfinished run that something it may wait for
	// happened; it reports false for a finished or unknown run.
	RunWake(ctx context.Context, id string, now int64) (bool, error)
	// RunCancelChildren requests cancellation of the unfinished children of
	// a run and returns their IDs.
	RunCancelChildren(ctx context.Context, parentID string, now int64) ([]string, error)
	RunFinish(ctx context.Context, l Lease, p RunFinishParams) error
	RunRescue(ctx context.Context, now int64, limit int) ([]RescuedRun, error)
	// RunCancelIdle cancels, at once and with error errMsg, a run that no
	// worker executes (pending or waiting, unleased) and that has no
	// completed step with a compensation; it reports false, changing
	// nothing, for any other run.
	RunCancelIdle(ctx context.Context, id, errMsg string, now int64) (bool, error)
	// RunCancelToUnwind moves a run that no worker executes (pending or
	// waiting, unleased) to compensating with its cancellation requested,
	// due now; it reports false, changing nothing, for any other run.
	RunCancelToUnwind(ctx context.Context, id, errMsg string, now int64) (bool, error)
	// RunRequestCancel marks an unfinished run for cancellation and reports
	// false when the run is not pending, running or compensating.
	RunRequestCancel(ctx context.Context, id string, now int64) (bool, error)
	// RunSetStatus moves an unleased run from expected to status, or returns
	// ErrConflict.
	RunSetStatus(ctx context.Context, p RunSetStatusParams) error

	// StepBegin records the start of an attempt and returns its number.
	StepBegin(ctx context.Context, p StepBeginParams) (attempt int, err error)
	StepComplete(ctx context.Context, p StepCompleteParams) error
	// StepWait records a durable wait the first time a run reaches it; an
	// existing record is left as it is.
	StepWait(ctx context.Context, p StepBeginParams) error
	StepFail(ctx context.Context, p StepFailParams) error
	// StepCompensationArm marks the compensation of every completed,
	// compensable step of a run pending; the unwind of the run starts.
	StepCompensationArm(ctx context.Context, runID string) error
	StepCompensationBegin(ctx context.Context, key StepKey) (attempt int, err error)
	StepCompensationEnd(ctx context.Context, key StepKey, state CompensationState, errMsg string) error
	StepCompensationRetryFailed(ctx context.Context, runID string) (int64, error)
	StepCompensationSkipFailed(ctx context.Context, runID string) (int64, error)

	// SignalSend stores a signal; it reports false when a signal with the
	// same key was already sent to the run.
	SignalSend(ctx context.Context, sig Signal) (bool, error)
	// SignalNext returns the oldest signal of that name the run has not
	// received, or ErrNotFound.
	SignalNext(ctx context.Context, runID, name string) (Signal, error)
	// SignalConsume marks a signal received by the wait consumedBy.
	SignalConsume(ctx context.Context, id int64, consumedBy string) error

	EventAppend(ctx context.Context, e Event) error
	WorkflowRegister(ctx context.Context, k WorkflowKey, now int64) error
	ScheduleTx
	QueueTx
	MaintenanceTx
	ReportTx
	OperatorTx
}
