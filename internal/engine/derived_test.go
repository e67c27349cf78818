package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func TestDeriveLean(t *testing.T) {
	ev := func(id, at int64, kind string, attempt int) store.Event {
		e := store.Event{ID: id, RunID: "r", At: at, Kind: kind, Attempt: attempt}
		if kind == flowtype.EventStepStarted || kind == flowtype.EventStepRetried || kind == flowtype.EventStepCompleted || kind == flowtype.EventStepProgress {
			e.Step = "job"
		}
		return e
	}
	detail := func(e store.Event, d string) store.Event { e.Detail = d; return e }
	step := func(status store.StepStatus, attempts int, finished int64) []store.Step {
		return []store.Step{{RunID: "r", Name: "job", Status: status, Attempts: attempts, FinishedAt: finished}}
	}
	for _, tc := range []struct {
		name   string
		run    store.Run
		steps  []store.Step
		events []store.Event
		want   []string // kind/attempt/ID of each event
	}{{
		name:   "happy path, times apart",
		run:    store.Run{ID: "r", StartedAt: 20},
		steps:  step(store.StepCompleted, 1, 30),
		events: []store.Event{ev(1, 10, flowtype.EventRunStarted, 0), ev(2, 30, flowtype.EventStepProgress, 1), ev(3, 31, flowtype.EventRunCompleted, 0)},
		want:   []string{"run_started/0/1", "run_claimed/0/-1", "step_started/1/-2", "step_progress/1/2", "step_completed/1/-3", "run_completed/0/3"},
	}, {
		name:   "happy path, one millisecond",
		run:    store.Run{ID: "r", StartedAt: 10},
		steps:  step(store.StepCompleted, 1, 10),
		events: []store.Event{ev(1, 10, flowtype.EventRunStarted, 0), ev(2, 10, flowtype.EventRunCompleted, 0)},
		want:   []string{"run_started/0/1", "run_claimed/0/-1", "step_started/1/-2", "step_completed/1/-3", "run_completed/0/2"},
	}, {
		name:  "retried, one millisecond",
		run:   store.Run{ID: "r", StartedAt: 10},
		steps: step(store.StepCompleted, 2, 10),
		events: []store.Event{ev(1, 10, flowtype.EventRunStarted, 0), ev(2, 10, flowtype.EventStepRetried, 1), ev(3, 10, flowtype.EventRunReleased, 0),
			detail(ev(4, 10, flowtype.EventRunClaimed, 0), "fence 2, w1"), ev(5, 10, flowtype.EventStepStarted, 2), ev(6, 10, flowtype.EventRunCompleted, 0)},
		want: []string{"run_started/0/1", "run_claimed/0/-1", "step_started/1/-2", "step_retried/1/2", "run_released/0/3",
			"run_claimed/0/4", "step_started/2/5", "step_completed/2/-3", "run_completed/0/6"},
	}, {
		name:   "still running",
		run:    store.Run{ID: "r", StartedAt: 20},
		steps:  step(store.StepRunning, 1, 0),
		events: []store.Event{ev(1, 10, flowtype.EventRunStarted, 0)},
		want:   []string{"run_started/0/1", "run_claimed/0/-1", "step_started/1/-2"},
	}, {
		name:   "full record",
		run:    store.Run{ID: "r", StartedAt: 20},
		steps:  step(store.StepCompleted, 1, 30),
		events: []store.Event{ev(1, 10, flowtype.EventRunStarted, 0), detail(ev(2, 20, flowtype.EventRunClaimed, 0), "fence 1, w1"), ev(3, 20, flowtype.EventStepStarted, 1), ev(4, 30, flowtype.EventStepCompleted, 1), ev(5, 30, flowtype.EventRunCompleted, 0)},
		want:   []string{"run_started/0/1", "run_claimed/0/2", "step_started/1/3", "step_completed/1/4", "run_completed/0/5"},
	}, {
		// A fork's first claim has fence 2; it is stored all the same.
		name:   "fork",
		run:    store.Run{ID: "r", StartedAt: 20},
		steps:  step(store.StepCompleted, 1, 5),
		events: []store.Event{detail(ev(1, 10, flowtype.EventRunStarted, 0), "job:1 on default, fork of r0 from job#0"+CopiedMarker+`["job#0"]`), detail(ev(2, 20, flowtype.EventRunClaimed, 0), "fence 2, w1"), ev(3, 30, flowtype.EventRunCompleted, 0)},
		want:   []string{"run_started/0/1", "run_claimed/0/2", "run_completed/0/3"},
	}, {
		name:   "never claimed",
		run:    store.Run{ID: "r"},
		events: []store.Event{ev(1, 10, flowtype.EventRunStarted, 0), ev(2, 20, flowtype.EventRunCancelled, 0)},
		want:   []string{"run_started/0/1", "run_cancelled/0/2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := DeriveLean(tc.run, tc.steps, slices.Clone(tc.events))
			var kinds []string
			for _, e := range got {
				kinds = append(kinds, fmt.Sprintf("%s/%d/%d", e.Kind, e.Attempt, e.ID))
			}
			if !slices.Equal(kinds, tc.want) {
				t.Errorf("DeriveLean =\n  %v\nwant\n  %v", kinds, tc.want)
			}
		})
	}
}
