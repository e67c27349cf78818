package flowtype

import (
	"encoding/json"
	"fmt"
	"time"
)

// The event kind of step progress, beside the others of event.go.
const (
	// EventStepProgress: an attempt of a step reported how far it got
	// (flow.SetProgress). Detail holds the Progress as JSON. The engine
	// writes the latest value of an attempt at most every few hundred
	// milliseconds and once more with the attempt's outcome, so the
	// history holds a sample of the calls, not one event per call.
	EventStepProgress = "step_progress"
)

// Progress is how far a step attempt or a job's handler got: Done units of
// work out of Total (zero when the total is unknown), and a Message for a
// person. The latest value reported wins.
type Progress struct {
	// Done is how many units of work are done.
	Done int64 `json:"done"`
	// Total is how many there are in all; zero when unknown.
	Total int64 `json:"total,omitempty"`
	// Message says what is going on, for a person.
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
	Step       string // the step's name
	Occurrence int    // the step call's occurrence in the run, from 0
	Attempt    int    // the attempt that reported it, from 1
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
