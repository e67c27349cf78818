package flow

import (
	"errors"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Sentinel errors.
var (
	// ErrRunNotFound is returned when no run has the given ID.
	ErrRunNotFound = flowtype.ErrRunNotFound
	// ErrRunExists is returned by Start when the run ID belongs to a run of
	// another workflow. (Starting an ID of the same workflow returns the
	// existing run.)
	ErrRunExists = flowtype.ErrRunExists
	// ErrUnknownWorkflow is returned by Start for a workflow version that is
	// not registered with the engine.
	ErrUnknownWorkflow = flowtype.ErrUnknownWorkflow
	// ErrRunFinished is returned by Cancel for a run that already finished.
	ErrRunFinished = flowtype.ErrRunFinished
	// ErrRolledBack matches the error of a run whose completed steps were
	// compensated after its workflow failed (see RolledBackError).
	ErrRolledBack = flowtype.ErrRolledBack
	// ErrSuspended matches the error of a run parked for an operator (see
	// SuspendedError).
	ErrSuspended = flowtype.ErrSuspended
	// ErrCancelled is the cause of a cancelled run's context, and matches the
	// error Result returns for it.
	ErrCancelled = flowtype.ErrCancelled
	// ErrConflict is returned by operator actions on a run in the wrong
	// state, e.g. Resume of a run that is not suspended.
	ErrConflict = flowtype.ErrConflict
	// ErrSchemaTooNew is returned by a backend's Open (flowsqlite.Open,
	// flowsqlite.New) for a database migrated by a newer flowlite.
	ErrSchemaTooNew = store.ErrSchemaTooNew
	// ErrNotDatabase is returned by a backend's Open for what is not a
	// database of its kind (flowsqlite.Open: a file that is not a SQLite
	// database, or is corrupt).
	ErrNotDatabase = store.ErrNotDatabase
	// ErrCorrupt is returned by flowsqlite.Open and New, with ErrNotDatabase, for a
	// database whose pages SQLite's quick_check finds damaged: flowlite
	// refuses to write to it. Restore a backup, or copy out what is
	// readable (sqlite3 .recover) into a new file.
	ErrCorrupt = store.ErrCorrupt
	// ErrReadOnly is returned by flowsqlite.Open for a database it cannot
	// write (the file, or its directory, where SQLite keeps the -wal and
	// -shm files), and by every write of an engine opened with
	// flowsqlite.OpenReadOnly.
	ErrReadOnly = flowtype.ErrReadOnly
	// ErrShardSet is returned by NewSharded (flowsqlite.OpenShards) for
	// files that do not form the shard set they record (one missing or
	// added, out of order, from another set), by New for one file of a
	// set opened alone to write, and by a start on one shard's engine
	// (Engine.Shard) of a run that belongs in another shard.
	ErrShardSet = flowtype.ErrShardSet
	// ErrSharded is returned on a sharded engine by the calls that belong
	// to one file (Changes, Backup, FileHealth, StartTx…): make them on
	// Engine.Shard(i).
	ErrSharded = flowtype.ErrSharded
	// ErrDiskFull matches a write the database refused because it, or the
	// disk under it, is full. The engine retries such writes, then gives up
	// with a *WriteError that matches it; nothing recorded is lost.
	ErrDiskFull = flowtype.ErrDiskFull
	// ErrClosed is returned by the calls of an engine whose database Close
	// closed, e.g. Run.Result waiting while the engine closes.
	ErrClosed = flowtype.ErrClosed
	// ErrPayloadTooLarge is returned by Start, StartTx, Enqueue, EnqueueTx,
	// Signal and Schedule for a value whose JSON encoding is over
	// Config.MaxPayloadBytes, with nothing recorded; a step whose output
	// is over it fails for good with a StepError matching it, and a
	// workflow whose output is over it fails (and is compensated).
	ErrPayloadTooLarge = flowtype.ErrPayloadTooLarge
	// ErrInvalidName matches the *NameError returned for a workflow, job,
	// step, queue, signal or schedule name that breaks the naming rules
	// (see MaxNameBytes), and for a run ID, unique key, concurrency key or
	// debounce key that breaks them (see MaxKeyBytes).
	ErrInvalidName = flowtype.ErrInvalidName
	// ErrBusy is returned by a call that writes (Start, Signal, Cancel,
	// operator actions…) when another connection, usually another process
	// or a tool, held the database's write lock for longer than the
	// backend's busy timeout (flowsqlite's Options.BusyTimeout). The message names the file and the wait; nothing
	// of the call was written, so it can be retried.
	ErrBusy = flowtype.ErrBusy
	// ErrUnavailable matches the error of a call that could not reach the
	// database server, or whose connection broke or was ended by the
	// server (flowpg: a restart, pg_terminate_backend). The engine rides
	// such breaks out on its own: it retries its writes, reconnects, and
	// Run.Result keeps waiting through them until its context ends (its
	// error then matches both the context's error and ErrUnavailable). A
	// Start that failed so may have been recorded: start again with the
	// same run ID, which finds it.
	ErrUnavailable = flowtype.ErrUnavailable
)

// MaxNameBytes is the longest name of a workflow, job, step, queue, signal
// or schedule, in bytes. A name must also be valid UTF-8, not empty or only
// white space, and free of control characters (newline, tab, NUL…): names
// are stored in every row that refers to them and printed one per line by
// flowlite. Names are checked where they enter: Register and RegisterJob
// (workflow and job names, Job.Queue), Config.Queues at Open and New, the
// options of Start, Enqueue and StartChild (queues), Signal and Receive
// (signal names), Schedule, and Do (step names, at each call: steps are
// not registered). A refused name changes nothing recorded.
const MaxNameBytes = flowtype.MaxNameBytes

// MaxKeyBytes is the longest run ID, unique key, concurrency key or
// debounce key, in bytes (concurrency and debounce keys have their own,
// shorter limit of 256 bytes). IDs and keys follow the other rules of names, and for
// the same reasons: they are stored, indexed, and printed one per line by
// flowlite, so a newline or a NUL in a run ID would make lists and
// histories ambiguous. They may be longer than names, as they are often
// composed of several values (a child's default ID extends its parent's).
// They are checked where they enter: the options of Start, StartTx,
// StartMany, Enqueue, EnqueueTx, EnqueueMany and StartChild, with a
// *NameError whose Kind is "run ID", "unique key", "concurrency key" or
// "debounce key"; nothing is recorded then.
const MaxKeyBytes = flowtype.MaxKeyBytes

// DefaultMaxPayloadBytes is the default of Config.MaxPayloadBytes: 4 MiB.
const DefaultMaxPayloadBytes = engine.DefaultMaxPayloadBytes

// Error types. Each unwraps to its cause where it has one. They are
// defined in package flowtype, where go doc shows their fields.
type (
	// StepError is returned by Do when a step failed for good. See
	// [flowtype.StepError] for its fields.
	StepError = flowtype.StepError
	// DecodeError reports a stored value that does not decode into the type
	// the code expects; the run is suspended and nothing recorded changes.
	// See [flowtype.DecodeError] for its fields.
	DecodeError = flowtype.DecodeError
	// RolledBackError is Result's error for a run whose workflow failed and
	// whose completed steps were all compensated; it matches ErrRolledBack.
	// See [flowtype.RolledBackError] for its fields.
	RolledBackError = flowtype.RolledBackError
	// SuspendedError is Result's error for a run parked for an operator; it
	// matches ErrSuspended. See [flowtype.SuspendedError] for its fields.
	SuspendedError = flowtype.SuspendedError
	// CancelledError is Result's error for a cancelled run; it matches
	// ErrCancelled. See [flowtype.CancelledError] for its fields.
	CancelledError = flowtype.CancelledError
	// WriteError is Result's error, on the engine that executed the run,
	// when the run's state could not be written however often it was
	// retried; the run resumes later from its last checkpoint. See
	// [flowtype.WriteError] for its fields.
	WriteError = flowtype.WriteError
	// PermanentError marks an error that is not retried; see Permanent and
	// [flowtype.PermanentError].
	PermanentError = flowtype.PermanentError
	// NameError reports a name that breaks the naming rules (see
	// MaxNameBytes); it matches ErrInvalidName. See [flowtype.NameError]
	// for its fields.
	NameError = flowtype.NameError
)

// Permanent marks err as not worth retrying: the step (or compensation)
// fails at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	var p *PermanentError
	if errors.As(err, &p) {
		return err
	}
	return &PermanentError{Err: err}
}
