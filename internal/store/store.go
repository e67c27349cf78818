package store

import (
	"context"
	"database/sql"
	"errors"
)

// Sentinel errors returned by adapters.
var (
	// ErrLeaseLost is returned by fenced writes when the caller no longer
	// holds the lease of the run it writes to.
	ErrLeaseLost = errors.New("lease lost")
	// ErrSchemaTooNew is returned when the database was migrated by a newer
	// binary than this one.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
	// ErrNotDatabase is returned when what the store was opened on is not a
	// database of the adapter's kind (a file that is not a SQLite database,
	// a PostgreSQL database that does not exist), so nothing can be read
	// from it. Its text names no backend; the error wrapping it says which
	// file or database.
	ErrNotDatabase = errors.New("not a database")
	// ErrCorrupt is returned, together with ErrNotDatabase, when a
	// database file's pages are damaged.
	ErrCorrupt = errors.New("database file is corrupt")
)

// Store is a database holding runs, their steps and their history.
//
// Every change goes through Write or WriteInTx as one atomic unit of work,
// or through an optional one-statement write of an adapter that has one
// (Claimer, Starter), which commits on its own; the package doc says what
// the engine relies on from them. How an adapter
// commits is its own affair: the SQLite adapter serializes writes through
// one writer and commits many callers' units in one database transaction.
type Store interface {
	// Write runs fn as one atomic unit of work and commits it when fn
	// returns nil; an error or panic of fn rolls back fn's writes only. It
	// returns after the commit is durable.
	Write(ctx context.Context, fn func(Tx) error) error
	// WriteInTx runs fn on the caller's own transaction; the caller commits.
	WriteInTx(ctx context.Context, tx *sql.Tx, fn func(Tx) error) error
	// Reader returns read-only access outside any write transaction.
	// Each of its reads sees what was committed when it began: two reads
	// may see two states.
	Reader() Reader
	// Read runs fn with a Reader whose reads all see one snapshot: what
	// was committed when its first read began, and nothing committed
	// after. A view made of several reads (a run, its steps and its
	// history, as Inspect shows them) needs it: read apart, a claim and a
	// step's failure can commit between the run's read and its steps',
	// and the view joins the run before its claim with the step after
	// its failure. fn only reads; its error is returned as it is. The
	// SQLite adapter runs fn in one read transaction of its reader pool,
	// pgstore in one REPEATABLE READ READ ONLY transaction; neither holds
	// up a write.
	Read(ctx context.Context, fn func(Reader) error) error
	// Close releases the database handles the store opened.
	Close() error
}

// Reader reads state: the readers of every entity.
type Reader interface {
	RunReader
	StepReader
	EventReader
	SignalReader
	WorkflowReader
	ScheduleReader
	QueueReader
	LimitReader
	ReportReader
	DefinitionReader
	FeedReader
	ExecutionReader
	StreamReader
}

// Tx is a write transaction: it reads like a Reader, seeing its own
// writes, and holds the writes of every entity. Methods that take a Lease
// are fenced: they return ErrLeaseLost when the lease no longer belongs to
// the caller.
type Tx interface {
	Reader

	// SQL returns the database transaction, for steps whose own writes
	// commit together with their checkpoint.
	SQL() *sql.Tx

	RunTx
	StepTx
	SignalTx
	EventTx
	WorkflowTx
	ScheduleTx
	QueueTx
	LimitTx
	MaintenanceTx
	ReportTx
	OperatorTx
	RunOpsTx
	DefinitionTx
	FeedTx
	ReuseTx
	DebounceTx
	ExecutionTx
	StreamTx
}
