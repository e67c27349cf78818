package engine

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Signal sends a signal to a run: the run receives it the next time it waits
// for that name, or at once if it already waits. A non-empty key makes the
// send idempotent: a second signal with the same key to the same run is
// ignored, and Signal reports false. Signalling an unknown run is
// flowtype.ErrRunNotFound; a finished one, flowtype.ErrRunFinished.
func (e *Engine) Signal(ctx context.Context, runID, name string, payload []byte, key string) (bool, error) {
	if err := CheckName("signal", name); err != nil {
		return false, fmt.Errorf("signal to run %s: %w", runID, err)
	}
	if err := e.CheckPayload("payload", payload); err != nil {
		return false, fmt.Errorf("signal %s to run %s: %w", name, runID, err)
	}
	var sent bool
	var queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, runID)
		if err != nil {
			return err
		}
		if run.Status.Finished() {
			return fmt.Errorf("%w: run is %s", flowtype.ErrRunFinished, run.Status) // the caller names the run
		}
		queue = run.Queue
		now := e.nowMs()
		if sent, err = tx.SignalSend(ctx, store.Signal{RunID: runID, Name: name, Payload: payload, Key: key, SentAt: now}); err != nil || !sent {
			return err
		}
		if _, err := tx.RunWake(ctx, runID, now); err != nil {
			return err
		}
		detail := "signal " + name
		if key != "" {
			detail += ", key " + key
		}
		return tx.EventAppend(ctx, store.Event{RunID: runID, At: now, Kind: flowtype.EventSignalSent, Detail: detail})
	})
	if err != nil {
		return false, fmt.Errorf("signal %s to run %s: %w", name, runID, err)
	}
	if sent {
		e.Wake(queue)
	}
	return sent, nil
}
