package flow

import (
	"context"
	"time"
)

// TypedSignal names a signal and the type of its payload, in one value that
// the workflow receiving the signal and the code sending it share, so that
// the compiler refuses a sender and a receiver that disagree on the type:
//
//	var Decision = flow.NewSignal[DecisionPayload]("decision")
//
//	d, err := Decision.Receive(wc, 24*time.Hour)                    // in the workflow
//	sent, err := Decision.Send(ctx, eng, runID, DecisionPayload{…}, nil) // anywhere
//
// It is the string-named API (Receive, Signal, SignalRun) with the name and
// the type declared once; both forms send and receive the same signals, so
// a program may move to it one call at a time, and a sender that does not
// link the workflow (another service, `flowlite signal`) still sends JSON
// under the name.
//
// By default a payload's fields that T lacks are ignored (see Receive);
// Strict returns the signal with unknown fields refused. The zero value has
// no name: every call with it fails with a *NameError.
type TypedSignal[T any] struct {
	name   string
	strict bool
}

// NewSignal declares the signal called name whose payload is a T. The name
// is checked where it is used (Receive, Send), with the rules of every name
// (see MaxNameBytes).
func NewSignal[T any](name string) TypedSignal[T] {
	return TypedSignal[T]{name: name}
}

// Name returns the signal's name, the one stored and shown in the history.
func (s TypedSignal[T]) Name() string { return s.name }

// Strict returns the signal with strict decoding: a payload with a field T
// does not have is rejected when the run receives it (an EventSignalRejected
// entry in the run's history), instead of the field being ignored. Use it
// when an unknown field means a sender that must be stopped, not a newer
// one; it changes only how this value receives, not what it sends.
func (s TypedSignal[T]) Strict() TypedSignal[T] {
	s.strict = true
	return s
}

// IsStrict reports whether the signal refuses unknown fields (Strict).
func (s TypedSignal[T]) IsStrict() bool { return s.strict }

// Receive waits for the next signal of this name sent to the run and
// returns its payload; see the function Receive for timeout, order and what
// happens to a payload that does not decode into T.
func (s TypedSignal[T]) Receive(wc Context, timeout time.Duration) (T, error) {
	return receive[T](wc, s.name, timeout, s.strict)
}

// Send sends the signal with payload to the run runID, as the function
// Signal does, and reports whether it was stored.
func (s TypedSignal[T]) Send(ctx context.Context, e *Engine, runID string, payload T, opts *SignalOptions) (sent bool, err error) {
	return Signal(ctx, e, runID, s.name, payload, opts)
}

// SendFrom sends the signal from inside a workflow to another run, as
// SignalRun does: a recorded step, never sent twice by a replay.
func (s TypedSignal[T]) SendFrom(wc Context, runID string, payload T) error {
	return SignalRun(wc, runID, s.name, payload)
}
