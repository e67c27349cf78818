package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// never is the due time of a wait that only an event ends.
const never = math.MaxInt64

// resolveFunc decides, inside a write transaction, whether a wait is over.
// input is the wait's recorded input. When done, output is recorded as the
// wait's outcome and ev appended to the history; otherwise the run is
// released until wakeAt.
type resolveFunc func(ctx context.Context, tx store.Tx, now int64, key store.StepKey, input []byte) (output []byte, done bool, wakeAt int64, ev store.Event, err error)

// reopenFunc vets the recorded outcome of a wait on replay. It returns nil
// to keep it; otherwise, inside the write transaction that reopens the wait,
// it sets the outcome's cause aside (e.g. marks a signal rejected) and
// returns the event that records why.
type reopenFunc func(output []byte) (reopen func(ctx context.Context, tx store.Tx, key store.StepKey) (store.Event, error))

// wait resolves a durable wait point: a timer, a signal receive, a child
// await. The first time the run reaches it, input is recorded (with the
// started event); each execution then asks resolve whether the wait is over.
// Once it is, the outcome is recorded, and later executions return it
// without asking again, unless vet (when not nil) refuses it: then the
// wait is reopened, in the same transaction that asks resolve again. A
// waiting run holds no lease and no goroutine.
func (rc *RunContext) wait(name string, input []byte, started store.Event, resolve resolveFunc, vet reopenFunc) ([]byte, error) {
	defer rc.holdScope()()
	key, rec, err := rc.lookup(name, nil)
	if errors.Is(err, flowtype.ErrScopeCancelled) {
		return nil, rc.endCancelled(key, err)
	}
	if err != nil {
		return nil, err
	}
	var reopen func(context.Context, store.Tx, store.StepKey) (store.Event, error)
	if rec != nil && rec.Status == store.StepFailed {
		// Only a scope's cancel fails a wait (scope.go).
		return nil, recordedError(rec.Error, rec.Failure)
	}
	if rec != nil {
		if vet == nil || rec.Status != store.StepCompleted || rc.replayOnly() {
			return rec.Output, nil
		}
		if reopen = vet(rec.Output); reopen == nil {
			return rec.Output, nil
		}
	}
	if cause := rc.cause(); cause != nil {
		return nil, rc.Abort(cause)
	}
	x := rc.st.x
	rc.st.mu.Lock()
	prior, recorded := rc.st.records[key]
	rc.st.mu.Unlock()
	var output []byte
	var done bool
	var wakeAt int64
	err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		stored := input
		if reopen != nil {
			if err := tx.StepReopen(ctx, key); err != nil {
				return err
			}
			ev, err := reopen(ctx, tx, key)
			if err != nil {
				return err
			}
			ev.Step, ev.Occurrence = key.Name, key.Occurrence
			if err := x.event(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		if recorded {
			stored = prior.Input
		} else {
			if err := tx.StepWait(ctx, store.StepBeginParams{Key: key, Input: input, Position: rc.st.position(key), Now: now}); err != nil {
				return err
			}
			started.Step, started.Occurrence = key.Name, key.Occurrence
			if err := x.event(ctx, tx, now, started); err != nil {
				return err
			}
		}
		var ev store.Event
		var err error
		if output, done, wakeAt, ev, err = resolve(ctx, tx, now, key, stored); err != nil || !done {
			return err
		}
		if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: key, Output: output, Now: now}); err != nil {
			return err
		}
		ev.Step, ev.Occurrence = key.Name, key.Occurrence
		return x.event(ctx, tx, now, ev)
	})
	if err != nil {
		return nil, rc.Abort(err)
	}
	if reopen != nil {
		rc.st.mu.Lock()
		reopened := prior
		reopened.Status, reopened.Output = store.StepWaiting, nil
		rc.st.records[key] = reopened
		rc.st.mu.Unlock()
	}
	if done {
		return output, nil
	}
	return nil, rc.park(wakeAt, false)
}

type timerInput struct {
	Until int64 `json:"until"`
}

// SleepUntil waits until the engine clock reaches until. A run that calls it
// again after a resume keeps the time recorded the first time.
func (rc *RunContext) SleepUntil(until time.Time) error {
	in, _ := json.Marshal(timerInput{Until: until.UnixMilli()}) // a struct of ints always marshals
	started := store.Event{Kind: flowtype.EventTimerStarted, Detail: "until " + until.UTC().Format(time.RFC3339Nano)}
	_, err := rc.wait("flow.sleep", in, started, func(_ context.Context, _ store.Tx, now int64, _ store.StepKey, input []byte) ([]byte, bool, int64, store.Event, error) {
		var t timerInput
		if err := json.Unmarshal(input, &t); err != nil {
			return nil, false, 0, store.Event{}, &flowtype.DecodeError{RunID: rc.RunID(), Step: "flow.sleep", What: "input", Type: "timer", Err: err}
		}
		if now < t.Until {
			return nil, false, t.Until, store.Event{}, nil
		}
		return []byte("null"), true, 0, store.Event{Kind: flowtype.EventTimerFired}, nil
	}, nil)
	return err
}

// Sleep waits for d on the engine clock; see SleepUntil.
func (rc *RunContext) Sleep(d time.Duration) error {
	return rc.SleepUntil(rc.Now().Add(d))
}

type receiveInput struct {
	Signal   string `json:"signal"`
	Deadline int64  `json:"deadline,omitempty"` // Unix ms; zero: none
}

// Received is the recorded outcome of a signal receive.
type Received struct {
	Payload  json.RawMessage `json:"payload,omitempty"`
	TimedOut bool            `json:"timed_out,omitempty"`
}

// Receive waits for the next signal of that name sent to the run, at most
// timeout (zero: no limit). Signals sent before the run waits are kept and
// received in the order they were sent; each is received once.
//
// accept (when not nil) vets a payload: flow.Receive passes a check that it
// decodes into the type the workflow expects. The sender cannot know that
// type (it may be another process, or the CLI), so a payload accept
// refuses is set aside inside the wait's transaction: the signal is marked
// rejected (its consumed_by starts with RejectedPrefix), the history gets a
// signal_rejected event saying why, and the run keeps waiting for the next
// signal of that name. Recording such a payload as the receive's outcome
// would wedge the run: every replay would fail to decode it again.
//
// Runs that recorded a payload accept refuses before this check existed
// are mended the same way on their next execution (e.g. after Resume): the
// recorded receive is reopened, its signal marked rejected, and the wait
// goes on.
func (rc *RunContext) Receive(name string, timeout time.Duration, accept func(payload []byte) error) (Received, error) {
	in := receiveInput{Signal: name}
	detail := "signal " + name
	if timeout > 0 {
		in.Deadline = rc.Now().Add(timeout).UnixMilli()
		detail += ", timeout " + timeout.String()
	}
	inJSON, _ := json.Marshal(in) // strings and ints always marshal
	started := store.Event{Kind: flowtype.EventSignalWaiting, Detail: detail}
	resolve := func(ctx context.Context, tx store.Tx, now int64, key store.StepKey, input []byte) ([]byte, bool, int64, store.Event, error) {
		var w receiveInput
		if err := json.Unmarshal(input, &w); err != nil {
			return nil, false, 0, store.Event{}, &flowtype.DecodeError{RunID: rc.RunID(), Step: key.Name, What: "input", Type: "signal wait", Err: err}
		}
		for {
			sig, err := tx.SignalNext(ctx, rc.RunID(), w.Signal)
			switch {
			case err == nil && accept != nil:
				if bad := accept(sig.Payload); bad != nil {
					if err := tx.SignalConsume(ctx, sig.ID, RejectedPrefix+key.String()); err != nil {
						return nil, false, 0, store.Event{}, err
					}
					ev := rejectedEvent(sig.Name, sig.ID, bad)
					ev.Step, ev.Occurrence = key.Name, key.Occurrence
					if err := rc.st.x.event(ctx, tx, now, ev); err != nil {
						return nil, false, 0, store.Event{}, err
					}
					continue // the next signal of the name, if any
				}
				fallthrough
			case err == nil:
				if err := tx.SignalConsume(ctx, sig.ID, key.String()); err != nil {
					return nil, false, 0, store.Event{}, err
				}
				out, err := json.Marshal(Received{Payload: sig.Payload})
				return out, err == nil, 0, store.Event{Kind: flowtype.EventSignalReceived, Detail: fmt.Sprintf("signal %s #%d", sig.Name, sig.ID)}, err
			case !errors.Is(err, flowtype.ErrRunNotFound):
				return nil, false, 0, store.Event{}, err
			case w.Deadline > 0 && now >= w.Deadline:
				out, _ := json.Marshal(Received{TimedOut: true})
				return out, true, 0, store.Event{Kind: flowtype.EventSignalTimedOut, Detail: "signal " + w.Signal}, nil
			case w.Deadline > 0:
				return nil, false, w.Deadline, store.Event{}, nil
			default:
				return nil, false, never, store.Event{}, nil
			}
		}
	}
	var vet reopenFunc
	if accept != nil {
		vet = func(output []byte) func(context.Context, store.Tx, store.StepKey) (store.Event, error) {
			var r Received
			if err := json.Unmarshal(output, &r); err != nil || r.TimedOut {
				return nil // not a payload: the caller reports a corrupt record
			}
			bad := accept(r.Payload)
			if bad == nil {
				return nil
			}
			return func(ctx context.Context, tx store.Tx, key store.StepKey) (store.Event, error) {
				ids, err := tx.SignalReject(ctx, key.RunID, key.String(), RejectedPrefix+key.String())
				if err != nil {
					return store.Event{}, err
				}
				var id int64
				if len(ids) > 0 {
					id = ids[0]
				}
				ev := rejectedEvent(name, id, bad)
				ev.Detail += " (it had been recorded as received; the wait is reopened)"
				return ev, nil
			}
		}
	}
	out, err := rc.wait("flow.receive:"+name, inJSON, started, resolve, vet)
	if err != nil {
		return Received{}, err
	}
	var r Received
	if err := json.Unmarshal(out, &r); err != nil {
		return Received{}, rc.Abort(&flowtype.DecodeError{RunID: rc.RunID(), Step: "flow.receive:" + name, What: "output", Type: "signal", Err: err})
	}
	return r, nil
}

// RejectedPrefix starts the consumed_by of a signal whose payload the
// receiving wait (named after it) refused.
const RejectedPrefix = "rejected by "

// rejectedEvent records that a signal's payload was set aside.
func rejectedEvent(name string, id int64, why error) store.Event {
	return store.Event{Kind: flowtype.EventSignalRejected, Detail: fmt.Sprintf("signal %s #%d: payload rejected: %v", name, id, why)}
}

// ChildOutcome is the recorded outcome of a child run.
type ChildOutcome struct {
	Status flowtype.RunStatus `json:"status"`
	Output json.RawMessage    `json:"output,omitempty"`
	Error  string             `json:"error,omitempty"`
}

// StartChild starts a child run and records its ID, so a resumed parent
// does not start it twice. The child's ID defaults to the parent's ID plus
// the call's key; its queue to the parent's.
func (rc *RunContext) StartChild(p StartParams) (string, error) {
	defer rc.holdScope()() // a scope's cancel cancels the children it finds started
	name := "flow.child:" + p.Workflow.Name
	key, rec, err := rc.lookup(name, nil)
	if err != nil {
		return "", err
	}
	if rec != nil && rec.Status == store.StepFailed {
		return "", &flowtype.StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence,
			Attempts: rec.Attempts, Err: recordedError(rec.Error, rec.Failure)}
	}
	if rec != nil {
		var id string
		if err := json.Unmarshal(rec.Output, &id); err != nil {
			return "", rc.Abort(&flowtype.DecodeError{RunID: key.RunID, Step: key.Name, What: "output", Type: "child run ID", Err: err})
		}
		return id, nil
	}
	if cause := rc.cause(); cause != nil {
		return "", rc.Abort(cause)
	}
	x := rc.st.x
	if p.ID == "" {
		p.ID = fmt.Sprintf("%s/%s%s#%d", key.RunID, childExecutionScope(rc.st.execution), key.Name, key.Occurrence)
	}
	if p.Queue == "" {
		p.Queue = x.run.Queue
	}
	if p.Deadline.IsZero() && x.run.Deadline > 0 && !p.Detached {
		p.Deadline = time.UnixMilli(x.run.Deadline)
	}
	if p.Context == nil {
		p.Context = x.run.Context // a child inherits its parent's context values
	}
	p.ParentID = key.RunID
	var queue string
	var taken *flowtype.StepError
	err = x.write(func(ctx context.Context, tx store.Tx, now int64) error {
		taken = nil
		if _, err := tx.StepBegin(ctx, store.StepBeginParams{Key: key, Input: p.Input, Position: rc.st.position(key), Now: now}); err != nil {
			return err
		}
		st, err := x.e.insertRun(ctx, tx, &p)
		if errors.Is(err, flowtype.ErrUnknownWorkflow) {
			return &DefinitionError{RunID: key.RunID, Problem: err.Error()}
		}
		if errors.Is(err, flowtype.ErrRunExists) {
			// Taken by a run of another workflow: the same answer as below.
			st, err = Started{Existing: true}, nil
			if st.Run, err = tx.RunGet(ctx, p.ID); err != nil {
				return err
			}
		}
		if err != nil {
			return err
		}
		if st.Existing {
			// This call has no record, so the run holding the ID is not a
			// child this call started: another call, or another run, took
			// it. The call fails, recorded, so that replays fail it alike.
			msg := fmt.Sprintf("start child %s: run ID %s is taken by a %s run of %s: %v",
				p.Workflow, p.ID, st.Run.Status, st.Run.Workflow, flowtype.ErrRunExists)
			f := store.Failure{Code: flowtype.CodeRunExists, Permanent: true}
			if err := tx.StepFail(ctx, store.StepFailParams{Key: key, Error: msg, Failure: f, Final: true, Now: now}); err != nil {
				return err
			}
			taken = &flowtype.StepError{RunID: key.RunID, Step: key.Name, Occurrence: key.Occurrence, Attempts: 1, Err: recordedError(msg, f)}
			return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventStepFailed, Step: key.Name, Occurrence: key.Occurrence, Attempt: 1, Detail: msg})
		}
		queue = st.Run.Queue
		out, _ := json.Marshal(p.ID) // a string always marshals
		if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: key, Output: out, Now: now}); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: flowtype.EventChildStarted, Step: key.Name, Occurrence: key.Occurrence, Detail: p.ID})
	})
	if err != nil {
		return "", rc.Abort(err)
	}
	if taken != nil {
		return "", taken
	}
	x.e.Wake(queue)
	x.e.metrics.runStarted()
	return p.ID, nil
}

// AwaitChild waits until the child run finishes (completed, failed or
// cancelled) and returns its outcome. A suspended child keeps its parent
// waiting until an operator settles it.
func (rc *RunContext) AwaitChild(childID string) (ChildOutcome, error) {
	in, _ := json.Marshal(map[string]string{"child": childID})
	started := store.Event{Kind: flowtype.EventChildWaiting, Detail: "child " + childID}
	out, err := rc.wait("flow.await:"+childID, in, started, func(ctx context.Context, tx store.Tx, _ int64, _ store.StepKey, _ []byte) ([]byte, bool, int64, store.Event, error) {
		child, err := tx.RunGet(ctx, childID)
		if err != nil {
			return nil, false, 0, store.Event{}, err
		}
		if !child.Status.Finished() {
			return nil, false, never, store.Event{}, nil
		}
		out, err := json.Marshal(ChildOutcome{Status: child.Status, Output: child.Output, Error: child.Error})
		return out, err == nil, 0, store.Event{Kind: flowtype.EventChildFinished, Detail: fmt.Sprintf("child %s %s", childID, child.Status)}, err
	}, nil)
	if err != nil {
		return ChildOutcome{}, err
	}
	var o ChildOutcome
	if err := json.Unmarshal(out, &o); err != nil {
		return ChildOutcome{}, rc.Abort(&flowtype.DecodeError{RunID: rc.RunID(), Step: "flow.await:" + childID, What: "output", Type: "child outcome", Err: err})
	}
	return o, nil
}
