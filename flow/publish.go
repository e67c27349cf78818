package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/store"
)

// Published values (DBOS SetEvent/GetEvent, Temporal queries): a workflow
// body publishes a value under a key, and a client reads it, or waits for
// it, without a signal round trip. A publication is recorded as a step,
// named PublishStepPrefix+key, whose input and output are the value: it
// commits with the run's checkpoint, a replay reads it back rather than
// publishing again, and the history, the change feed, time travel,
// flowtest.ReplayFile, `flowlite show` and the dashboard's run page show
// it as they show any step. A key published twice holds the later value.

// PublishStepPrefix starts the name of the step that records a published
// value; the key follows it.
const PublishStepPrefix = "flow.publish."

// ErrNotPublished is returned by GetPublished for a key the run has not
// published, and by WaitPublished when the run ended without publishing it.
var ErrNotPublished = errors.New("value not published")

// Publish records value under key for clients of the run (GetPublished,
// WaitPublished). The key follows the rules of names, as a step's name
// does.
func Publish[T any](wc Context, key string, value T) error {
	if key == "" {
		// Recorded, it would be a step no reader finds.
		return fmt.Errorf("run %s: publish: empty key", wc.RunID())
	}
	s := Step[T, T]{
		Name: PublishStepPrefix + key,
		Run:  func(_ context.Context, v T) (T, error) { return v, nil },
	}
	if _, err := Do(wc, s, value); err != nil {
		return fmt.Errorf("publish %q: %w", key, err)
	}
	return nil
}

// GetPublished returns the latest value the run published under key, or
// ErrNotPublished when it has published none (yet).
func GetPublished[T any](ctx context.Context, e *Engine, runID, key string) (T, error) {
	var zero T
	info, err := e.Inspect(ctx, runID)
	if err != nil {
		return zero, fmt.Errorf("get published %q of run %s: %w", key, runID, err)
	}
	v, ok, err := published[T](info, key)
	if err != nil {
		return zero, err
	}
	if !ok {
		return zero, fmt.Errorf("get published %q of run %s: %w", key, runID, ErrNotPublished)
	}
	return v, nil
}

// WaitPublished waits until the run has published a value under key and
// returns it. It looks again as soon as a write of this process commits
// history (a publication is a step, whose completion is an event) and, on
// PostgreSQL, of any process (LISTEN/NOTIFY on the change feed's
// channel); otherwise at the engine's poll interval. A run that ends
// (completed, failed, cancelled) without publishing the key ends the wait
// with ErrNotPublished, a suspended run keeps it waiting.
func WaitPublished[T any](ctx context.Context, e *Engine, runID, key string) (T, error) {
	var zero T
	var notify store.FeedNotifier
	if inner, err := runEngine(ctx, e, runID); err == nil {
		notify, _ = inner.store.(store.FeedNotifier)
	}
	for {
		var woke <-chan struct{}
		if notify != nil {
			woke = notify.FeedCommitted() // before the read: a commit after it wakes the wait
		}
		info, err := e.Inspect(ctx, runID)
		if err != nil {
			return zero, fmt.Errorf("wait for published %q of run %s: %w", key, runID, err)
		}
		v, ok, err := published[T](info, key)
		if err != nil || ok {
			return v, err
		}
		if info.Status.Finished() {
			return zero, fmt.Errorf("wait for published %q of run %s: run %s: %w", key, runID, info.Status, ErrNotPublished)
		}
		timer := time.NewTimer(e.core.Config().PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return zero, fmt.Errorf("wait for published %q of run %s: %w", key, runID, ctx.Err())
		case <-woke:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// Published returns the values info's run has published, latest per key,
// as recorded (JSON), keyed by key.
func Published(info RunInfo) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	occ := map[string]int{}
	for _, st := range info.Steps {
		key, ok := strings.CutPrefix(st.Name, PublishStepPrefix)
		if !ok || key == "" || st.Status != "completed" {
			continue
		}
		if prev, seen := occ[key]; seen && prev > st.Occurrence {
			continue
		}
		out[key], occ[key] = st.Output, st.Occurrence
	}
	return out
}

// published decodes the latest value info's run published under key.
func published[T any](info RunInfo, key string) (T, bool, error) {
	var zero T
	raw, ok := Published(info)[key]
	if !ok {
		return zero, false, nil
	}
	v, err := codec.Decode[T](raw)
	if err != nil {
		return zero, true, &DecodeError{RunID: info.ID, Step: PublishStepPrefix + key, What: "published value", Type: codec.TypeName[T](), Err: err}
	}
	return v, true, nil
}
