package flowtype

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// Any other error type survives only as its message: flow.Do's *StepError
// then wraps an *Error with an empty Code, so errors.Is against a plain
// sentinel does not match, on the first execution as on replays.
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

// Codes of the errors the engine itself records.
const (
	// CodeRunExists is the Code of the error a child start gets when its
	// run ID is taken; it matches ErrRunExists.
	CodeRunExists = "flowlite.run_exists"
	// CodeTimeout is the Code of a step error whose chain held
	// context.DeadlineExceeded, e.g. an attempt that ran out of its
	// Timeout; it matches context.DeadlineExceeded.
	CodeTimeout = "flowlite.timeout"
	// CodePayloadTooLarge is the Code of the error of a step whose output
	// was over the engine's payload limit; it matches ErrPayloadTooLarge.
	CodePayloadTooLarge = "flowlite.payload_too_large"
)

// Error returns Message, or Code when Message is empty.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Message
}

// Is reports whether target is an *Error with the same non-empty Code, or
// the error that one of the engine's codes stands for (ErrRunExists,
// context.DeadlineExceeded, ErrPayloadTooLarge).
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return e.Code != "" && t.Code == e.Code
	}
	switch e.Code {
	case CodeRunExists:
		return target == ErrRunExists
	case CodeTimeout:
		return target == context.DeadlineExceeded
	case CodePayloadTooLarge:
		return target == ErrPayloadTooLarge
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
	// was made in, such as "all0.1" (the first All's second branch); empty
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
