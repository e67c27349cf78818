package engine

import (
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
)

func TestSumMetrics(t *testing.T) {
	step := newHistogram(StepSecondsBounds())
	observe(step, 0.002) // (0.001, 0.005]
	observe(step, 400)   // above every bound
	a := flowtype.EngineMetrics{
		RunsStarted:    3,
		RunsFinished:   map[flowtype.RunStatus]int64{flowtype.StatusCompleted: 2, flowtype.StatusFailed: 1},
		AttemptSeconds: map[string]flowtype.Histogram{"step": cloneHistogram(step)},
	}
	// A report of another version, with coarser bounds: its buckets land in
	// the first bucket of the sum whose bound is at least theirs.
	other := flowtype.Histogram{Bounds: []float64{0.01, 1}, Counts: []uint64{4, 5, 6}, Sum: 100, Count: 15}
	b := flowtype.EngineMetrics{
		RunsStarted:    2,
		RunsFinished:   map[flowtype.RunStatus]int64{flowtype.StatusCompleted: 1},
		AttemptSeconds: map[string]flowtype.Histogram{"step": other},
		ClaimSeconds:   map[string]flowtype.Histogram{"q": {Bounds: ClaimSecondsBounds(), Counts: make([]uint64, len(ClaimSecondsBounds())+1), Count: 0}},
	}
	sum := SumMetrics(a, b)
	if sum.RunsStarted != 5 || sum.RunsFinished[flowtype.StatusCompleted] != 3 || sum.RunsFinished[flowtype.StatusFailed] != 1 {
		t.Errorf("counters: %+v", sum)
	}
	h := sum.AttemptSeconds["step"]
	if h.Count != 17 || h.Sum != 0.002+400+100 {
		t.Errorf("step histogram count %d sum %v, want 17 and %v", h.Count, h.Sum, 0.002+400+100)
	}
	want := make([]uint64, len(StepSecondsBounds())+1)
	want[1] = 1                                       // 0.002
	want[slices.Index(StepSecondsBounds(), 0.01)] = 4 // other's <= 0.01
	want[slices.Index(StepSecondsBounds(), 1)] = 5    // other's (0.01, 1]
	want[len(want)-1] = 1 + 6                         // 400 and other's > 1
	if !slices.Equal(h.Counts, want) {
		t.Errorf("step buckets %v, want %v", h.Counts, want)
	}
	if c := SumMetrics().AttemptSeconds["compensation"]; len(c.Counts) != len(StepSecondsBounds())+1 || c.Count != 0 {
		t.Errorf("sum of nothing: compensation histogram %+v, want an empty one", c)
	}
	if a.RunsFinishedTotal() != 3 {
		t.Errorf("RunsFinishedTotal = %d, want 3", a.RunsFinishedTotal())
	}
	if _, ok := sum.ClaimSeconds["q"]; !ok {
		t.Error("claim histogram of queue q missing from the sum")
	}
	// The inputs are not changed.
	if a.AttemptSeconds["step"].Count != 2 || b.AttemptSeconds["step"].Counts[0] != 4 {
		t.Error("SumMetrics changed its inputs")
	}
}
