package flow

import (
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/internal/engine"
)

// Error is a step error that keeps its shape in a run's history: Code,
// Message and Details come back unchanged on every replay. See
// engine.Error's fields.
type Error = engine.Error

// NonDeterminismError reports a replay that diverged from the run's
// recorded history; the run is suspended. See its fields.
type NonDeterminismError = engine.NonDeterminismError

// NewError returns an *Error with code and message, and details (when not
// nil) encoded as JSON. A step returns it, or wraps it, so that the workflow
// can tell the failure apart with errors.Is or errors.As, on the first
// execution and on every replay alike. Details that do not encode as JSON
// are dropped, and the message says so.
func NewError(code, message string, details any) *Error {
	e := &Error{Code: code, Message: message}
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			e.Message = fmt.Sprintf("%s (details dropped: %v)", message, err)
			return e
		}
		e.Details = b
	}
	return e
}
