package engine

import (
	"errors"

	"github.com/flowlite/flowlite/flow/flowtype"

	"github.com/flowlite/flowlite/internal/store"
)

// failureOf returns the recorded shape of err: the Code and Details of the
// first *flowtype.Error in its chain, or else the engine code of the
// flowlite sentinel it matches (flowtype.EngineCode), so that the error
// rebuilt from the record (recordedError) matches what err matched.
func failureOf(err error) store.Failure {
	var f store.Failure
	var coded *flowtype.Error
	if errors.As(err, &coded) {
		f.Code, f.Details = coded.Code, coded.Details
	} else {
		f.Code = flowtype.EngineCode(err)
	}
	var perm *flowtype.PermanentError
	f.Permanent = errors.As(err, &perm)
	return f
}

// recordedError rebuilds the error a step failed with from its record: a
// *flowtype.Error, wrapped in a *flowtype.PermanentError when it was
// permanent. Replays and the first execution both hand the workflow this
// value, so a body that branches on it takes the same path every time.
func recordedError(message string, f store.Failure) error {
	err := error(&flowtype.Error{Code: f.Code, Message: message, Details: f.Details})
	if f.Permanent {
		err = &flowtype.PermanentError{Err: err}
	}
	return err
}
