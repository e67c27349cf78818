package flowtype

import (
	"encoding/json"
	"fmt"
	"time"
)

// EventStepProgress: an attempt of a step reported how far it got
// (flow.SetProgress). Detail holds the Progress as JSON. The engine writes
// the latest value of an attempt at most every few hundred milliseconds and
// once more with the attempt's outcome, so the history holds a sample of
// the calls, not one event per call.
const EventStepProgress = "step_progress"

// Progress is how far a step attempt or a job's handler got: Done units of
// work out of Total (zero when the total is unknown), and a Message for a
// person. The latest value reported wins.
type Progress struct {
	Done    int64  `json:"done"`
	Total   int64  `json:"total,omitempty"`
	Message string `json:"message,omitempty"`
}

// Percent returns Done as a percentage of Total, capped to 0..100; ok is
// false when Total is unknown (zero or negative).
func (p Progress) Percent() (pct float64, ok bool) {
	if p.Total <= 0 {
		return 0, false
	}
	return min(max(float64(p.Done)*100/float64(p.Total), 0), 100), true
}

// String renders p for a person: "40% (40/100) exported 40k rows", or
// "40 done" when the total is unknown.
func (p Progress) String() string {
	var s string
	if pct, ok := p.Percent(); ok {
		s = fmt.Sprintf("%.0f%% (%d/%d)", pct, p.Done, p.Total)
	} else {
		s = fmt.Sprintf("%d done", p.Done)
	}
	if p.Message != "" {
		s += " " + p.Message
	}
	return s
}

// StepProgress is the latest progress of one step attempt, as recorded.
type StepProgress struct {
	Step       string
	Occurrence int
	Attempt    int
	Progress
	At time.Time // when the value was recorded
}

// EncodeProgress is the Detail of a step_progress event.
func EncodeProgress(p Progress) string {
	b, err := json.Marshal(p)
	if err != nil {
		// A struct of two integers and a string always encodes.
		panic(fmt.Sprintf("encode progress: %v", err))
	}
	return string(b)
}

// DecodeProgress reads the Detail of a step_progress event.
func DecodeProgress(detail string) (Progress, error) {
	var p Progress
	if err := json.Unmarshal([]byte(detail), &p); err != nil {
		return Progress{}, fmt.Errorf("decode progress %q: %w", detail, err)
	}
	return p, nil
}
