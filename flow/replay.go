package flow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowhistory"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// ExportHistory returns everything recorded about a run (the run, its step
// calls with inputs and outputs, the signals sent to it and its events) in
// the exported history format of package flowhistory, for
// flowtest.Replay.
func (e *Engine) ExportHistory(ctx context.Context, runID string) (*flowhistory.History, error) {
	recs, err := e.runRecords(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("export history of run %s: %w", runID, err)
	}
	r := recs.Run
	h := &flowhistory.History{
		Format: flowhistory.Format, Version: flowhistory.Version, ExportedAt: time.Now().UTC().Truncate(time.Millisecond),
		Run: flowhistory.Run{
			ID: r.ID, Workflow: r.Workflow, Version: r.Version, Queue: r.Queue, Priority: r.Priority,
			Status: string(r.Status), Input: raw(r.Input), Output: raw(r.Output), Error: r.Error, Reason: r.Reason,
			ParentID: r.ParentID, CreatedAt: utcMillis(r.CreatedAt), StartedAt: utcMillis(r.StartedAt), FinishedAt: utcMillis(r.FinishedAt),
			Values: recordedValues(r.Context),
		},
		Steps: make([]flowhistory.Step, len(recs.Steps)), Signals: make([]flowhistory.Signal, len(recs.Signals)),
		Events: make([]flowhistory.Event, len(recs.Events)),
	}
	for i, s := range recs.Steps {
		h.Steps[i] = flowhistory.Step{
			Name: s.Name, Occurrence: s.Occurrence, Position: s.Position, Status: string(s.Status), Attempts: s.Attempts,
			Input: raw(s.Input), Output: raw(s.Output), Error: s.Error, ErrorCode: s.Failure.Code,
			ErrorPermanent: s.Failure.Permanent, ErrorDetails: raw(s.Failure.Details), Compensable: s.Compensable,
			Compensation: string(s.Compensation), CompensationAttempts: s.CompensationAttempts,
			CompensationError: s.CompensationError, CompletedSeq: s.CompletedSeq,
			StartedAt: utcMillis(s.StartedAt), FinishedAt: utcMillis(s.FinishedAt),
		}
	}
	for i, s := range recs.Signals {
		h.Signals[i] = flowhistory.Signal{ID: s.ID, Name: s.Name, Payload: raw(s.Payload), Key: s.Key,
			SentAt: utcMillis(s.SentAt), ReceivedBy: s.ConsumedBy}
	}
	for i, ev := range recs.Events {
		h.Events[i] = flowhistory.Event{ID: ev.ID, At: utcMillis(ev.At), Kind: ev.Kind, Step: ev.Step,
			Occurrence: ev.Occurrence, Attempt: ev.Attempt, Detail: ev.Detail}
	}
	return h, nil
}

// ReplayReport says how a replay went (see Engine.Replay).
type ReplayReport struct {
	RunID    string
	Workflow string
	Version  int
	// Calls is how many recorded calls the code made again.
	Calls int
	// Returned reports whether the workflow body returned; a replay of a
	// run that was waiting or executing when its history was exported stops
	// at Frontier instead, the first call the history has no outcome for.
	Returned bool
	Frontier string
}

// ReplayOutcomeError reports a replay whose workflow body made every
// recorded call but returned something else than the recorded run did.
type ReplayOutcomeError struct {
	RunID    string
	Recorded string // what the recorded body returned
	Replayed string // what the code returns now
}

func (e *ReplayOutcomeError) Error() string {
	return fmt.Sprintf("run %s: replay diverged from the recorded outcome: the history has %s, the workflow code now returns %s",
		e.RunID, e.Recorded, e.Replayed)
}

// Replay runs the workflow code registered with e against an exported
// history, as a resumed execution would, and reports the first divergence:
// a *NonDeterminismError naming the position when the code calls another
// step (or wait, child, race), skips a recorded call, reorders calls, or
// makes a call after the point where the recorded body returned; a
// *ReplayOutcomeError when the body returns another output or error than
// the recorded one; a DecodeError when a recorded value no longer decodes
// into the code's types. Every call the history has an outcome for returns
// it, and the replay stops at the first call it has none for: no step body,
// compensation or RunTx runs and nothing is written to e's database. The
// run's workflow version must be registered with e.
func (e *Engine) Replay(ctx context.Context, h *flowhistory.History) (ReplayReport, error) {
	rep := ReplayReport{RunID: h.Run.ID, Workflow: h.Run.Workflow, Version: h.Run.Version}
	key := flowtype.WorkflowKey{Name: h.Run.Workflow, Version: h.Run.Version}
	def, ok := e.core.Lookup(key)
	if !ok {
		return rep, fmt.Errorf("replay run %s: %w: workflow %s version %d is not registered with this engine",
			h.Run.ID, ErrUnknownWorkflow, h.Run.Workflow, h.Run.Version)
	}
	run := store.Run{
		ID: h.Run.ID, Workflow: h.Run.Workflow, Version: h.Run.Version, Queue: h.Run.Queue, Priority: h.Run.Priority,
		Status: flowtype.RunStatus(h.Run.Status), Input: h.Run.Input, Output: h.Run.Output, Error: h.Run.Error,
		Reason: h.Run.Reason, ParentID: h.Run.ParentID,
	}
	if len(h.Run.Values) > 0 {
		run.Context, _ = json.Marshal(h.Run.Values) // a map[string]string always marshals
	}
	steps := make([]store.Step, len(h.Steps))
	for i, s := range h.Steps {
		steps[i] = store.Step{
			RunID: h.Run.ID, Name: s.Name, Occurrence: s.Occurrence, Position: s.Position, Status: store.StepStatus(s.Status),
			Attempts: s.Attempts, Input: s.Input, Output: s.Output, Error: s.Error, CompletedSeq: s.CompletedSeq,
			Compensable: s.Compensable, Compensation: store.CompensationState(s.Compensation),
			Failure: store.Failure{Code: s.ErrorCode, Permanent: s.ErrorPermanent, Details: s.ErrorDetails},
		}
	}
	completed, failed, bodyErr := recordedOutcome(h)
	got, err := e.core.Replay(ctx, def, run, steps, completed || failed)
	rep.Calls, rep.Returned, rep.Frontier = got.Calls, got.Returned, got.Frontier
	if err != nil {
		return rep, err
	}
	if !got.Returned {
		return rep, nil
	}
	replayed := "output " + string(got.Output)
	if got.Err != nil {
		replayed = fmt.Sprintf("error %q", got.Err.Error())
	}
	switch {
	case completed && (got.Err != nil || !sameJSON(got.Output, h.Run.Output)):
		return rep, &ReplayOutcomeError{RunID: h.Run.ID, Recorded: "output " + string(h.Run.Output), Replayed: replayed}
	case failed && (got.Err == nil || got.Err.Error() != bodyErr):
		return rep, &ReplayOutcomeError{RunID: h.Run.ID, Recorded: fmt.Sprintf("error %q", bodyErr), Replayed: replayed}
	}
	return rep, nil
}

// recordedOutcome reads from a history whether the recorded body returned:
// with an output (completed), or with an error (its workflow failed, which
// is not the unwind a cancellation or a deadline starts), and that error.
func recordedOutcome(h *flowhistory.History) (completed, failed bool, bodyErr string) {
	cancelled := false
	for _, ev := range h.Events {
		switch ev.Kind {
		case EventCancelRequested:
			cancelled = true
		case EventRunCompleted:
			completed = true
		case EventWorkflowFailed:
			if !cancelled && ev.Detail != flowtype.ErrCancelled.Error() {
				failed, bodyErr = true, ev.Detail
			}
		}
	}
	return completed, failed, bodyErr
}

func sameJSON(a, b []byte) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func utcMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
