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
	ErrRunNotFound = store.ErrNotFound
	// ErrRunExists is returned by Start when the run ID belongs to a run of
	// another workflow. (Starting an ID of the same workflow returns the
	// existing run.)
	ErrRunExists = engine.ErrRunExists
	// ErrUnknownWorkflow is returned by Start for a workflow version that is
	// not registered with the engine.
	ErrUnknownWorkflow = engine.ErrUnknownWorkflow
	// ErrRunFinished is returned by Cancel for a run that already finished.
	ErrRunFinished = engine.ErrRunFinished
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
	ErrConflict = store.ErrConflict
	// ErrSchemaTooNew is returned by Open and New for a database migrated by
	// a newer flowlite.
	ErrSchemaTooNew = store.ErrSchemaTooNew
	// ErrNotDatabase is returned by Open for a file that is not a SQLite
	// database, or is corrupt.
	ErrNotDatabase = store.ErrNotDatabase
	// ErrReadOnly is returned by Open for a database it cannot write.
	ErrReadOnly = store.ErrReadOnly
	// ErrClosed is returned by the calls of an engine whose database Close
	// closed, e.g. Run.Result waiting while the engine closes.
	ErrClosed = store.ErrClosed
	// ErrBusy is returned by a call that writes (Start, Signal, Cancel,
	// operator actions…) when another connection, usually another process
	// or a tool, held the database's write lock for longer than
	// Config.BusyTimeout. The message names the file and the wait; nothing
	// of the call was written, so it can be retried.
	ErrBusy = store.ErrBusy
)

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
	// PermanentError marks an error that is not retried; see Permanent and
	// [flowtype.PermanentError].
	PermanentError = flowtype.PermanentError
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
