package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/timetravel"
)

// ErrBeforeRun is returned by InspectAt for an instant before the run was
// started: it had no state then.
var ErrBeforeRun = errors.New("instant before the run existed")

// ErrNoSuchEvent is returned by InspectAfter for an event ID that is not in
// the run's history.
var ErrNoSuchEvent = errors.New("no such event in the run's history")

// RunState is a run as it stood at an instant of its history, rebuilt from
// the history alone (see InspectAt).
type RunState struct {
	At     time.Time // the instant asked for (InspectAfter: the event's time)
	Events int       // how many events of the history it folds
	// LastEvent is the ID of the last event folded.
	LastEvent int64
	// Run is the run as Inspect would have returned it then. RunAt is zero
	// (the history does not record when a run is next due) and UpdatedAt is
	// the last event's time.
	Run RunInfo
	// Waits are the durable waits open then (sleeps, receives, children):
	// the steps of Run whose Status is "waiting".
	Waits []StepRecord
	// Signals are the signals the run had received then, in that order.
	Signals []ReceivedSignal
}

// ReceivedSignal is a signal a run received through Receive.
type ReceivedSignal struct {
	ID         int64
	Name       string
	Payload    json.RawMessage
	SentAt     time.Time
	ReceivedAt time.Time
	Wait       string // the receive's step name, e.g. flow.receive:decision
}

// InspectAt returns the run as it stood at the instant at: its status,
// steps with their outputs, open waits, received signals and the state of
// its compensations, rebuilt by folding the events recorded up to and
// including at (millisecond precision). The run must still be stored: a run
// the cleaner deleted has no history left. An instant before the run
// started is ErrBeforeRun. What it folds, and the run it takes the rest
// from, are read from one snapshot.
func (e *Engine) InspectAt(ctx context.Context, runID string, at time.Time) (RunState, error) {
	recs, err := e.runRecords(ctx, runID)
	if err != nil {
		return RunState{}, fmt.Errorf("inspect run %s at %s: %w", runID, at.UTC().Format(time.RFC3339Nano), err)
	}
	n := timetravel.CountAt(recs, at.UnixMilli())
	if n == 0 {
		return RunState{}, fmt.Errorf("inspect run %s at %s: %w (it was started at %s)", runID,
			at.UTC().Format(time.RFC3339Nano), ErrBeforeRun, millis(recs.Run.CreatedAt).UTC().Format(time.RFC3339Nano))
	}
	s := runState(recs, timetravel.Fold(recs, n))
	s.At = at
	return s, nil
}

// InspectAfter returns the run as it stood right after the event with ID
// eventID (an Event.ID from History) was recorded: the state a step through
// the history shows, one event at a time.
func (e *Engine) InspectAfter(ctx context.Context, runID string, eventID int64) (RunState, error) {
	recs, err := e.runRecords(ctx, runID)
	if err != nil {
		return RunState{}, fmt.Errorf("inspect run %s after event %d: %w", runID, eventID, err)
	}
	n, ok := timetravel.CountThrough(recs, eventID)
	if !ok {
		return RunState{}, fmt.Errorf("inspect run %s after event %d: %w", runID, eventID, ErrNoSuchEvent)
	}
	s := runState(recs, timetravel.Fold(recs, n))
	s.At = millis(recs.Events[n-1].At)
	return s, nil
}

// runRecords reads everything stored about a run, from one snapshot: the
// history it folds and the run, steps and signals it takes the rest from
// are of one instant.
func (e *Engine) runRecords(ctx context.Context, runID string) (timetravel.Records, error) {
	return byRun(e, runID, func(inner *Engine) (timetravel.Records, error) {
		var recs timetravel.Records
		err := inner.store.Read(ctx, func(r store.Reader) error {
			var err error
			recs, err = readRecords(ctx, r, runID)
			return err
		})
		return recs, err
	})
}

func readRecords(ctx context.Context, r store.Reader, runID string) (timetravel.Records, error) {
	run, err := r.RunGet(ctx, runID)
	if err != nil {
		return timetravel.Records{}, err
	}
	recs := timetravel.Records{Run: run}
	if recs.Events, err = r.EventList(ctx, runID); err != nil {
		return recs, fmt.Errorf("read history: %w", err)
	}
	if recs.Steps, err = r.StepList(ctx, runID); err != nil {
		return recs, fmt.Errorf("read steps: %w", err)
	}
	recs.Events = engine.DeriveLean(run, recs.Steps, recs.Events)
	if recs.Signals, err = r.SignalList(ctx, runID); err != nil {
		return recs, fmt.Errorf("read signals: %w", err)
	}
	return recs, nil
}

func runState(recs timetravel.Records, st timetravel.State) RunState {
	run := recs.Run
	run.Status, run.Output, run.Error, run.Reason = st.Status, st.Output, st.Error, st.Reason
	run.CancelRequested, run.StartedAt, run.UpdatedAt, run.FinishedAt = st.CancelRequested, st.StartedAt, st.UpdatedAt, st.FinishedAt
	run.RequeuedAs, run.RunAt = st.RequeuedAs, 0
	out := RunState{Events: st.Events, LastEvent: st.LastEventID, Run: runInfo(run)}
	for _, s := range st.Steps {
		rec := stepRecord(s)
		out.Run.Steps = append(out.Run.Steps, rec)
		if s.Status == store.StepWaiting {
			out.Waits = append(out.Waits, rec)
		}
	}
	attachProgress(&out.Run, latestProgress(recs.Events[:st.Events]))
	for _, r := range st.Received {
		out.Signals = append(out.Signals, ReceivedSignal{
			ID: r.Signal.ID, Name: r.Signal.Name, Payload: raw(r.Signal.Payload),
			SentAt: millis(r.Signal.SentAt), ReceivedAt: millis(r.ReceivedAt), Wait: r.Step.Name,
		})
	}
	return out
}
