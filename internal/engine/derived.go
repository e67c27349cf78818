package engine

import (
	"slices"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// A lean record (FirstStep.Lean, flow.LeanRecord) stores a job's happy
// path in fewer rows: the claim that begins the first attempt stores
// neither its run_claimed nor its step_started event, and when that
// attempt succeeds, the job's step completes without a step_completed
// event (a later attempt's is stored, as its start is). What those events
// would say is in the rows anyway: the claim's time is the run's
// started_at (the first claim sets it, in the same statement as the event
// it leaves out), the attempt began then, and the step's row holds when it
// completed and after how many attempts. Every failure, retry, rescue,
// later claim and outcome is stored as for any run, so the change feed
// sees the run start, end and every failure between; only history reads
// (History, Inspect, time travel) put the missing events back, here.

// derivedClaimDetail is the detail of a derived run_claimed event: the
// claim's owner is not kept once the lease is gone.
const derivedClaimDetail = "fence 1 (lean record: derived from the run's first claim)"

// IsLean reports whether the history of run leaves out the events of its
// first claim, which only a lean record's claim does: every other claim of
// fence 1 stores its run_claimed event, and a fork, whose claims start at
// fence 2, is told by its run_started event (CopiedMarker).
func IsLean(run store.Run, events []store.Event) bool {
	if run.StartedAt == 0 {
		return false // never claimed
	}
	for _, ev := range events {
		switch {
		case ev.Kind == flowtype.EventRunClaimed && strings.HasPrefix(ev.Detail, "fence 1,"):
			return false
		case ev.Kind == flowtype.EventRunStarted && strings.Contains(ev.Detail, CopiedMarker):
			return false
		}
	}
	return true
}

// DeriveLean returns the history of a lean run (IsLean) with the events
// its record leaves out put back where they happened, from the run's row
// and its steps' (in the store's order); other histories are returned as
// they are. Derived events have negative IDs, -1, -2, -3 in history order,
// so that a reader can tell them and time travel can address them.
func DeriveLean(run store.Run, steps []store.Step, events []store.Event) []store.Event {
	if !IsLean(run, events) {
		return events
	}
	first := firstStep(steps)
	claim := []store.Event{{RunID: run.ID, At: run.StartedAt, Kind: flowtype.EventRunClaimed, Detail: derivedClaimDetail}}
	if first != nil && !has(events, flowtype.EventStepStarted, first, 1) {
		claim = append(claim, store.Event{RunID: run.ID, At: run.StartedAt, Kind: flowtype.EventStepStarted,
			Step: first.Name, Occurrence: first.Occurrence, Attempt: 1})
	}
	// The claim's events go after what the run recorded while it waited
	// for it, and before anything its execution recorded: times alone do
	// not order them, as they share a millisecond often (a run claimed in
	// its start's own transaction; a test's clock that stands still).
	at := len(events)
	for i, ev := range events {
		if ev.At > run.StartedAt || ev.At == run.StartedAt && !beforeClaim(ev.Kind) {
			at = i
			break
		}
	}
	out := slices.Concat(events[:at], claim, events[at:])
	if first != nil && first.Status == store.StepCompleted && !has(out, flowtype.EventStepCompleted, first, 0) {
		done := store.Event{RunID: run.ID, At: first.FinishedAt, Kind: flowtype.EventStepCompleted,
			Step: first.Name, Occurrence: first.Occurrence, Attempt: first.Attempts}
		// The job's step completes in the transaction of the run's outcome,
		// just before it: after the start of its last attempt (and what the
		// attempt stored when it ended: its last progress and stream
		// writes), before the first outcome that follows.
		at := len(out)
		for i := lastStart(out, first); i < len(out); i++ {
			if runEnds(out[i].Kind) {
				at = i
				break
			}
		}
		out = slices.Insert(out, at, done)
	}
	id := int64(0)
	for i := range out {
		if out[i].ID == 0 {
			id--
			out[i].ID = id
		}
	}
	return out
}

// firstStep returns the record of the run's first call, the job's one
// step: occurrence 0 at position 0.
func firstStep(steps []store.Step) *store.Step {
	for i := range steps {
		if steps[i].Position == 0 && steps[i].Occurrence == 0 {
			return &steps[i]
		}
	}
	return nil
}

// has reports whether events hold one of kind for step s (and, when
// attempt is not 0, that attempt).
func has(events []store.Event, kind string, s *store.Step, attempt int) bool {
	for _, ev := range events {
		if ev.Kind == kind && ev.Step == s.Name && ev.Occurrence == s.Occurrence && (attempt == 0 || ev.Attempt == attempt) {
			return true
		}
	}
	return false
}

// lastStart returns the index of the step_started event of the last
// attempt of s in events, or 0.
func lastStart(events []store.Event, s *store.Step) int {
	for i := len(events) - 1; i >= 0; i-- {
		ev := events[i]
		if ev.Kind == flowtype.EventStepStarted && ev.Step == s.Name && ev.Occurrence == s.Occurrence {
			return i
		}
	}
	return 0
}

// beforeClaim reports whether an event of kind can belong to a run that
// was never claimed: what a start, a debounce or an operator records of a
// pending run.
func beforeClaim(kind string) bool {
	switch kind {
	case flowtype.EventRunStarted, flowtype.EventRunDebounced, flowtype.EventRunMadeDue, flowtype.EventRunRescheduled:
		return true
	}
	return false
}

// runEnds reports whether kind ends a run (its outcome).
func runEnds(kind string) bool {
	switch kind {
	case flowtype.EventRunCompleted, flowtype.EventRunFailed, flowtype.EventRunCancelled, flowtype.EventRunSuspended:
		return true
	}
	return false
}
