package flowtype

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors matched by the error types below, with errors.Is.
// Package flow re-exports them.
var (
	// ErrCancelled is the cause of a run's context when the run was
	// cancelled, and matches the error Result returns for a cancelled run
	// (CancelledError).
	ErrCancelled = errors.New("run cancelled")
	// ErrRolledBack matches the error Result returns for a run whose
	// workflow failed and whose completed steps were all compensated
	// (RolledBackError).
	ErrRolledBack = errors.New("run rolled back")
	// ErrSuspended matches the error Result returns for a run parked for an
	// operator, e.g. after a compensation exhausted its retries
	// (SuspendedError).
	ErrSuspended = errors.New("run suspended")
	// ErrRunExists is returned when a run ID is taken: by Start for a run of
	// another workflow, and by a child start for any run (see the Error
	// with Code CodeRunExists).
	ErrRunExists = errors.New("run ID already used")
	// ErrPayloadTooLarge is returned when a value to be stored (a run's
	// input, a signal's payload, a step's or workflow's output) encodes to
	// more bytes than the engine's limit (flow.Config.MaxPayloadBytes).
	// Every SQLite write holds the database's single writer, so one huge
	// value stalls every run; the error names the value, its size and the
	// limit, and nothing is recorded. A step whose output is too large
	// fails for good with an Error of Code CodePayloadTooLarge, which
	// matches it.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrInvalidName matches the NameError returned for a workflow, job,
	// step, queue, signal or schedule name that breaks the naming rules
	// (see MaxNameBytes), and for a run ID, unique key, concurrency key
	// or debounce key that breaks them (see MaxKeyBytes).
	ErrInvalidName = errors.New("invalid name")

	// The sentinels below are the engine's and its stores'; package flow
	// re-exports them under the same names. They are defined here so that
	// the Error a step failed with keeps matching them when it is rebuilt
	// from the run's history (see Error.Is).

	// ErrRunNotFound is returned for a run, or another record kept with runs,
	// that does not exist.
	ErrRunNotFound = errors.New("not found")
	// ErrDefinitionNotFound is returned for a workflow definition (a name,
	// or a version of it) that the database does not hold. It is not
	// ErrRunNotFound: a caller that looks a definition up, then starts or
	// inspects a run, can tell which of the two is missing.
	ErrDefinitionNotFound = errors.New("definition not found")
	// ErrRunFinished is returned when an operation needs an unfinished run.
	ErrRunFinished = errors.New("run already finished")
	// ErrUnknownWorkflow is returned when a workflow version is not
	// registered with the engine.
	ErrUnknownWorkflow = errors.New("unknown workflow")
	// ErrConflict is returned when a guarded state change does not apply
	// because the run is not in the expected state.
	ErrConflict = errors.New("state conflict")
	// ErrDeadlineExceeded is the cause of a run's context when the run
	// passed its deadline; it matches ErrCancelled, as the run is
	// cancelled.
	ErrDeadlineExceeded = fmt.Errorf("%w: deadline exceeded", ErrCancelled)
	// ErrReadOnly is returned when the database cannot be written.
	ErrReadOnly = errors.New("database is read-only")
	// ErrClosed is returned by the calls of an engine whose store closed.
	ErrClosed = errors.New("store is closed")
	// ErrStreamClosed is returned by a write to a stream of a run that
	// was closed (flow.CloseStream).
	ErrStreamClosed = errors.New("stream closed")
	// ErrDiskFull is returned for a write the database refused because it, or
	// the disk under it, is full.
	ErrDiskFull = errors.New("database or disk is full")
	// ErrBusy is returned when another connection held the database's
	// write lock for longer than the store's busy timeout.
	ErrBusy = errors.New("database is locked")
	// ErrUnavailable is returned when the database server could not be
	// reached, or the connection to it broke or was ended by the server.
	ErrUnavailable = errors.New("database unavailable")
	// ErrTimedOut is returned by flow.Receive when no signal arrived in
	// time.
	ErrTimedOut = errors.New("timed out waiting for signal")
	// ErrScopeCancelled is what the calls made in a cancellation scope
	// (flow.WithCancel) return once the scope was cancelled: a wait ends
	// with it, a step not yet begun is not begun, a running step's context
	// ends with it as cause and the step fails with it. It matches
	// context.Canceled too, but not ErrCancelled: the run goes on.
	ErrScopeCancelled error = scopeCancelledError{}
	// ErrScheduleNotFound is returned for a schedule name that does not
	// exist.
	ErrScheduleNotFound = errors.New("schedule not found")
	// ErrBadSpec wraps the error for a cron spec that does not parse or
	// never fires.
	ErrBadSpec = errors.New("invalid cron spec")
	// ErrDefinitionFrozen is returned for a workflow definition that
	// differs from the stored one of its (name, version) once that version
	// is in use.
	ErrDefinitionFrozen = errors.New("definition version is in use and cannot change")
	// ErrNotSupported is returned for an operation the store cannot
	// perform, e.g. a file operation on a store that is not a database
	// file.
	ErrNotSupported = errors.New("not supported by this store")
	// ErrShardSet is returned for files that do not form the shard set
	// they record, and for a start on one shard's engine of a run that
	// belongs in another shard.
	ErrShardSet = errors.New("shard set mismatch")
	// ErrSharded is returned on a sharded engine by the calls that belong
	// to one file.
	ErrSharded = errors.New("engine is sharded")
)

// Limits on what users name.
const (
	// MaxNameBytes is the longest name, in bytes, of a workflow, job, step,
	// queue, signal or schedule. Names are persisted in every row that refers to
	// them and printed by the CLI and the dashboard, so a name must also be
	// valid UTF-8, not empty or only white space, and free of control
	// characters (newline, tab, NUL…).
	MaxNameBytes = 200
	// MaxKeyBytes is the longest run ID, unique key, concurrency key or
	// debounce key, in bytes (concurrency and debounce keys have their
	// own, shorter limit of 256 bytes).
	// IDs and keys follow the other rules of names (valid UTF-8, not only
	// white space, no control characters) and are refused with the same
	// *NameError; they may be longer, as they are often composed of
	// several values, but stay under the size PostgreSQL can index.
	MaxKeyBytes = 1024
)

// NameError reports a name that breaks the naming rules (see MaxNameBytes).
// It matches ErrInvalidName. Nothing is recorded when a name is refused.
type NameError struct {
	// Kind says what the name names: "workflow", "job", "step", "queue",
	// "signal" or "schedule"; or which ID or key it is: "run ID",
	// "unique key", "concurrency key" or "debounce key".
	Kind string
	// Name is the offending name.
	Name string
	// Rule says which rule it breaks, e.g. "is empty".
	Rule string
}

// Error names the kind, the quoted name and the rule it breaks. An ID or
// a key is not called a name: "invalid run ID …", "invalid unique key …".
func (e *NameError) Error() string {
	if strings.HasSuffix(e.Kind, " ID") || strings.HasSuffix(e.Kind, " key") {
		return fmt.Sprintf("invalid %s %s: %s", e.Kind, quoteName(e.Name), e.Rule)
	}
	return fmt.Sprintf("invalid %s name %s: %s", e.Kind, quoteName(e.Name), e.Rule)
}

// Is reports whether target is ErrInvalidName.
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// quoteName quotes a name for an error message, eliding the middle of a
// very long one so that the message stays readable.
func quoteName(name string) string {
	const keep = 40
	if len(name) <= 2*MaxNameBytes {
		return strconv.Quote(name)
	}
	return strconv.Quote(name[:keep]) + "…" + strconv.Quote(name[len(name)-keep:])
}

// PermanentError marks an error that is not worth retrying: the step or
// compensation that returned it fails at once, whatever its RetryPolicy
// allows. Wrap an error with flow.Permanent rather than building one.
type PermanentError struct {
	// Err is the error that is not retried.
	Err error
}

// Error returns the message of the wrapped error, so that marking an error
// permanent does not change what is recorded.
func (e *PermanentError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// StepError is returned by flow.Do when a step failed for good: its retries
// are exhausted or it returned a permanent error. A replay of the run
// returns an equal error built from what was recorded, so a workflow that
// handles it behaves the same on every replay.
type StepError struct {
	// RunID is the run the step belongs to.
	RunID string
	// Step is the step's name, prefixed with its branch when it was called
	// in a branch of flow.All.
	Step string
	// Occurrence counts the earlier calls of this step name in the run (or
	// branch), from 0, so that a step called in a loop can be told apart.
	Occurrence int
	// Attempts is how many attempts the step made.
	Attempts int
	// Err is the last attempt's error as the history records it, on the
	// first execution as on replays: an *Error with its message and, when
	// the step's error carried one, the Code and Details of its *Error,
	// wrapped in a *PermanentError when it was permanent.
	Err error
}

// Error names the step and its attempts, then the cause.
func (e *StepError) Error() string {
	return fmt.Sprintf("step %s failed after %d attempt(s): %v", e.Step, e.Attempts, e.Err)
}

// Unwrap returns Err.
func (e *StepError) Unwrap() error { return e.Err }

// WriteError is what Result returns, on the engine that executed the run,
// when the run's state could not be written however often it was retried
// (a full disk, a lock held by another process for too long): the run is
// left at its last checkpoint, nothing recorded is lost, and it resumes
// once its lease expires and the database takes writes again. Result may
// be called again to wait for that.
type WriteError struct {
	// RunID is the run whose state was not written.
	RunID string
	// What names the write: "outcome" or "release".
	What string
	// Err is the database's last error; errors.Is sees through it (e.g.
	// flow.ErrDiskFull).
	Err error
}

// Error says what could not be written and why.
func (e *WriteError) Error() string {
	return fmt.Sprintf("run %s: could not record its %s: %v; it stays at its last checkpoint and resumes once the database takes writes", e.RunID, e.What, e.Err)
}

// Unwrap returns Err.
func (e *WriteError) Unwrap() error { return e.Err }

// DecodeError reports a stored value that cannot be decoded into the Go
// type the code expects, typically after a type changed between deploys.
// The run is suspended, not compensated, and nothing recorded changes, so
// that a fixed binary can resume it.
type DecodeError struct {
	// RunID is the run whose value does not decode.
	RunID string
	// Step is the step whose value it is; empty for the workflow's own
	// input or output.
	Step string
	// What is "input" or "output".
	What string
	// Type is the Go type the value was decoded into.
	Type string
	// Err is the decoder's error.
	Err error
}

// Error names the run, the value, the step if any, and the type.
func (e *DecodeError) Error() string {
	if e.Step == "" {
		return fmt.Sprintf("run %s: decode workflow %s into %s: %v", e.RunID, e.What, e.Type, e.Err)
	}
	return fmt.Sprintf("run %s: decode %s of step %s into %s: %v", e.RunID, e.What, e.Step, e.Type, e.Err)
}

// Unwrap returns Err.
func (e *DecodeError) Unwrap() error { return e.Err }

// RolledBackError is the error Result returns for a run whose workflow
// failed and whose completed steps were all compensated. It matches
// ErrRolledBack. Only messages survive in the database, so the workflow's
// error is kept as text.
type RolledBackError struct {
	// RunID is the rolled-back run.
	RunID string
	// Cause is the workflow's error message.
	Cause string
	// Step names the step that failed for good, with the attempts it made,
	// when the workflow failed because of one (the last to fail, if
	// several did); empty when the workflow failed by itself, was
	// cancelled, or its steps could not be read.
	Step string
	// Attempts is how many attempts Step made; zero when Step is empty.
	Attempts int
}

// Error names the run and the workflow's error.
func (e *RolledBackError) Error() string {
	return fmt.Sprintf("run %s rolled back: %s", e.RunID, e.Cause)
}

// Is reports whether target is ErrRolledBack.
func (e *RolledBackError) Is(target error) bool { return target == ErrRolledBack }

// SuspendedError is the error Result returns for a run parked for an
// operator, who may resume, skip or cancel it. It matches ErrSuspended.
type SuspendedError struct {
	// RunID is the suspended run.
	RunID string
	// Reason says why the run was suspended, e.g. the compensation that
	// exhausted its retries.
	Reason string
}

// Error names the run and the reason.
func (e *SuspendedError) Error() string {
	return fmt.Sprintf("run %s suspended: %s", e.RunID, e.Reason)
}

// Is reports whether target is ErrSuspended.
func (e *SuspendedError) Is(target error) bool { return target == ErrSuspended }

// CancelledError is the error Result returns for a cancelled run. It
// matches ErrCancelled.
type CancelledError struct {
	// RunID is the cancelled run.
	RunID string
	// Reason says why, when the run recorded a reason: e.g. the step that
	// cancelled its own run (flow.JobCancel), or its deadline.
	Reason string
}

// Error names the run, and the reason when there is one.
func (e *CancelledError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("run %s cancelled", e.RunID)
	}
	return fmt.Sprintf("run %s cancelled: %s", e.RunID, e.Reason)
}

// Is reports whether t is ErrCancelled.
func (e *CancelledError) Is(t error) bool { return t == ErrCancelled }

// ItemError reports which item of a batch (EnqueueMany, StartMany) made
// the whole batch fail: Index is its position in the slice the caller
// passed, counted from 0. Nothing of the batch was recorded.
type ItemError struct {
	// Index is the item's position in the caller's slice, from 0.
	Index int
	// RunID is the item's run ID; empty when the item failed before it had
	// one.
	RunID string
	// Err is why the item could not be recorded; errors.Is sees through it
	// (e.g. ErrPayloadTooLarge, ErrRunExists).
	Err error
}

// Error names the item and says why it failed.
func (e *ItemError) Error() string {
	if e.RunID == "" {
		return "item " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
	}
	return "item " + strconv.Itoa(e.Index) + " (run " + printableID(e.RunID) + "): " + e.Err.Error()
}

// printableID returns id as it is, or quoted when it holds what would
// break the message's line or hide in it (a refused run ID with a newline
// or invalid UTF-8): an error is printed on one line.
func printableID(id string) string {
	if !utf8.ValidString(id) || strings.ContainsFunc(id, func(r rune) bool {
		return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
	}) {
		return strconv.Quote(id)
	}
	return id
}

// Unwrap returns Err.
func (e *ItemError) Unwrap() error { return e.Err }

// scopeCancelledError is ErrScopeCancelled: an error of its own type so
// that it can match context.Canceled, as the context of a scope's calls
// ends with that error.
type scopeCancelledError struct{}

func (scopeCancelledError) Error() string { return "scope cancelled" }

// Is makes ErrScopeCancelled match context.Canceled.
func (scopeCancelledError) Is(target error) bool { return target == context.Canceled }
