package flow

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Progress (River's job progress, BullMQ's updateProgress, Temporal's
// heartbeat details): a step body or a job's handler says how far it got,
// as often as it likes, and the dashboard, `flowlite progress` and a
// waiting client read the latest value. A call costs a lock and a copy:
// the engine writes the latest value of each attempt at most every 200ms
// (less often as a long attempt ages), for all its runs in one write, and
// the last one with the attempt's outcome, each as a step_progress event of
// the run's history. So the change feed, time travel and exported histories
// see progress, a replay ignores it (it is an effect of the step, not of
// the workflow body), and the history holds a sample, not every call.

// Progress is how far a step attempt got: Done of Total units (Total zero
// when unknown) and a Message for a person. See [flowtype.Progress].
type Progress = flowtype.Progress

// StepProgress is the latest progress of one step attempt, as recorded.
type StepProgress = flowtype.StepProgress

// EventStepProgress is the history event of a step attempt's progress;
// its Detail holds the Progress as JSON.
const EventStepProgress = flowtype.EventStepProgress

// ErrNotInStep is returned by SetProgress called outside a step body or a
// job's handler (a workflow body, a compensation, another goroutine's
// context), or after the attempt returned.
var ErrNotInStep = engine.ErrNotInStep

// MaxProgressMessage is the longest Progress.Message kept, in bytes; a
// longer one is cut at a character boundary.
const MaxProgressMessage = engine.MaxProgressMessage

// SetProgress records p as the latest progress of the step attempt ctx
// belongs to (a step body's or a job handler's context). It never waits for
// the database; readers see the value within a few hundred milliseconds,
// and the attempt's outcome records its last value. A negative Done or
// Total is refused.
func SetProgress(ctx context.Context, p Progress) error {
	return engine.SetProgress(ctx, p)
}

// SetPercent is SetProgress of pct percent (0 to 100, rounded to a whole
// percent) with a message.
func SetPercent(ctx context.Context, pct float64, message string) error {
	if math.IsNaN(pct) || pct < 0 || pct > 100 {
		return fmt.Errorf("set progress: percent %v is not within 0..100", pct)
	}
	return SetProgress(ctx, Progress{Done: int64(math.Round(pct)), Total: 100, Message: message})
}

// GetProgress returns the latest progress recorded of each step attempt of
// the run that reported any, in the order they first reported. An unknown
// run is ErrRunNotFound.
func GetProgress(ctx context.Context, e *Engine, runID string) ([]StepProgress, error) {
	_, ps, err := readProgress(ctx, e, runID)
	if err != nil {
		return nil, fmt.Errorf("get progress of run %s: %w", runID, err)
	}
	return ps, nil
}

// readProgress reads a run's status and progress from one snapshot.
func readProgress(ctx context.Context, e *Engine, runID string) (RunStatus, []StepProgress, error) {
	type read struct {
		run    store.Run
		events []store.Event
	}
	got, err := byRun(e, runID, func(inner *Engine) (read, error) {
		var g read
		err := inner.store.Read(ctx, func(r store.Reader) error {
			var err error
			if g.run, err = r.RunGet(ctx, runID); err != nil {
				return err
			}
			g.events, err = r.EventListKind(ctx, runID, flowtype.EventStepProgress)
			return err
		})
		return g, err
	})
	if err != nil {
		return "", nil, err
	}
	return got.run.Status, latestProgress(got.events), nil
}

// WatchProgress calls fn with the run's progress (as GetProgress returns
// it) now and whenever it changes, until the run finishes (fn then sees
// its last progress), fn returns an error (which it returns) or ctx ends.
// It reads at the engine's poll interval, on both backends: progress is
// written every 200ms at most, which a LISTEN would not hasten much.
func WatchProgress(ctx context.Context, e *Engine, runID string, fn func(RunStatus, []StepProgress) error) error {
	var last []StepProgress
	first := true
	for {
		status, now, err := readProgress(ctx, e, runID)
		if err != nil {
			return fmt.Errorf("watch progress of run %s: %w", runID, err)
		}
		if first || !slices.Equal(now, last) || status.Finished() {
			if err := fn(status, now); err != nil {
				return err
			}
			first, last = false, now
		}
		if status.Finished() {
			return nil
		}
		timer := time.NewTimer(e.core.Config().PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("watch progress of run %s: %w", runID, ctx.Err())
		case <-timer.C:
		}
	}
}

// latestProgress folds step_progress events into the latest value of each
// attempt, in the order the attempts first reported. An event whose detail
// does not decode is skipped: progress is for people, and one bad sample
// must not hide the run.
func latestProgress(events []store.Event) []StepProgress {
	var out []StepProgress
	at := map[[3]any]int{}
	for _, ev := range events {
		if ev.Kind != flowtype.EventStepProgress {
			continue
		}
		p, err := flowtype.DecodeProgress(ev.Detail)
		if err != nil {
			continue
		}
		sp := StepProgress{Step: ev.Step, Occurrence: ev.Occurrence, Attempt: ev.Attempt, Progress: p, At: millis(ev.At)}
		k := [3]any{ev.Step, ev.Occurrence, ev.Attempt}
		if i, ok := at[k]; ok {
			out[i] = sp
			continue
		}
		at[k] = len(out)
		out = append(out, sp)
	}
	return out
}

// attachProgress sets the Progress of each step of info to the latest of
// its current attempt in progress (an earlier attempt's does not carry
// over to a retry).
func attachProgress(info *RunInfo, progress []StepProgress) {
	for i := range info.Steps {
		st := &info.Steps[i]
		for j := range progress {
			p := &progress[j]
			if p.Step == st.Name && p.Occurrence == st.Occurrence && p.Attempt == st.Attempts {
				v := p.Progress
				st.Progress = &v
			}
		}
	}
}
