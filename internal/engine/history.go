package engine

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// history holds the calls a run recorded, by branch and position, so that a
// replay can be checked against them: the n-th call of a branch (a step, a
// wait, a child, a race) must be the call recorded n-th, and a body that
// returns must have made every recorded call again. A replay that asks for
// something else runs code that no longer matches the run's history (a
// deploy that reordered, renamed, added or removed calls without a new
// Version); going on would mix two programs' effects, so the run stops with
// a *NonDeterminismError and is suspended for an operator.
//
// Calls recorded before positions existed (Position < 0) are not checked.
// history is guarded by the runState's mutex.
type history struct {
	records    map[store.StepKey]store.Step // every recorded call, by key
	byPosition map[callPosition]store.Step
	calls      map[store.StepKey]int  // position of every call this execution made
	visited    map[store.StepKey]bool // recorded calls this execution made again
	// unpositioned says the run has calls recorded before positions
	// existed (and so before patches did).
	unpositioned bool
}

// callPosition locates a call: its branch's scope and its index there.
type callPosition struct {
	scope    string
	position int
}

func newHistory(records map[store.StepKey]store.Step, steps []store.Step) history {
	h := history{
		records:    records,
		byPosition: make(map[callPosition]store.Step, len(steps)),
		calls:      make(map[store.StepKey]int),
		visited:    make(map[store.StepKey]bool, len(steps)),
	}
	for _, s := range steps {
		if s.Position >= 0 {
			h.byPosition[callPosition{scopeOf(s.Name), s.Position}] = s
		} else {
			h.unpositioned = true
		}
	}
	return h
}

// branchScope matches the scope prefix that All and First give the calls of
// their branches (see RunContext.Branch and NewRace), and cancellation
// scopes the calls made in them (RunContext.WithCancel).
var branchScope = regexp.MustCompile(`^(?:(?:all|first)\d+\.\d+/|scope\d+/)*`)

// scopeOf returns the branch scope of a recorded call's name.
func scopeOf(name string) string { return branchScope.FindString(name) }

// check records that the call key is made at position in scope, and
// returns a *NonDeterminismError when the history recorded another call
// there, or this call at another position.
func (h *history) check(scope string, position int, key store.StepKey) error {
	h.calls[key] = position
	diverged := func(recorded string) error {
		return &flowtype.NonDeterminismError{
			RunID: key.RunID, Branch: strings.TrimSuffix(scope, "/"), Position: position,
			Recorded: recorded, Replayed: describeCall(strings.TrimPrefix(key.Name, scope)),
		}
	}
	if rec, ok := h.byPosition[callPosition{scope, position}]; ok {
		if rec.Name != key.Name || rec.Occurrence != key.Occurrence {
			return diverged(describeCall(strings.TrimPrefix(rec.Name, scope)))
		}
		h.visited[key] = true
		return nil
	}
	if rec, ok := h.records[key]; ok && rec.Position >= 0 {
		return diverged(fmt.Sprintf("%s as call %d", describeCall(strings.TrimPrefix(rec.Name, scope)), rec.Position+1))
	}
	return nil
}

// position returns the position of a call this execution made.
func (h *history) position(key store.StepKey) int {
	if p, ok := h.calls[key]; ok {
		return p
	}
	return -1
}

// unvisited returns a *NonDeterminismError for the first recorded call that
// a body which returned did not make again, or nil.
func (h *history) unvisited(runID string) error {
	var missed []store.Step
	for _, rec := range h.byPosition {
		if !h.visited[rec.Key()] {
			missed = append(missed, rec)
		}
	}
	if len(missed) == 0 {
		return nil
	}
	first := slices.MinFunc(missed, func(a, b store.Step) int {
		return cmp.Or(cmp.Compare(scopeOf(a.Name), scopeOf(b.Name)), cmp.Compare(a.Position, b.Position))
	})
	scope := scopeOf(first.Name)
	return &flowtype.NonDeterminismError{
		RunID: runID, Branch: strings.TrimSuffix(scope, "/"), Position: first.Position,
		Recorded: describeCall(strings.TrimPrefix(first.Name, scope)), Replayed: "",
	}
}

// describeCall names a recorded call for people: its kind and name.
func describeCall(name string) string {
	kinds := []struct{ prefix, kind string }{
		{"flow.receive:", "receive of signal"},
		{"flow.child:", "start of child workflow"},
		{"flow.await:", "wait for child run"},
		{"flow.signal:", "send of signal"},
		{patchPrefix, "patch marker"},
	}
	for _, k := range kinds {
		if rest, ok := strings.CutPrefix(name, k.prefix); ok {
			return fmt.Sprintf("%s %q", k.kind, rest)
		}
	}
	switch name {
	case "flow.sleep":
		return "sleep"
	case "flow.first":
		return "race (First)"
	case "flow.now":
		return "Now"
	case cancelCall:
		return "cancel of the scope"
	}
	return fmt.Sprintf("step %q", name)
}
