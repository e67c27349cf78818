package timetravel

import (
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// A receive whose signal a later version could not decode is reopened
// (StepReopen clears its row's output): the fold still shows what it had
// received until then, from the signal the event names, and what it
// received after.
func TestFoldReopenedReceive(t *testing.T) {
	t.Parallel()
	const wait = "flow.receive:approve"
	recs := Records{
		Run:   store.Run{ID: "r", Status: flowtype.StatusCompleted, Output: []byte(`1`)},
		Steps: []store.Step{{RunID: "r", Name: wait, Status: store.StepCompleted, Input: []byte(`{}`), Output: []byte(`{"payload":2}`)}},
		Signals: []store.Signal{
			{ID: 1, RunID: "r", Name: "approve", Payload: []byte(`"yes"`), ConsumedBy: "rejected"},
			{ID: 2, RunID: "r", Name: "approve", Payload: []byte(`2`)},
		},
		Events: []store.Event{
			{ID: 10, RunID: "r", At: 100, Kind: flowtype.EventRunStarted},
			{ID: 11, RunID: "r", At: 101, Kind: flowtype.EventRunClaimed},
			{ID: 12, RunID: "r", At: 102, Kind: flowtype.EventSignalWaiting, Step: wait},
			{ID: 13, RunID: "r", At: 103, Kind: flowtype.EventSignalReceived, Step: wait, Detail: "signal approve #1"},
			{ID: 14, RunID: "r", At: 104, Kind: flowtype.EventSignalRejected, Step: wait, Detail: "signal approve #1: payload rejected"},
			{ID: 15, RunID: "r", At: 105, Kind: flowtype.EventSignalReceived, Step: wait, Detail: "signal approve #2"},
			{ID: 16, RunID: "r", At: 106, Kind: flowtype.EventRunCompleted},
		},
	}
	for _, tt := range []struct {
		n        int
		status   store.StepStatus
		output   string
		received []int64
	}{
		{3, store.StepWaiting, "", nil},
		{4, store.StepCompleted, `{"payload":"yes"}`, []int64{1}},
		{5, store.StepWaiting, "", nil},
		{6, store.StepCompleted, `{"payload":2}`, []int64{2}},
	} {
		st := Fold(recs, tt.n)
		if len(st.Steps) != 1 || st.Steps[0].Status != tt.status || string(st.Steps[0].Output) != tt.output {
			t.Errorf("after %d events: steps %+v, want %s with output %q", tt.n, st.Steps, tt.status, tt.output)
		}
		var ids []int64
		for _, r := range st.Received {
			ids = append(ids, r.Signal.ID)
		}
		if len(ids) != len(tt.received) || (len(ids) > 0 && ids[0] != tt.received[0]) {
			t.Errorf("after %d events: received %v, want %v", tt.n, ids, tt.received)
		}
	}
	if st := Fold(recs, 99); st.Status != flowtype.StatusCompleted || string(st.Output) != `1` || st.Events != 7 || st.LastEventID != 16 {
		t.Errorf("full fold: %+v", st)
	}
}

func TestCounts(t *testing.T) {
	t.Parallel()
	recs := Records{Events: []store.Event{{ID: 4, At: 10}, {ID: 9, At: 10}, {ID: 12, At: 20}}}
	for at, want := range map[int64]int{9: 0, 10: 2, 19: 2, 20: 3, 99: 3} {
		if got := CountAt(recs, at); got != want {
			t.Errorf("CountAt(%d) = %d, want %d", at, got, want)
		}
	}
	if n, ok := CountThrough(recs, 9); !ok || n != 2 {
		t.Errorf("CountThrough(9) = %d, %v", n, ok)
	}
	if _, ok := CountThrough(recs, 5); ok {
		t.Error("CountThrough(5) found an event the run does not have")
	}
}
