package flow

import (
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Error is a step error that keeps its shape in a run's history: Code,
// Message and Details come back unchanged on every replay. See
// [flowtype.Error] for its fields.
type Error = flowtype.Error

// NonDeterminismError reports a replay that diverged from the run's
// recorded history; the run is suspended. See [flowtype.NonDeterminismError]
// for its fields.
type NonDeterminismError = flowtype.NonDeterminismError

// Codes of the errors the engine itself records; see [flowtype.Error] and
// [flowtype.CodeRunExists] and the constants after it. A step that fails
// for good with an error matching one of flowlite's sentinels (ErrRunNotFound,
// ErrRunFinished, ErrCancelled…) is recorded with the code that stands for
// it, and the *Error that Do returns on the first execution and on every
// replay matches the same sentinels under errors.Is.
const (
	CodeRunExists = flowtype.CodeRunExists
	CodeDuplicate = flowtype.CodeDuplicate
	// CodePayloadTooLarge: a step's output was over Config.MaxPayloadBytes;
	// the error matches ErrPayloadTooLarge.
	CodePayloadTooLarge  = flowtype.CodePayloadTooLarge
	CodeRunNotFound      = flowtype.CodeRunNotFound
	CodeRunFinished      = flowtype.CodeRunFinished
	CodeUnknownWorkflow  = flowtype.CodeUnknownWorkflow
	CodeConflict         = flowtype.CodeConflict
	CodeDeadlineExceeded = flowtype.CodeDeadlineExceeded
	CodeCancelled        = flowtype.CodeCancelled
	CodeRolledBack       = flowtype.CodeRolledBack
	CodeSuspended        = flowtype.CodeSuspended
	CodeInvalidName      = flowtype.CodeInvalidName
	CodeReadOnly         = flowtype.CodeReadOnly
	CodeDiskFull         = flowtype.CodeDiskFull
	CodeBusy             = flowtype.CodeBusy
	CodeUnavailable      = flowtype.CodeUnavailable
	CodeClosed           = flowtype.CodeClosed
	CodeTimedOut         = flowtype.CodeTimedOut
	CodeScheduleNotFound = flowtype.CodeScheduleNotFound
	CodeBadSpec          = flowtype.CodeBadSpec
	CodeDefinitionFrozen = flowtype.CodeDefinitionFrozen
	CodeNotSupported     = flowtype.CodeNotSupported
	CodeShardSet         = flowtype.CodeShardSet
	CodeSharded          = flowtype.CodeSharded
	CodeTimeout          = flowtype.CodeTimeout
)

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
