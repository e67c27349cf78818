// Package timetravel reconstructs a run's state at a past instant by folding
// its append-only history.
//
// The events say what changed and when; they do not carry values. Values
// come from the rows the events point at, which is correct because each of
// them is written once: a run's input and output, a step's input, and a
// step's output, which StepComplete writes in the same transaction as its
// step_completed event and nothing rewrites afterwards. The one value that
// can be set aside, the outcome of a receive whose signal a later version of
// the workflow could not decode (StepReopen), is rebuilt from the signal
// the signal_received event names, whose payload is also written once. So
// the fold needs no value in the events table, and the events table stays
// as the engine writes it.
//
// A reset (run_reset) is the exception: it deletes the records of the calls
// it discards, which then run again and are written anew. Its event lists
// them, so the fold drops them at the reset, and for a state before it
// knows their rows hold a later execution's values: it shows what the
// events say of those calls (status, attempts, errors, times) without
// their outputs. A fork's first event lists the records it was given,
// which the fork then holds as they were.
//
// What the history does not record is left out of a State: when a run is
// next due (RunAt) and lease heartbeats. UpdatedAt is the time of the last
// event folded.
//
// It imports internal/store (records), flow/flowtype (event kinds, run
// states) and internal/engine (the shape of a receive's outcome).
package timetravel

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Records is everything stored about one run, as read now.
type Records struct {
	Run     store.Run
	Steps   []store.Step   // in the store's order (StepList)
	Signals []store.Signal // every signal sent to the run
	Events  []store.Event  // oldest first
}

// State is a run as it stood after a prefix of its history.
type State struct {
	Events          int   // how many events were folded
	LastEventID     int64 // ID of the last event folded; 0 when none
	Status          flowtype.RunStatus
	Output          []byte
	Error           string
	Reason          string
	CancelRequested bool
	StartedAt       int64 // first claim
	UpdatedAt       int64 // the last event's time
	FinishedAt      int64
	RequeuedAs      string
	Steps           []store.Step // the calls made so far, in the store's order
	Received        []Received   // signals received so far, in the order received
}

// Received is a signal a run's wait received.
type Received struct {
	Signal     store.Signal
	Step       store.StepKey // the wait that received it
	ReceivedAt int64
}

// cancelToUnwind ends the detail of the cancel_requested event that
// Engine.Cancel records when it moves an idle run with completed steps to
// compensating (engine.cancelIdle); other cancel requests leave the status
// alone until a worker sees them.
const cancelToUnwind = "; compensations run when an engine claims it"

// Fold folds the first n events of recs (all of them when n exceeds their
// number) into the run's state at that point.
func Fold(recs Records, n int) State {
	n = min(max(n, 0), len(recs.Events))
	f := folder{recs: recs, steps: map[store.StepKey]*store.Step{}, replaced: replacedCalls(recs)}
	f.st.Status = flowtype.StatusPending
	for i, ev := range recs.Events[:n] {
		f.at = i
		f.apply(ev)
	}
	f.st.Events = n
	if n > 0 {
		f.st.LastEventID = recs.Events[n-1].ID
		f.st.UpdatedAt = recs.Events[n-1].At
	}
	for _, row := range recs.Steps {
		if s, ok := f.steps[row.Key()]; ok {
			f.st.Steps = append(f.st.Steps, *s)
		}
	}
	return f.st
}

// CountAt returns how many events of recs were recorded at or before at
// (Unix milliseconds).
func CountAt(recs Records, at int64) int {
	n := 0
	for n < len(recs.Events) && recs.Events[n].At <= at {
		n++
	}
	return n
}

// CountThrough returns how many events of recs come up to and including the
// event with that ID, and whether the run has it.
func CountThrough(recs Records, eventID int64) (int, bool) {
	for i, ev := range recs.Events {
		if ev.ID == eventID {
			return i + 1, true
		}
	}
	return 0, false
}

type folder struct {
	recs  Records
	st    State
	steps map[store.StepKey]*store.Step
	// replaced gives, for each call a reset discarded, the index of the
	// last run_reset event that discarded it: its row now holds what the
	// call did after that reset, not before. at is the index of the event
	// being folded.
	replaced map[string]int
	at       int
}

// markedCalls returns the calls of the JSON array that follows marker in
// an event's detail (see engine.DiscardedMarker). A step name may hold the
// marker itself, so each occurrence is tried until what follows is a
// whole JSON array.
func markedCalls(detail, marker string) ([]string, bool) {
	for from := 0; ; {
		i := strings.Index(detail[from:], marker)
		if i < 0 {
			return nil, false
		}
		var calls []string
		if json.Unmarshal([]byte(detail[from+i+len(marker):]), &calls) == nil {
			return calls, true
		}
		from += i + len(marker)
	}
}

// replacedCalls indexes the calls the resets of recs discarded (see
// folder.replaced).
func replacedCalls(recs Records) map[string]int {
	var out map[string]int
	for i, ev := range recs.Events {
		if ev.Kind != flowtype.EventRunReset && ev.Kind != flowtype.EventContinuedAsNew {
			continue
		}
		calls, _ := markedCalls(ev.Detail, engine.DiscardedMarker)
		for _, c := range calls {
			if out == nil {
				out = map[string]int{}
			}
			out[c] = i
		}
	}
	return out
}

// current reports whether the row of key holds what the call did as of
// the event being folded: no later reset discarded it.
func (f *folder) current(key store.StepKey) bool {
	last, ok := f.replaced[key.Call()]
	return !ok || last < f.at
}

func (f *folder) row(key store.StepKey) (store.Step, bool) {
	for _, s := range f.recs.Steps {
		if s.Name == key.Name && s.Occurrence == key.Occurrence {
			return s, true
		}
	}
	return store.Step{}, false
}

// step returns the folded record of the event's call, creating it from its
// row (input, position, compensable) at its first event.
func (f *folder) step(ev store.Event, at int64) *store.Step {
	key := store.StepKey{RunID: ev.RunID, Name: ev.Step, Occurrence: ev.Occurrence}
	if s, ok := f.steps[key]; ok {
		return s
	}
	row, _ := f.row(key)
	s := &store.Step{
		RunID: key.RunID, Name: key.Name, Occurrence: key.Occurrence, Input: row.Input,
		Position: row.Position, Compensable: row.Compensable, Compensation: store.CompensationNone, StartedAt: at,
	}
	f.steps[key] = s
	return s
}

// arm marks the compensation of every completed compensable step pending,
// as StepCompensationArm does.
func (f *folder) arm() {
	for _, s := range f.steps {
		if s.Status == store.StepCompleted && s.Compensable && s.Compensation == store.CompensationNone {
			s.Compensation = store.CompensationPending
		}
	}
}

// retryMessage strips what the engine appends to a retried attempt's error
// in its event.
func retryMessage(detail string) string {
	if i := strings.LastIndex(detail, "; next attempt in "); i >= 0 {
		return detail[:i]
	}
	return detail
}

func (f *folder) apply(ev store.Event) {
	st := &f.st
	switch ev.Kind {
	case flowtype.EventRunStarted:
		st.Status = flowtype.StatusPending
		// A fork starts with the records it was given, as they are.
		if copied, ok := markedCalls(ev.Detail, engine.CopiedMarker); ok {
			for _, c := range copied {
				name, occurrence, _ := engine.ParseCall(c)
				key := store.StepKey{RunID: ev.RunID, Name: name, Occurrence: occurrence}
				if row, ok := f.row(key); ok {
					row.Compensation, row.CompensationAttempts, row.CompensationError = store.CompensationNone, 0, ""
					f.steps[key] = &row
				}
			}
		}
	case flowtype.EventRunReset:
		// The run went back to one of its calls: the discarded records
		// go, with the signals their receives took, and the run is
		// pending with no outcome, as RunReset leaves it.
		discarded, _ := markedCalls(ev.Detail, engine.DiscardedMarker)
		gone := map[store.StepKey]bool{}
		for _, c := range discarded {
			name, occurrence, _ := engine.ParseCall(c)
			key := store.StepKey{RunID: ev.RunID, Name: name, Occurrence: occurrence}
			gone[key] = true
			delete(f.steps, key)
		}
		for _, s := range f.steps {
			s.Compensation, s.CompensationAttempts, s.CompensationError = store.CompensationNone, 0, ""
		}
		received := st.Received[:0]
		for _, r := range st.Received {
			if !gone[r.Step] {
				received = append(received, r)
			}
		}
		st.Received = received
		st.Status, st.Output, st.Error, st.Reason = flowtype.StatusPending, nil, "", ""
		st.CancelRequested, st.FinishedAt = false, 0
	case flowtype.EventContinuedAsNew:
		// The execution ended and its records went: the next one starts
		// from none, pending, as RunContinue leaves the run.
		clear(f.steps)
		st.Received = nil
		st.Status = flowtype.StatusPending
	case flowtype.EventRunClaimed:
		if st.StartedAt == 0 {
			st.StartedAt = ev.At
		}
		if st.Status != flowtype.StatusCompensating {
			st.Status = flowtype.StatusRunning
		}
	case flowtype.EventRunReleased, flowtype.EventRunRescued:
		if st.Status == flowtype.StatusRunning {
			st.Status = flowtype.StatusPending
		}
	case flowtype.EventRunWaiting:
		if st.Status == flowtype.StatusRunning {
			st.Status = flowtype.StatusWaiting
		}
	case flowtype.EventWorkflowFailed:
		st.Status, st.Error = flowtype.StatusCompensating, ev.Detail
		f.arm()
	case flowtype.EventCancelRequested:
		st.CancelRequested = true
		if strings.HasSuffix(ev.Detail, cancelToUnwind) {
			st.Status, st.Error = flowtype.StatusCompensating, flowtype.ErrCancelled.Error()
			f.arm()
		}
	case flowtype.EventRunResumed:
		st.Reason = ""
		st.Status = flowtype.StatusPending
		if st.Error != "" {
			st.Status = flowtype.StatusCompensating
			for _, s := range f.steps {
				if s.Compensation == store.CompensationFailed {
					s.Compensation, s.CompensationAttempts, s.CompensationError = store.CompensationPending, 0, ""
				}
			}
		}
	case flowtype.EventCompensationSkipped:
		st.Reason, st.Status = "", flowtype.StatusCompensating
		for _, s := range f.steps {
			if s.Compensation == store.CompensationFailed {
				s.Compensation = store.CompensationSkipped
			}
		}
	case flowtype.EventRunCompleted:
		st.Status, st.Output, st.FinishedAt = flowtype.StatusCompleted, f.recs.Run.Output, ev.At
	case flowtype.EventRunFailed:
		st.Status, st.FinishedAt = flowtype.StatusFailed, ev.At
		if ev.Detail != "" {
			st.Error = ev.Detail
		}
	case flowtype.EventRunSuspended:
		st.Status, st.Reason = flowtype.StatusSuspended, ev.Detail
	case flowtype.EventRunCancelled:
		if st.Status != flowtype.StatusCompensating && st.Status != flowtype.StatusSuspended && st.Error == "" {
			st.Error = flowtype.ErrCancelled.Error() // cancelled while idle
		}
		st.Status, st.FinishedAt, st.CancelRequested = flowtype.StatusCancelled, ev.At, true
	case flowtype.EventRunMadeDue, flowtype.EventRunRescheduled, flowtype.EventRunDebounced:
		// They move the due time (and a debounce the run's input), which a
		// State leaves out.
	case flowtype.EventRunRequeued:
		st.RequeuedAs = strings.TrimPrefix(ev.Detail, "as ")
	case flowtype.EventStepStarted:
		s := f.step(ev, ev.At)
		s.Status, s.Attempts, s.Error = store.StepRunning, ev.Attempt, ""
	case flowtype.EventStreamWritten, flowtype.EventStreamClosed:
		// A body's write or close is a call recorded in one transaction,
		// like a child's start; a step's batch belongs to that step's
		// attempt, whose own events say where it stands.
		call := ev.Step[strings.LastIndex(ev.Step, "/")+1:] // a branch's call is scoped: all0.1/flow.stream.x
		if !strings.HasPrefix(call, engine.StreamStepPrefix) && !strings.HasPrefix(call, engine.StreamCloseStepPrefix) {
			break
		}
		s := f.step(ev, ev.At)
		s.Status, s.Error, s.FinishedAt, s.Attempts = store.StepCompleted, "", ev.At, max(s.Attempts, 1)
		if row, ok := f.row(s.Key()); ok && f.current(s.Key()) {
			s.Output, s.CompletedSeq = row.Output, row.CompletedSeq
		}
	case flowtype.EventStepCompleted, flowtype.EventTimerFired, flowtype.EventChildFinished,
		flowtype.EventChildStarted, flowtype.EventRaceWon, flowtype.EventScopeCancelled:
		s := f.step(ev, ev.At)
		s.Status, s.Error, s.FinishedAt = store.StepCompleted, "", ev.At
		if ev.Kind == flowtype.EventChildStarted || ev.Kind == flowtype.EventRaceWon || ev.Kind == flowtype.EventScopeCancelled {
			// Recorded in one transaction that begins and completes the
			// call: one attempt, and no step_started event.
			s.Attempts = max(s.Attempts, 1)
		}
		if row, ok := f.row(s.Key()); ok && f.current(s.Key()) {
			s.Output, s.CompletedSeq = row.Output, row.CompletedSeq
		}
	case flowtype.EventStepRetried:
		s := f.step(ev, ev.At)
		s.Status, s.Error, s.FinishedAt = store.StepRetrying, retryMessage(ev.Detail), ev.At
	case flowtype.EventStepSnoozed:
		s := f.step(ev, ev.At)
		s.Status, s.Attempts, s.Error, s.FinishedAt = store.StepRetrying, ev.Attempt-1, ev.Detail, ev.At
	case flowtype.EventStepFailed:
		s := f.step(ev, ev.At)
		s.Status, s.Error, s.FinishedAt = store.StepFailed, ev.Detail, ev.At
		s.Attempts = max(s.Attempts, ev.Attempt) // a child start refused without step_started
	case flowtype.EventTimerStarted, flowtype.EventSignalWaiting, flowtype.EventChildWaiting:
		if ev.Step != "" {
			s := f.step(ev, ev.At)
			if s.Status == "" {
				s.Status = store.StepWaiting
			}
		}
	case flowtype.EventSignalReceived:
		s := f.step(ev, ev.At)
		s.Status, s.FinishedAt = store.StepCompleted, ev.At
		if sig, ok := f.signal(ev.Detail); ok {
			s.Output, _ = json.Marshal(engine.Received{Payload: sig.Payload}) // raw JSON always marshals
			f.st.Received = append(f.st.Received, Received{Signal: sig, Step: s.Key(), ReceivedAt: ev.At})
		}
	case flowtype.EventSignalTimedOut:
		s := f.step(ev, ev.At)
		s.Status, s.FinishedAt = store.StepCompleted, ev.At
		s.Output, _ = json.Marshal(engine.Received{TimedOut: true})
	case flowtype.EventSignalRejected:
		if ev.Step != "" {
			s := f.step(ev, ev.At)
			if s.Status == store.StepCompleted {
				// The wait is reopened: its recorded signal is set aside.
				s.Status, s.Output, s.FinishedAt, s.CompletedSeq = store.StepWaiting, nil, 0, 0
				if k := len(f.st.Received); k > 0 && f.st.Received[k-1].Step == s.Key() {
					f.st.Received = f.st.Received[:k-1]
				}
			}
		}
	case flowtype.EventCompensationStarted:
		s := f.step(ev, ev.At)
		s.Compensation, s.CompensationAttempts = store.CompensationRunning, ev.Attempt
	case flowtype.EventCompensationCompleted:
		s := f.step(ev, ev.At)
		s.Compensation, s.CompensationError = store.CompensationCompleted, ""
	case flowtype.EventCompensationRetried:
		s := f.step(ev, ev.At)
		s.Compensation, s.CompensationError = store.CompensationRetrying, retryMessage(ev.Detail)
	case flowtype.EventCompensationFailed:
		s := f.step(ev, ev.At)
		s.Compensation, s.CompensationError = store.CompensationFailed, ev.Detail
	}
}

// signal returns the signal a signal_received event names ("signal NAME #ID").
func (f *folder) signal(detail string) (store.Signal, bool) {
	i := strings.LastIndex(detail, "#")
	if i < 0 {
		return store.Signal{}, false
	}
	id, err := strconv.ParseInt(detail[i+1:], 10, 64)
	if err != nil {
		return store.Signal{}, false
	}
	for _, s := range f.recs.Signals {
		if s.ID == id {
			return s, true
		}
	}
	return store.Signal{}, false
}
