package flowtype

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Error is an error that keeps its shape in a run's history. A step that
// fails for good is recorded with its message, whether it was permanent,
// and, when its error chain holds an *Error, that Error's Code and Details;
// every execution of the workflow body, the first and each replay, then
// gets the same error back from the step call. Return one (or wrap one)
// from a step to let the workflow branch on the kind of failure:
//
//	var ErrDeclined = &flow.Error{Code: "card_declined"}
//	…
//	return Charge{}, flow.NewError("card_declined", "card ending 4242 declined", details)
//	…
//	if errors.Is(err, ErrDeclined) { … } // true on the first execution and on replays
//
// An error that matches one of flowlite's own sentinels (a step that
// signals a run that does not exist gets ErrRunNotFound, one that cancels a
// finished run ErrRunFinished…) is recorded with the engine code that
// stands for it (CodeRunNotFound, CodeRunFinished…), and the rebuilt *Error
// matches that sentinel under errors.Is, on the first execution and on
// every replay. (Of the sentinels package flow exports, those of opening a
// database, of the change feed and of time travel are not among them; nor
// ErrLostRace, the reason a branch stops, which is never recorded as a
// step's failure.) Any other error survives only as its message: flow.Do's
// *StepError then wraps an *Error with an empty Code, so errors.Is against
// a plain sentinel of the caller's own does not match, on the first
// execution as on replays.
type Error struct {
	// Code says what kind of failure this is, e.g. "card_declined". Two
	// Errors match under errors.Is when their Codes are equal and not
	// empty. Codes starting with "flowlite." are the engine's own.
	Code string
	// Message says what went wrong; Error returns it, or Code when it is
	// empty.
	Message string
	// Details is optional data for the workflow, as JSON (see
	// flow.NewError and DecodeDetails).
	Details json.RawMessage
}

// Codes of the errors the engine itself records. A step error whose chain
// matches one of flowlite's sentinels is recorded with the code that
// stands for it, and the *Error rebuilt from the record matches the same
// sentinels (Error.Is). When a chain matches several, the first code of
// this list wins: the more specific before the more general, the run's
// states before the database's troubles, CodeTimeout last.
const (
	// CodeRunExists is the Code of the error a child start gets when its
	// run ID is taken, and of any error matching ErrRunExists.
	CodeRunExists = "flowlite.run_exists"
	// CodeDuplicate matches ErrDuplicate: a start refused because another
	// run holds its unique key.
	CodeDuplicate = "flowlite.duplicate"
	// CodePayloadTooLarge is the Code of the error of a step whose output
	// was over the engine's payload limit, and of any error matching
	// ErrPayloadTooLarge.
	CodePayloadTooLarge = "flowlite.payload_too_large"
	// CodeRunNotFound matches ErrRunNotFound: e.g. a signal to a run that does
	// not exist.
	CodeRunNotFound = "flowlite.not_found"
	// CodeRunFinished matches ErrRunFinished: e.g. a cancel of a finished
	// run.
	CodeRunFinished = "flowlite.run_finished"
	// CodeUnknownWorkflow matches ErrUnknownWorkflow.
	CodeUnknownWorkflow = "flowlite.unknown_workflow"
	// CodeConflict matches ErrConflict: an operator action on a run in
	// the wrong state.
	CodeConflict = "flowlite.conflict"
	// CodeDeadlineExceeded matches ErrDeadlineExceeded and, as that does,
	// ErrCancelled.
	CodeDeadlineExceeded = "flowlite.deadline_exceeded"
	// CodeScopeCancelled matches ErrScopeCancelled: a call of a
	// cancellation scope that the scope's cancel ended.
	CodeScopeCancelled = "flowlite.scope_cancelled"
	// CodeCancelled matches ErrCancelled: e.g. the result of a cancelled
	// run (CancelledError).
	CodeCancelled = "flowlite.cancelled"
	// CodeRolledBack matches ErrRolledBack (RolledBackError).
	CodeRolledBack = "flowlite.rolled_back"
	// CodeSuspended matches ErrSuspended (SuspendedError).
	CodeSuspended = "flowlite.suspended"
	// CodeInvalidName matches ErrInvalidName (NameError).
	CodeInvalidName = "flowlite.invalid_name"
	// CodeReadOnly matches ErrReadOnly.
	CodeReadOnly = "flowlite.read_only"
	// CodeDiskFull matches ErrDiskFull (flow.ErrDiskFull).
	CodeDiskFull = "flowlite.disk_full"
	// CodeBusy matches ErrBusy.
	CodeBusy = "flowlite.busy"
	// CodeUnavailable matches ErrUnavailable.
	CodeUnavailable = "flowlite.unavailable"
	// CodeClosed matches ErrClosed.
	CodeClosed = "flowlite.closed"
	// CodeTimedOut matches ErrTimedOut.
	CodeTimedOut = "flowlite.timed_out"
	// CodeScheduleNotFound matches ErrScheduleNotFound.
	CodeScheduleNotFound = "flowlite.schedule_not_found"
	// CodeBadSpec matches ErrBadSpec.
	CodeBadSpec = "flowlite.bad_spec"
	// CodeDefinitionFrozen matches ErrDefinitionFrozen.
	CodeDefinitionFrozen = "flowlite.definition_frozen"
	// CodeDefinitionNotFound matches ErrDefinitionNotFound.
	CodeDefinitionNotFound = "flowlite.definition_not_found"
	// CodeNotSupported matches ErrNotSupported.
	CodeNotSupported = "flowlite.not_supported"
	// CodeShardSet matches ErrShardSet.
	CodeShardSet = "flowlite.shard_set"
	// CodeSharded matches ErrSharded.
	CodeSharded = "flowlite.sharded"
	// CodeTimeout is the Code of a step error whose chain held
	// context.DeadlineExceeded, e.g. an attempt that ran out of its
	// Timeout; it matches context.DeadlineExceeded.
	CodeTimeout = "flowlite.timeout"
)

// EngineCode returns the engine code err is recorded with, the first of
// the list above whose sentinels err matches, or "" when it matches none.
// An *Error in err's chain keeps its own Code instead (the engine records
// that one).
func EngineCode(err error) string {
	for _, c := range engineCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// engineCodes pairs each engine code with the sentinel it stands for, in
// the order EngineCode tries them. It is never written.
var engineCodes = [...]struct {
	code string
	err  error
}{
	{CodeRunExists, ErrRunExists},
	{CodeDuplicate, ErrDuplicate},
	{CodePayloadTooLarge, ErrPayloadTooLarge},
	{CodeRunNotFound, ErrRunNotFound},
	{CodeRunFinished, ErrRunFinished},
	{CodeUnknownWorkflow, ErrUnknownWorkflow},
	{CodeConflict, ErrConflict},
	{CodeDeadlineExceeded, ErrDeadlineExceeded},
	{CodeScopeCancelled, ErrScopeCancelled},
	{CodeCancelled, ErrCancelled},
	{CodeRolledBack, ErrRolledBack},
	{CodeSuspended, ErrSuspended},
	{CodeInvalidName, ErrInvalidName},
	{CodeReadOnly, ErrReadOnly},
	{CodeDiskFull, ErrDiskFull},
	{CodeBusy, ErrBusy},
	{CodeUnavailable, ErrUnavailable},
	{CodeClosed, ErrClosed},
	{CodeTimedOut, ErrTimedOut},
	{CodeScheduleNotFound, ErrScheduleNotFound},
	{CodeBadSpec, ErrBadSpec},
	{CodeDefinitionFrozen, ErrDefinitionFrozen},
	{CodeDefinitionNotFound, ErrDefinitionNotFound},
	{CodeNotSupported, ErrNotSupported},
	{CodeShardSet, ErrShardSet},
	{CodeSharded, ErrSharded},
	{CodeTimeout, context.DeadlineExceeded},
}

// Error returns Message, or Code when Message is empty.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Message
}

// Is reports whether target is an *Error with the same non-empty Code, or
// a sentinel that the engine's code e.Code stands for (ErrRunNotFound for
// CodeRunNotFound, context.DeadlineExceeded for CodeTimeout…, and ErrCancelled
// for CodeDeadlineExceeded too): the error a step failed with matches the
// same sentinels after it was recorded as before.
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return e.Code != "" && t.Code == e.Code
	}
	if !strings.HasPrefix(e.Code, "flowlite.") {
		return false
	}
	for _, c := range engineCodes {
		if c.code == e.Code {
			// The sentinel, and what it matches itself (ErrDeadlineExceeded
			// wraps ErrCancelled).
			return errors.Is(c.err, target)
		}
	}
	return false
}

// DecodeDetails decodes Details into v.
func (e *Error) DecodeDetails(v any) error {
	if len(e.Details) == 0 {
		return errors.New("error " + e.Code + " has no details")
	}
	return json.Unmarshal(e.Details, v)
}

// NonDeterminismError reports a replay that diverged from the run's
// recorded history: at Position of Branch, the history recorded one call
// (a step, a sleep, a receive, a child, a race) and the workflow code now
// makes another, or returns without making it. The run is suspended,
// nothing recorded changes and no new call runs: deploy code that matches
// the history (or register the old Version again) and resume the run, or
// cancel it.
type NonDeterminismError struct {
	// RunID is the run whose replay diverged.
	RunID string
	// Branch is the scope of the branch of flow.All or flow.First the call
	// was made in, such as "all0.1" (the first All's second branch), or of
	// the cancellation scope (flow.WithCancel), such as "scope0"; empty
	// for the workflow body itself.
	Branch string
	// Position is the index of the call in its branch, from 0.
	Position int
	// Recorded describes the call the history has there, e.g.
	// `step "charge"`.
	Recorded string
	// Replayed describes the call the code makes now; empty when the body
	// returned instead of making the recorded call.
	Replayed string
}

// Error names the run, the position, and both calls.
func (e *NonDeterminismError) Error() string {
	where := "the workflow body"
	if e.Branch != "" {
		where = "branch " + e.Branch
	}
	now := "calls " + e.Replayed
	if e.Replayed == "" {
		now = "returns"
	}
	return fmt.Sprintf("run %s: replay diverged from the recorded history at call %d of %s: the history has %s, the workflow code now %s; was the workflow changed without a new Version?",
		e.RunID, e.Position+1, where, e.Recorded, now)
}
