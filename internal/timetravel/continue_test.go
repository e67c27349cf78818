package timetravel

import (
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// A continue-as-new drops the ended execution's calls: before it, the fold
// shows the call the event lists, without the output its row now holds
// (the next execution's); at it, the run is pending with no calls; after
// it, the next execution's call with its output.
func TestFoldContinuedAsNew(t *testing.T) {
	t.Parallel()
	recs := Records{
		Run:   store.Run{ID: "r", Status: flowtype.StatusRunning},
		Steps: []store.Step{{RunID: "r", Name: "tick", Status: store.StepCompleted, Input: []byte(`1`), Output: []byte(`2`)}},
		Events: []store.Event{
			{ID: 1, RunID: "r", At: 100, Kind: flowtype.EventRunStarted},
			{ID: 2, RunID: "r", At: 101, Kind: flowtype.EventRunClaimed},
			{ID: 3, RunID: "r", At: 102, Kind: flowtype.EventStepStarted, Step: "tick", Attempt: 1},
			{ID: 4, RunID: "r", At: 103, Kind: flowtype.EventStepCompleted, Step: "tick", Attempt: 1},
			{ID: 5, RunID: "r", At: 104, Kind: flowtype.EventContinuedAsNew, Occurrence: 2,
				Detail: "execution 2 began; execution 1 recorded 1 calls" + engine.DiscardedMarker + `["tick#0"]`},
			{ID: 6, RunID: "r", At: 105, Kind: flowtype.EventRunClaimed},
			{ID: 7, RunID: "r", At: 106, Kind: flowtype.EventStepStarted, Step: "tick", Attempt: 1},
			{ID: 8, RunID: "r", At: 107, Kind: flowtype.EventStepCompleted, Step: "tick", Attempt: 1},
		},
	}
	before := Fold(recs, 4)
	if len(before.Steps) != 1 || before.Steps[0].Status != store.StepCompleted || before.Steps[0].Output != nil {
		t.Errorf("before the continue: steps %+v, want tick completed without the next execution's output", before.Steps)
	}
	at := Fold(recs, 5)
	if len(at.Steps) != 0 || at.Status != flowtype.StatusPending {
		t.Errorf("at the continue: %s with steps %+v, want pending with none", at.Status, at.Steps)
	}
	after := Fold(recs, 8)
	if len(after.Steps) != 1 || string(after.Steps[0].Output) != "2" || after.Status != flowtype.StatusRunning {
		t.Errorf("after: %s with steps %+v, want running with tick's output 2", after.Status, after.Steps)
	}
}
