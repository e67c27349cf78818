package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// rec is a completed record of a call started at ms t.
func rec(name string, occurrence, position int, t int64) store.Step {
	return store.Step{RunID: "r", Name: name, Occurrence: occurrence, Position: position, StartedAt: t,
		Status: store.StepCompleted, Compensation: store.CompensationNone}
}

func callsOf(steps []store.Step) []string { return calls(steps) }

// Going back keeps the top-level calls before the point and each parallel
// call whole or not at all.
func TestPlanFrom(t *testing.T) {
	steps := []store.Step{
		rec("a", 0, 0, 10),
		rec("all0.0/x", 0, 0, 20), rec("all0.1/y", 0, 0, 20), rec("all0.1/z", 0, 1, 25),
		rec("b", 0, 1, 30),
		rec("flow.first", 0, 2, 40), rec("first0.0/p", 0, 0, 41), rec("first0.1/q", 0, 0, 41),
		rec("c", 0, 3, 50),
		rec("all1.0/x", 0, 0, 60),
		rec("a", 1, 4, 70),
	}
	for _, tc := range []struct {
		name       string
		occurrence int
		keep       []string
	}{
		{"a", 0, nil},
		{"b", 0, []string{"a#0", "all0.0/x#0", "all0.1/y#0", "all0.1/z#0"}},
		{"flow.first", 0, []string{"a#0", "all0.0/x#0", "all0.1/y#0", "all0.1/z#0", "b#0"}},
		{"c", 0, []string{"a#0", "all0.0/x#0", "all0.1/y#0", "all0.1/z#0", "b#0", "flow.first#0", "first0.0/p#0", "first0.1/q#0"}},
		{"a", 1, []string{"a#0", "all0.0/x#0", "all0.1/y#0", "all0.1/z#0", "b#0", "flow.first#0", "first0.0/p#0", "first0.1/q#0", "c#0", "all1.0/x#0"}},
	} {
		cut, err := planFrom("r", steps, tc.name, tc.occurrence)
		if err != nil {
			t.Fatalf("from %s#%d: %v", tc.name, tc.occurrence, err)
		}
		if got := callsOf(cut.keep); !slices.Equal(got, tc.keep) {
			t.Errorf("from %s#%d: keep %v, want %v", tc.name, tc.occurrence, got, tc.keep)
		}
		if len(cut.keep)+len(cut.discard) != len(steps) {
			t.Errorf("from %s#%d: %d kept and %d discarded of %d", tc.name, tc.occurrence, len(cut.keep), len(cut.discard), len(steps))
		}
	}
	if _, err := planFrom("r", steps, "all0.1/z", 0); !errors.Is(err, flowtype.ErrConflict) {
		t.Errorf("from a branch call: %v, want ErrConflict", err)
	}
	if _, err := planFrom("r", steps, "d", 0); !errors.Is(err, ErrStepNotFound) {
		t.Errorf("from a call never made: %v, want ErrStepNotFound", err)
	}
}

// A race whose loser started a call after the point did (in the same
// millisecond, listed after it) is run again whole, and the point moves
// back to it.
func TestPlanFromMovesBeforeAHalfKeptRace(t *testing.T) {
	steps := []store.Step{
		rec("a", 0, 0, 10),
		rec("flow.first", 0, 1, 20), rec("first0.0/p", 0, 0, 21),
		rec("b", 0, 2, 30), rec("first0.1/q", 0, 0, 30),
	}
	cut, err := planFrom("r", steps, "b", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := callsOf(cut.keep); !slices.Equal(got, []string{"a#0"}) {
		t.Errorf("keep %v, want [a#0]", got)
	}
	if cut.from.Name != "flow.first" {
		t.Errorf("from %s, want the race", cut.from.Key().Call())
	}
}

// A parallel call whose calls started in the same millisecond as the point,
// but before it, is kept whole: the order of the records, not their start
// times, says which came first.
func TestPlanFromKeepsAParallelCallOfTheSameMillisecond(t *testing.T) {
	steps := []store.Step{
		rec("a", 0, 0, 10),
		rec("all0.0/x", 0, 0, 10), rec("all0.1/y", 0, 0, 10),
		rec("z", 0, 1, 10),
	}
	cut, err := planFrom("r", steps, "z", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := callsOf(cut.keep), []string{"a#0", "all0.0/x#0", "all0.1/y#0"}; !slices.Equal(got, want) {
		t.Errorf("keep %v, want %v", got, want)
	}
	failed := rec("z", 0, 1, 10)
	failed.Status = store.StepFailed
	revived, err := planRevive("r", append(steps[:3:3], failed))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := callsOf(revived.keep), []string{"a#0", "all0.0/x#0", "all0.1/y#0"}; !slices.Equal(got, want) {
		t.Errorf("revive keeps %v, want %v", got, want)
	}
}

// Going back past a compensated call is refused; going back to it is not.
func TestPlanFromRefusesPastAnUndoneCall(t *testing.T) {
	reserve := rec("reserve", 0, 0, 10)
	reserve.Compensation = store.CompensationCompleted
	steps := []store.Step{reserve, rec("charge", 0, 1, 20)}
	if _, err := planFrom("r", steps, "charge", 0); !errors.Is(err, flowtype.ErrConflict) {
		t.Errorf("past a compensated call: %v, want ErrConflict", err)
	}
	if _, err := planFrom("r", steps, "reserve", 0); err != nil {
		t.Errorf("to the compensated call: %v", err)
	}
	legacy := rec("old", 0, -1, 5)
	if _, err := planFrom("r", []store.Step{legacy}, "old", 0); !errors.Is(err, flowtype.ErrConflict) {
		t.Errorf("a history without positions: %v, want ErrConflict", err)
	}
}

// Revive goes back to the first call that does not stand, and to the start
// of the parallel call holding one.
func TestPlanRevive(t *testing.T) {
	failed := rec("charge", 0, 2, 30)
	failed.Status = store.StepFailed
	undone := rec("reserve", 0, 1, 20)
	undone.Compensation = store.CompensationCompleted
	for _, tc := range []struct {
		what  string
		steps []store.Step
		keep  []string
	}{
		{"all stand", []store.Step{rec("a", 0, 0, 10), rec("b", 0, 1, 20)}, []string{"a#0", "b#0"}},
		{"a failed step", []store.Step{rec("a", 0, 0, 10), rec("b", 0, 1, 20), failed}, []string{"a#0", "b#0"}},
		{"a compensated step", []store.Step{rec("a", 0, 0, 10), undone, failed}, []string{"a#0"}},
		{"in a parallel call", []store.Step{
			rec("a", 0, 0, 10), rec("all0.0/x", 0, 0, 20),
			func() store.Step { s := rec("all0.1/y", 0, 0, 21); s.Status = store.StepRetrying; return s }(),
		}, []string{"a#0"}},
	} {
		cut, err := planRevive("r", tc.steps)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if got := callsOf(cut.keep); !slices.Equal(got, tc.keep) {
			t.Errorf("%s: keep %v, want %v", tc.what, got, tc.keep)
		}
	}
}

func TestParseCall(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		occ  int
	}{
		{"charge", "charge", 0}, {"charge#2", "charge", 2}, {"a#1#0", "a#1", 0}, {"a#b", "a#b", 0}, {"x#+1", "x#+1", 0}, {"x#-1", "x#-1", 0}, {"x#", "x#", 0},
	} {
		name, occ, err := ParseCall(tc.in)
		if err != nil || name != tc.name || occ != tc.occ {
			t.Errorf("ParseCall(%q) = %q, %d, %v; want %q, %d", tc.in, name, occ, err, tc.name, tc.occ)
		}
	}
	for _, bad := range []string{"", "#3"} {
		if _, _, err := ParseCall(bad); err == nil {
			t.Errorf("ParseCall(%q): no error", bad)
		}
	}
}
