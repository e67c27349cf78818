package flow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/engine"
)

// ErrTimedOut is returned by Receive when no signal arrived in time.
var ErrTimedOut = flowtype.ErrTimedOut

// ErrDeadlineExceeded is the cause of a run's context once the run passed
// its deadline (StartOptions.Deadline). It matches ErrCancelled: the run is
// cancelled and compensated.
var ErrDeadlineExceeded = flowtype.ErrDeadlineExceeded

// Sleep pauses the run for d on the engine clock. The run holds no worker
// slot and no goroutine while it sleeps, survives restarts, and resumes
// within the poll interval of its due time. On replay the due time recorded
// the first time is kept.
func Sleep(wc Context, d time.Duration) error {
	return wc.runContext().Sleep(d)
}

// SleepUntil pauses the run until t on the engine clock; see Sleep.
func SleepUntil(wc Context, t time.Time) error {
	return wc.runContext().SleepUntil(t)
}

// Receive waits for the next signal called name sent to the run and returns
// its payload. timeout bounds the wait (zero: no bound); when it passes
// first, Receive returns ErrTimedOut. A signal sent before the run waits is
// kept until received; signals of one name are received in the order they
// were sent, each once. The run holds no worker slot while it waits.
//
// Compatibility: fields of the payload that T does not have are ignored,
// at any depth, as protobuf and JSON APIs ignore them, so a sender may add
// a field to its signal type before every receiver knows it (a rolling
// deploy). A field T has but the payload lacks keeps its zero value. To
// refuse unknown fields instead, declare the signal with NewSignal and
// receive it through TypedSignal.Strict; TypedSignal also lets the
// compiler check that the sender and the receiver agree on T.
//
// A signal whose payload does not decode into T (not one JSON value, or a
// field of another type, e.g. a string for a bool) is rejected, not
// received: it is marked so in the database, the run's history gets an
// EventSignalRejected entry naming it and the decoding error, and the run
// goes on waiting for the next signal of that name (within the same
// timeout). Signal only says that the signal was stored, as the sender may
// be another process that does not know T; `flowlite signal` watches the
// history of a run that waits for the signal and reports a rejection. A
// run that recorded such a payload as received before flowlite rejected
// them (it was suspended with a DecodeError on every resume) is mended when
// it is resumed: that receive is reopened and its signal rejected.
//
// An invalid name (see MaxNameBytes) fails the call with a *NameError and
// records nothing; the run is not suspended.
func Receive[T any](wc Context, name string, timeout time.Duration) (T, error) {
	return receive[T](wc, name, timeout, false)
}

// receive is Receive; strict refuses the fields of a payload T lacks.
func receive[T any](wc Context, name string, timeout time.Duration, strict bool) (T, error) {
	var zero T
	if err := engine.CheckName("signal", name); err != nil {
		return zero, fmt.Errorf("receive: %w", err)
	}
	rc := wc.runContext()
	// The engine calls accept on each candidate payload inside the wait's
	// transaction (and on a recorded one when it replays), so the value it
	// decoded last is the one received.
	var v T
	decoded := false
	accept := func(payload []byte) error {
		got, err := decodeSignal[T](payload, strict)
		if err == nil {
			v, decoded = got, true
		}
		return err
	}
	r, err := rc.Receive(name, timeout, accept)
	if err != nil {
		return zero, err
	}
	if r.TimedOut {
		return zero, fmt.Errorf("signal %s: %w after %s", name, ErrTimedOut, timeout)
	}
	if decoded {
		return v, nil
	}
	// Only an unwind replays a receive without vetting it.
	v, err = decodeSignal[T](r.Payload, strict)
	if err != nil {
		return zero, rc.Abort(&DecodeError{RunID: rc.RunID(), Step: "signal " + name, What: "payload", Type: codec.TypeName[T](), Err: err})
	}
	return v, nil
}

// decodeSignal decodes a signal's payload into a T, as Receive does;
// strict refuses the fields of a struct that T does not have.
func decodeSignal[T any](payload []byte, strict bool) (T, error) {
	decode := codec.DecodeTolerant[T]
	if strict {
		decode = codec.Decode[T]
	}
	v, err := decode(payload)
	if err != nil {
		return v, fmt.Errorf("decode into %s: %w", codec.TypeName[T](), err)
	}
	return v, nil
}

// SignalOptions tune one signal. A nil *SignalOptions means the defaults.
type SignalOptions struct {
	// Key makes the send idempotent: a second signal with the same key to
	// the same run is dropped.
	Key string
}

// Signal sends a signal called name with payload to the run runID, and
// reports whether it was stored: false, with nothing changed, when a signal
// with the same opts.Key was sent to the run before (the earlier one
// stands). It is an error to signal an unknown run (ErrRunNotFound) or a
// finished one (ErrRunFinished), to use an invalid name (ErrInvalidName,
// see MaxNameBytes) or to send a payload whose JSON encoding is over
// Config.MaxPayloadBytes (ErrPayloadTooLarge); nothing is stored then.
//
// The payload is not checked against the type the run will receive it as,
// which the sender does not know in general (it may be another process or
// the flowlite CLI): a payload that does not decode into Receive's T is
// rejected when the run receives it (see Receive), and the run keeps
// waiting. A TypedSignal (NewSignal) shared by the workflow and the sender
// makes the compiler check that both use one type.
func Signal[T any](ctx context.Context, e *Engine, runID, name string, payload T, opts *SignalOptions) (sent bool, err error) {
	b, err := codec.Encode(payload)
	if err != nil {
		return false, fmt.Errorf("signal %s to run %s: %w", name, runID, err)
	}
	var key string
	if opts != nil {
		key = opts.Key
	}
	return byRun(e, runID, func(inner *Engine) (bool, error) { return inner.core.Signal(ctx, runID, name, b, key) })
}

// SignalRun sends a signal from inside a workflow to another run. It is a
// recorded step keyed by its idempotency key, so a replay never sends it
// twice.
func SignalRun[T any](wc Context, runID, name string, payload T) error {
	if err := engine.CheckName("signal", name); err != nil {
		return fmt.Errorf("signal run %s: %w", runID, err)
	}
	// The engine the workflow is registered with finds the target as
	// Signal does, wherever it lives.
	e := wc.engine()
	step := Step[T, struct{}]{
		Name: "flow.signal:" + name,
		Run: func(ctx context.Context, p T) (struct{}, error) {
			b, err := codec.Encode(p)
			if err != nil {
				return struct{}{}, Permanent(err)
			}
			key := IdempotencyKey(ctx)
			_, err = byRun(e, runID, func(inner *Engine) (bool, error) { return inner.core.Signal(ctx, runID, name, b, key) })
			if errors.Is(err, flowtype.ErrRunFinished) || errors.Is(err, ErrRunNotFound) {
				return struct{}{}, Permanent(err)
			}
			return struct{}{}, err
		},
	}
	_, err := Do(wc, step, payload)
	return err
}

// ChildOptions tune a child run. A nil *ChildOptions means the defaults.
type ChildOptions struct {
	// RunID of the child; default: the parent's ID plus the call's key,
	// which is stable across replays. A run ID names one run: when it is
	// taken (by a child an earlier call started, running or finished, or
	// by any other run still retained), the call fails with an error
	// matching ErrRunExists, and replays fail it alike, unless IDReuse
	// lets the call take the ID of a finished run.
	RunID string
	// IDReuse lets the call take RunID from a finished run, as
	// go-workflows lets a child's ID be reused once the first child
	// finished: ReuseFinished from a completed, failed or cancelled one,
	// ReuseFailed from a failed or cancelled one only. The finished run's
	// record is deleted (see StartOptions.IDReuse), unless it is the child
	// of another unfinished run; a child of this parent may be replaced.
	// The default, ReuseNever, fails the call for any taken ID.
	IDReuse IDReusePolicy
	// Queue of the child; default: the parent's.
	Queue    string
	Priority int
	// Deadline of the child; default: the parent's, or none for a detached
	// child.
	Deadline time.Time
	// Detached makes a child that outlives its parent's cancellation
	// (DBOS's WithoutCancel): when the parent is cancelled, or fails and
	// compensates, its other unfinished children are cancelled, but a
	// detached one runs on to its own end. It inherits no deadline from
	// its parent. It is still the parent's child: the parent can await it
	// while the parent runs, and it shows the parent's ID.
	Detached bool
}

// Child is a handle on a child run, inside its parent's workflow body.
type Child[Out any] struct {
	id string
}

// ID returns the child's run ID.
func (c *Child[Out]) ID() string { return c.id }

// ChildError is returned by Child.Result when the child did not complete.
// It matches ErrRolledBack when the child failed and was compensated, and
// ErrCancelled when it was cancelled.
type ChildError struct {
	RunID  string
	Status RunStatus
	Cause  string
}

func (e *ChildError) Error() string {
	return fmt.Sprintf("child run %s %s: %s", e.RunID, e.Status, e.Cause)
}

func (e *ChildError) Is(target error) bool {
	return (target == ErrRolledBack && e.Status == StatusFailed) ||
		(target == ErrCancelled && e.Status == StatusCancelled)
}

// StartChild starts a run of wf as a child of the current run and returns
// a handle to await it. The start is recorded: a resumed parent gets the
// same child back. When the parent unwinds (its workflow failed, or it was
// cancelled or passed its deadline), its unfinished children are cancelled
// and unwind in turn; children that already completed are not undone (give
// the parent a compensable step for that). wf must be registered with the
// engine.
func StartChild[In, Out any](wc Context, wf Workflow[In, Out], in In, opts *ChildOptions) (*Child[Out], error) {
	if opts == nil {
		opts = &ChildOptions{}
	}
	rc := wc.runContext()
	// Invalid options fail the call, recording nothing: the same input
	// fails the same way on every replay.
	if opts.Queue != "" {
		if err := engine.CheckName("queue", opts.Queue); err != nil {
			return nil, fmt.Errorf("start child %s: %w", wf.Name, err)
		}
	}
	if err := checkKeys("run ID", opts.RunID); err != nil {
		return nil, fmt.Errorf("start child %s: %w", wf.Name, err)
	}
	input, err := codec.Encode(in)
	if err != nil {
		return nil, rc.Abort(&engine.DefinitionError{RunID: rc.RunID(), Problem: fmt.Sprintf("child %s: %v", wf.Name, err)})
	}
	if err := rc.Engine().CheckPayload("input", input); err != nil {
		return nil, fmt.Errorf("start child %s: %w", wf.Name, err)
	}
	id, err := rc.StartChild(engine.StartParams{
		ID: opts.RunID, Workflow: workflowKey(wf.Name, wf.version()), Queue: opts.Queue,
		Priority: opts.Priority, Input: input, Deadline: opts.Deadline, IDReuse: opts.IDReuse,
		Detached: opts.Detached,
	})
	if err != nil {
		return nil, err
	}
	return &Child[Out]{id: id}, nil
}

// Result waits, durably, until the child finishes and returns its output;
// a child that did not complete gives a *ChildError.
func (c *Child[Out]) Result(wc Context) (Out, error) {
	var zero Out
	rc := wc.runContext()
	o, err := rc.AwaitChild(c.id)
	if err != nil {
		return zero, err
	}
	if o.Status != StatusCompleted {
		return zero, &ChildError{RunID: c.id, Status: o.Status, Cause: o.Error}
	}
	out, err := codec.Decode[Out](o.Output)
	if err != nil {
		return zero, rc.Abort(&DecodeError{RunID: rc.RunID(), Step: "child " + c.id, What: "output", Type: codec.TypeName[Out](), Err: err})
	}
	return out, nil
}

// Call starts a child run of wf and waits for its result.
func Call[In, Out any](wc Context, wf Workflow[In, Out], in In, opts *ChildOptions) (Out, error) {
	child, err := StartChild(wc, wf, in, opts)
	if err != nil {
		var zero Out
		return zero, err
	}
	return child.Result(wc)
}

// All runs branches concurrently and returns their results in order once
// every branch returned. Each branch gets its own Context whose step keys
// are scoped to the branch, so a replay matches every branch's records
// whatever order the branches ran in. The error is the first branch error
// in branch order, or, when a branch stopped because the run must stop
// (cancelled, lease lost), that reason. A branch that waits (a timer, a
// signal, a child, a step's retry backoff) stops alone: the other branches
// go on until they finish or wait in turn, so each execution takes every
// branch as far as it can go, and then All returns the reason to stop and
// the run waits until the earliest wait is due. If the workflow then fails,
// the compensations of the steps that completed, in any branch, run in
// reverse completion order.
func All[T any](wc Context, branches ...func(Context) (T, error)) ([]T, error) {
	rc := wc.runContext()
	call := rc.NextOccurrence("flow.all")
	results := make([]T, len(branches))
	errs := make([]error, len(branches))
	ctxs := make([]*engine.RunContext, len(branches))
	var g errgroup.Group
	for i, branch := range branches {
		ctxs[i] = rc.Branch(call, i)
		g.Go(func() error {
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("branch %d panicked: %v", i, p)
				}
			}()
			results[i], errs[i] = branch(workflowContext{ctxs[i], wc.engine()})
			return nil
		})
	}
	_ = g.Wait()
	if err := rc.Join(ctxs); err != nil {
		return nil, err // a branch waits
	}
	// Branches that replayed their records return them even when the run
	// must stop (e.g. it was cancelled), so that the body goes on replaying
	// and the unwind learns every step it completed; only a branch that
	// stopped for that reason makes All return it.
	if cause := rc.Cause(); cause != nil {
		for _, err := range errs {
			if errors.Is(err, cause) {
				return nil, cause
			}
		}
	}
	for i, err := range errs {
		if err != nil {
			return results, fmt.Errorf("branch %d: %w", i, err)
		}
	}
	return results, nil
}

// ErrLostRace is the cause of a First branch's context once another branch
// won: its running step sees it through ctx, and its further step calls
// return it.
var ErrLostRace = engine.ErrLostRace

// First runs branches concurrently and returns the result and index of the
// first to succeed; the others are cancelled (their contexts end with
// ErrLostRace, and their further step calls return it). The winner is
// recorded, so a replay returns it again without running new steps in any
// branch. Steps a losing branch completed before it was cancelled stay
// completed and are compensated if the workflow later fails. If no branch
// succeeds, the error is the first branch error in branch order (or the
// reason the run must stop, as for All); a branch that waits (timer,
// signal, child, retry backoff) keeps the race open until it resumes.
func First[T any](wc Context, branches ...func(Context) (T, error)) (T, int, error) {
	var zero T
	rc := wc.runContext()
	race, err := rc.NewRace(len(branches))
	if err != nil {
		return zero, -1, err
	}
	defer race.Close()
	errs := make([]error, len(branches))
	var g errgroup.Group
	for i, branch := range branches {
		g.Go(func() error {
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("branch %d panicked: %v", i, p)
				}
			}()
			v, err := branch(workflowContext{race.Branches[i], wc.engine()})
			if err != nil {
				errs[i] = err
				return nil
			}
			out, err := codec.Encode(v)
			if err != nil {
				errs[i] = Permanent(err)
				return nil
			}
			_, errs[i] = race.Claim(i, out)
			return nil
		})
	}
	_ = g.Wait()
	if winner, out := race.Winner(); winner >= 0 {
		v, err := codec.Decode[T](out)
		if err != nil {
			return zero, -1, rc.Abort(&DecodeError{RunID: rc.RunID(), Step: "flow.first", What: "output", Type: codec.TypeName[T](), Err: err})
		}
		return v, winner, nil
	}
	if cause := rc.Join(race.Branches); cause != nil {
		return zero, -1, cause
	}
	for i, err := range errs {
		if err != nil {
			return zero, -1, fmt.Errorf("branch %d: %w", i, err)
		}
	}
	return zero, -1, errors.New("first: no branch")
}
