package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Going back in a run's history: Reset re-runs a run from one of its calls
// under its own ID, Fork makes a new run that starts from one, and Revive
// brings a cancelled run or a dead letter back under its own ID from the
// first call whose effect no longer stands.
//
// Where a history can be cut. A call of the workflow body itself (a step,
// wait or child at the top level, not inside All or First) is a point to
// go back to (a call in a cancellation scope is not: scopes are cut as
// parallel calls are). Going back to call S keeps the records of the calls before S
// and discards S and everything after it, which run again: at the top level
// the calls at positions before S's; and each parallel call (All, First)
// whole, kept when every call of its branches started before S, discarded
// otherwise (with the race record of a First), so that the branches of one
// parallel call are never half replayed and half re-run. Records are the
// replay's source of truth, so the kept ones replay as recorded and the
// checks of every replay (history.go) still hold: the kept records of a
// scope are a prefix of it.
//
// A kept call must still stand: a completed step whose compensation ran
// (or is running, or failed) had its effect undone, so a history that kept
// its output would lie to the body. Going back past such a call is
// refused, naming it; go back to it or before.

// ErrStepNotFound is returned when a reset or fork names a call the run
// never made.
var ErrStepNotFound = errors.New("step not found")

// The markers before the JSON arrays of calls in the details of run_reset
// and of a fork's run_started event (see flowtype), which time travel reads.
const (
	DiscardedMarker = "; discarded: "
	CopiedMarker    = "; copied: "
)

// parallelCall matches the prefix of the calls of a top-level parallel
// call's branches, all<n>. or first<n>. (n its occurrence), and of a
// top-level cancellation scope, scope<n>/. A scope's calls have positions
// of their own, so a cut handles a scope as it does a parallel call:
// kept whole when every one of its calls started before the point,
// discarded whole otherwise (its cancel with it), and run again.
var parallelCall = regexp.MustCompile(`^(?:(all|first)(\d+)\.|scope\d+/)`)

// ParseCall reads a call as the CLI and the dashboard print it,
// "name#occurrence", or a bare name for its first occurrence (#0). The
// occurrence is the number after the last '#', so a name that holds '#'
// followed by digits needs its occurrence written out ("a#1#0").
func ParseCall(s string) (name string, occurrence int, err error) {
	if i := strings.LastIndex(s, "#"); i >= 0 {
		if n, err := strconv.Atoi(s[i+1:]); err == nil && n >= 0 && s[i+1] != '+' {
			if i == 0 {
				return "", 0, fmt.Errorf("step %q has no name", s)
			}
			return s[:i], n, nil
		}
	}
	if s == "" {
		return "", 0, errors.New("empty step name")
	}
	return s, 0, nil
}

// historyCut is the plan of going back in a run: the call gone back to and
// the records kept and discarded.
type historyCut struct {
	from    store.Step
	keep    []store.Step
	discard []store.Step
}

// calls names the records of steps as RunOpsTx takes them.
func calls(steps []store.Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Key().Call()
	}
	return out
}

// listJSON is the JSON array of the calls of steps, for an event's detail.
func listJSON(steps []store.Step) string {
	b, _ := json.Marshal(calls(steps)) // a []string always marshals
	return string(b)
}

// cutAt plans going back to the top-level call at position p, the one at
// index t of steps (p and t math.MaxInt for "after every call"). See the
// package comment above for the rules.
//
// Which calls started before the point is read from the order of steps,
// the records in the order they started (StepList: by start time, then by
// insertion), not from their start times alone: calls a millisecond apart
// often share one, and a parallel call that ran in the same millisecond as
// the point is still before it.
func cutAt(steps []store.Step, p, t int) (keep, discard []store.Step) {
	// A parallel call is discarded whole when one of its calls started at
	// or after the point, or when its race record is; discarding a race
	// record at the top level moves the cut to it, so repeat until nothing
	// moves.
	for {
		groups := map[string]bool{} // parallel call prefix → discarded
		for i, s := range steps {
			if m := parallelCall.FindString(s.Name); m != "" {
				groups[m] = groups[m] || i >= t
			}
		}
		moved := false
		for _, s := range steps {
			if s.Name != "flow.first" || s.Position >= p {
				continue
			}
			if groups["first"+strconv.Itoa(s.Occurrence)+"."] {
				p, moved = s.Position, true
			}
		}
		if moved {
			continue
		}
		keep, discard = nil, nil
		for _, s := range steps {
			kept := false
			if m := parallelCall.FindString(s.Name); m != "" {
				kept = !groups[m]
			} else {
				kept = s.Position < p
			}
			if kept {
				keep = append(keep, s)
			} else {
				discard = append(discard, s)
			}
		}
		return keep, discard
	}
}

// undone says why the record s does not stand (its effect was undone, or
// is being undone), or "".
func undone(s store.Step) string {
	switch s.Compensation {
	case store.CompensationCompleted:
		return "was compensated (its effect undone)"
	case store.CompensationRunning, store.CompensationRetrying:
		return "is being compensated"
	case store.CompensationFailed:
		return "has a failed compensation (its effect may be partly undone)"
	}
	return ""
}

// checkPositions refuses a history recorded before call positions existed:
// without them the order of its calls is unknown.
func checkPositions(runID string, steps []store.Step) error {
	for _, s := range steps {
		if s.Position < 0 {
			return fmt.Errorf("%w: run %s was recorded before call positions existed (step %s has none), so where its history could be cut is unknown", flowtype.ErrConflict, runID, s.Key().Call())
		}
	}
	return nil
}

// planFrom plans going back to the call name#occurrence of the run.
func planFrom(runID string, steps []store.Step, name string, occurrence int) (historyCut, error) {
	if err := checkPositions(runID, steps); err != nil {
		return historyCut{}, err
	}
	i := slices.IndexFunc(steps, func(s store.Step) bool { return s.Name == name && s.Occurrence == occurrence })
	if i < 0 {
		var top []string
		for _, s := range steps {
			if scopeOf(s.Name) == "" {
				top = append(top, s.Key().Call())
			}
		}
		if len(top) == 0 {
			return historyCut{}, fmt.Errorf("%w: run %s never reached step %s#%d: it has no calls", ErrStepNotFound, runID, name, occurrence)
		}
		return historyCut{}, fmt.Errorf("%w: run %s never reached step %s#%d: its calls are %s", ErrStepNotFound, runID, name, occurrence, strings.Join(top, ", "))
	}
	from := steps[i]
	if scopeOf(from.Name) != "" {
		return historyCut{}, fmt.Errorf("%w: step %s is in a branch of a parallel call (All or First) or in a cancellation scope: go back to a call of the workflow body itself, the parallel call or scope runs again whole from the call after the ones before it", flowtype.ErrConflict, from.Key().Call())
	}
	keep, discard := cutAt(steps, from.Position, i)
	for _, s := range keep {
		if why := undone(s); why != "" {
			return historyCut{}, fmt.Errorf("%w: step %s before %s %s: go back to it or before", flowtype.ErrConflict, s.Key().Call(), from.Key().Call(), why)
		}
	}
	// The cut may have moved to an earlier race (cutAt): name the call
	// the body goes back to.
	if first := slices.MinFunc(discard, func(a, b store.Step) int { return cmp.Compare(topPosition(a), topPosition(b)) }); first.Position < from.Position && scopeOf(first.Name) == "" {
		from = first
	}
	return historyCut{from: from, keep: keep, discard: discard}, nil
}

// topPosition is a record's position at the top level; the calls of a
// parallel call's branches sort after every top-level call.
func topPosition(s store.Step) int {
	if scopeOf(s.Name) != "" {
		return math.MaxInt
	}
	return s.Position
}

// planRevive plans bringing a cancelled or failed run back: it goes back to
// the first call whose record does not stand (not completed, or its effect
// undone), in the order the calls started; a parallel call holding one
// runs again whole. With every record standing, it keeps them all and the
// body replays to where it stopped.
func planRevive(runID string, steps []store.Step) (historyCut, error) {
	if err := checkPositions(runID, steps); err != nil {
		return historyCut{}, err
	}
	first := slices.IndexFunc(steps, func(s store.Step) bool { return s.Status != store.StepCompleted || undone(s) != "" })
	if first < 0 {
		return historyCut{keep: steps}, nil
	}
	p, t := steps[first].Position, first
	if m := parallelCall.FindString(steps[first].Name); m != "" {
		// Go back to the start of the parallel call: its earliest call,
		// and the first top-level call after it.
		p = math.MaxInt
		t = slices.IndexFunc(steps, func(s store.Step) bool { return strings.HasPrefix(s.Name, m) })
		for _, s := range steps[t:] {
			if scopeOf(s.Name) == "" {
				p = min(p, s.Position)
			}
		}
	}
	keep, discard := cutAt(steps, p, t)
	return historyCut{from: steps[first], keep: keep, discard: discard}, nil
}

// describeFrom names the call a reset goes back to for an event's detail.
func describeFrom(c historyCut) string {
	if c.from.Name == "" {
		return "after its last call"
	}
	return "from " + c.from.Key().Call() + " (" + describeCall(c.from.Name) + ")"
}

// Reset re-runs the run id from its top-level call name#occurrence under
// its own ID: the records of the calls before it are kept, the others
// discarded, and the run is pending again, due now, with no outcome (see
// resetIn). Finished (completed, failed and not requeued, cancelled),
// suspended, and pending or waiting runs no engine holds can be reset; a
// run an engine executes (running, or leased) or unwinds (compensating) is
// flowtype.ErrConflict, and so is a requeued dead letter (its requeue is its
// successor: fork it instead). A call the run never made is
// ErrStepNotFound; an unknown run flowtype.ErrRunNotFound. Nothing changes on
// refusal.
func (e *Engine) Reset(ctx context.Context, id, name string, occurrence int) error {
	var queue string
	var again bool
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		if err := resettable(run); err != nil {
			return err
		}
		steps, err := tx.StepList(ctx, id)
		if err != nil {
			return err
		}
		cut, err := planFrom(id, steps, name, occurrence)
		if err != nil {
			return err
		}
		queue, again = run.Queue, run.Status.Finished()
		return e.resetIn(ctx, tx, run, cut, "")
	})
	if err != nil {
		return fmt.Errorf("reset run %s from %s#%d: %w", id, name, occurrence, err)
	}
	e.wokeAgain(queue, again)
	return nil
}

// wokeAgain wakes the queue of a run a reset put back to work, and counts a
// run that had finished as started again: it will finish once more, and
// flowtype.EngineMetrics.RunsStarted should not fall behind RunsFinished (as
// with Requeue).
func (e *Engine) wokeAgain(queue string, finished bool) {
	if finished {
		e.metrics.runStarted()
	}
	e.Wake(queue)
}

// Revive brings the cancelled or failed (not requeued) run id back under
// its own ID: it goes back to the first call whose record does not stand
// (planRevive) and runs again from there, as Reset does. A suspended run
// is flowtype.ErrConflict (Resume it), and so is a completed one (Reset it
// from a call), a requeued dead letter, and an unfinished run; an unknown
// run flowtype.ErrRunNotFound. Nothing changes on refusal.
func (e *Engine) Revive(ctx context.Context, id string) error {
	var queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case run.Status == flowtype.StatusSuspended:
			return fmt.Errorf("%w: run is suspended: resume it instead", flowtype.ErrConflict)
		case run.Status == flowtype.StatusCompleted:
			return fmt.Errorf("%w: run is completed: reset it from one of its calls to run it again", flowtype.ErrConflict)
		case run.Status != flowtype.StatusCancelled && run.Status != flowtype.StatusFailed:
			return fmt.Errorf("%w: run is %s, not cancelled or failed", flowtype.ErrConflict, run.Status)
		}
		if err := resettable(run); err != nil {
			return err
		}
		steps, err := tx.StepList(ctx, id)
		if err != nil {
			return err
		}
		cut, err := planRevive(id, steps)
		if err != nil {
			return err
		}
		queue = run.Queue
		return e.resetIn(ctx, tx, run, cut, "revived (it was "+string(run.Status)+") ")
	})
	if err != nil {
		return fmt.Errorf("revive run %s: %w", id, err)
	}
	e.wokeAgain(queue, true)
	return nil
}

// resettable refuses the runs that cannot go back in their history in
// place: one an engine holds or unwinds, and a requeued dead letter.
func resettable(run store.Run) error {
	switch {
	case run.LeaseOwner != "":
		return fmt.Errorf("%w: run is %s and leased by %s: it is executing; cancel it, or wait until it settles", flowtype.ErrConflict, run.Status, run.LeaseOwner)
	case run.Status == flowtype.StatusRunning:
		return fmt.Errorf("%w: run is running", flowtype.ErrConflict)
	case run.Status == flowtype.StatusCompensating:
		return fmt.Errorf("%w: run is compensating: its completed steps are being undone; wait until it ends", flowtype.ErrConflict)
	case run.RequeuedAs != "":
		return fmt.Errorf("%w: run was requeued as %s, which carries it on: fork it instead", flowtype.ErrConflict, run.RequeuedAs)
	}
	return nil
}

// resetIn takes run back to cut in tx: its discarded records go, the signals
// their receives took are pending again (the run receives them again when it
// waits anew), the kept records have no compensation, and the run is
// pending, due now, with no outcome, its deadline moved as Requeue moves it
// (a run with a timeout gets the whole timeout again). A run_reset event
// records what was discarded. The run's write is a compare-and-set on the
// status and fence read, so a claim in between makes it
// flowtype.ErrConflict.
func (e *Engine) resetIn(ctx context.Context, tx store.Tx, run store.Run, cut historyCut, prefix string) error {
	if err := childrenGone(ctx, tx, cut.discard); err != nil {
		return err
	}
	now := e.nowMs()
	if run.UniqueKey != "" && run.Status.Finished() {
		// The run takes its unique key again: refuse a second holder.
		if holder, err := uniqueHolder(ctx, tx, run.Workflow, run.UniqueKey, now); err == nil && holder.ID != run.ID {
			return fmt.Errorf("%w: run %s holds its unique key %q now", flowtype.ErrConflict, holder.ID, run.UniqueKey)
		} else if err != nil && !errors.Is(err, flowtype.ErrRunNotFound) {
			return err
		}
	}
	var deadline int64
	switch {
	case run.Timeout > 0:
		// Its first claim turned the timeout into its deadline, and no
		// later claim does: the run gets the whole of it again from now.
		deadline = now + run.Timeout
	case run.Deadline > 0:
		deadline = run.Deadline - run.CreatedAt + now
	}
	ok, err := tx.RunReset(ctx, store.RunResetParams{ID: run.ID, Expected: run.Status, Fence: run.Fence, Deadline: deadline, Now: now})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: run changed meanwhile (an engine claimed it): read it again", flowtype.ErrConflict)
	}
	if _, err := tx.StepDiscard(ctx, run.ID, calls(cut.discard)); err != nil {
		return err
	}
	var waits []string
	for _, s := range cut.discard {
		if strings.HasPrefix(strings.TrimPrefix(s.Name, scopeOf(s.Name)), "flow.receive:") {
			waits = append(waits, s.Key().String())
		}
	}
	if _, err := tx.SignalRedeliver(ctx, run.ID, waits); err != nil {
		return err
	}
	if err := tx.StepCompensationClear(ctx, run.ID); err != nil {
		return err
	}
	detail := fmt.Sprintf("%s%s; kept %d calls%s%s", prefix, describeFrom(cut), len(cut.keep), DiscardedMarker, listJSON(cut.discard))
	return tx.EventAppend(ctx, store.Event{RunID: run.ID, At: now, Kind: flowtype.EventRunReset, Detail: detail})
}

// childrenGone refuses to discard the start of a child whose run still
// exists: the re-run would start it again under the same ID (derived from
// the parent's, or the one ChildOptions gave), which is taken, and fail with
// flowtype.ErrRunExists. The operator decides what becomes of the child:
// delete it (a finished child of a finished parent), go back to a call after
// its start, or fork the parent, whose children are its own.
func childrenGone(ctx context.Context, tx store.Tx, discard []store.Step) error {
	for _, s := range discard {
		if !strings.HasPrefix(strings.TrimPrefix(s.Name, scopeOf(s.Name)), "flow.child:") || s.Status != store.StepCompleted {
			continue
		}
		var childID string
		if json.Unmarshal(s.Output, &childID) != nil || childID == "" {
			continue
		}
		child, err := tx.RunGet(ctx, childID)
		if errors.Is(err, flowtype.ErrRunNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: step %s started child run %s, which is %s: its re-run would find the ID taken; go back to a call after it, fork the run (a fork starts children of its own), or delete the child first", flowtype.ErrConflict, s.Key().Call(), childID, child.Status)
	}
	return nil
}

// forkSuffix ends the ID of a fork: the run's ID plus /fork-N, so that a
// sharded engine keeps it in its run's shard, as a requeue's /requeue-N.
const forkSuffix = "/fork-"

// maxForks bounds the forks of one run, so that a run forked without end
// cannot make Fork search IDs without end.
const maxForks = 10_000

// Fork makes a new run of the run id that starts from its top-level call
// name#occurrence, and returns the new run's ID, id + "/fork-N" for the
// first N free: the records of the calls before it are copied, and the new
// run is pending, due now. It has the run's workflow version, queue,
// priority and input, no parent and no unique key, and the deadline moved
// as Requeue moves it; its children and its steps' idempotency keys derive
// from its own ID. The run forked from is left as it is, whatever its
// state, but for a run_forked event naming the fork. A call the run never
// made is ErrStepNotFound; an unknown run flowtype.ErrRunNotFound.
func (e *Engine) Fork(ctx context.Context, id, name string, occurrence int) (string, error) {
	var newID, queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		steps, err := tx.StepList(ctx, id)
		if err != nil {
			return err
		}
		cut, err := planFrom(id, steps, name, occurrence)
		if err != nil {
			return err
		}
		now := e.nowMs()
		for n := 1; newID == "" && n <= maxForks; n++ {
			candidate := id + forkSuffix + strconv.Itoa(n)
			ok, err := tx.RunForkInsert(ctx, store.RunForkParams{FromID: id, ID: candidate, Now: now})
			if err != nil {
				return err
			}
			if ok {
				newID = candidate
			}
		}
		if newID == "" {
			return fmt.Errorf("%w: run has %d forks, the most there can be", flowtype.ErrConflict, maxForks)
		}
		if _, err := tx.StepCopy(ctx, id, newID, calls(cut.keep)); err != nil {
			return err
		}
		key := flowtype.WorkflowKey{Name: run.Workflow, Version: run.Version}
		err = tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: flowtype.EventRunForked, Detail: "as " + newID + " " + describeFrom(cut)})
		if err != nil {
			return err
		}
		queue = run.Queue
		detail := fmt.Sprintf("%s on %s, fork of %s %s%s%s", key, run.Queue, id, describeFrom(cut), CopiedMarker, listJSON(cut.keep))
		return tx.EventAppend(ctx, store.Event{RunID: newID, At: now, Kind: flowtype.EventRunStarted, Detail: detail})
	})
	if err != nil {
		return "", fmt.Errorf("fork run %s from %s#%d: %w", id, name, occurrence, err)
	}
	e.metrics.runStarted() // a run like any other, as Requeue counts its
	e.Wake(queue)
	return newID, nil
}
