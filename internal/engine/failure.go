package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/flowlite/flowlite/internal/store"
)

// Error is an error that keeps its shape in a run's history. A step that
// fails for good is recorded with its message, whether it was permanent,
// and, when its error chain holds an *Error, that Error's Code and
// Details; every execution of the workflow body, the first and each replay,
// then gets the same error back from the step call. Return one (or wrap
// one) from a step to let the workflow branch on the kind of failure:
//
//	var ErrDeclined = &flow.Error{Code: "card_declined"}
//	…
//	return Charge{}, flow.NewError("card_declined", "card ending 4242 declined", details)
//	…
//	if errors.Is(err, ErrDeclined) { … } // true on the first execution and on replays
//
// Any other error type survives only as its message: Do's *StepError
// wraps an *Error with an empty Code, so errors.Is against a plain
// sentinel does not match, on the first execution as on replays.
type Error struct {
	// Code says what kind of failure this is, e.g. "card_declined". Two
	// Errors match under errors.Is when their Codes are equal and not
	// empty.
	Code string
	// Message says what went wrong; Error returns it, or Code when it is
	// empty.
	Message string
	// Details is optional data for the workflow, as JSON (see NewError and
	// DecodeDetails).
	Details json.RawMessage
}

// Codes of the errors the engine itself records.
const (
	// CodeRunExists is the Code of the error a child start gets when its
	// run ID is taken; it matches ErrRunExists.
	CodeRunExists = "flowlite.run_exists"
	// CodeTimeout is the Code of a step error whose chain held
	// context.DeadlineExceeded, e.g. an attempt that ran out of its
	// Timeout; it matches context.DeadlineExceeded.
	CodeTimeout = "flowlite.timeout"
)

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Message
}

// Is reports whether target is an *Error with the same non-empty Code, or
// the sentinel that an engine code stands for.
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return e.Code != "" && t.Code == e.Code
	}
	switch e.Code {
	case CodeRunExists:
		return target == ErrRunExists
	case CodeTimeout:
		return target == context.DeadlineExceeded
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

// failureOf returns the recorded shape of err.
func failureOf(err error) store.Failure {
	var f store.Failure
	var coded *Error
	switch {
	case errors.As(err, &coded):
		f.Code, f.Details = coded.Code, coded.Details
	case errors.Is(err, context.DeadlineExceeded):
		f.Code = CodeTimeout
	}
	var perm *PermanentError
	f.Permanent = errors.As(err, &perm)
	return f
}

// recordedError rebuilds the error a step failed with from its record: an
// *Error, wrapped in a *PermanentError when it was permanent. Replays and
// the first execution both hand the workflow this value, so a body that
// branches on it takes the same path every time.
func recordedError(message string, f store.Failure) error {
	err := error(&Error{Code: f.Code, Message: message, Details: f.Details})
	if f.Permanent {
		err = &PermanentError{Err: err}
	}
	return err
}
