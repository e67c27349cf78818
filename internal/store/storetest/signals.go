package storetest

import (
	"context"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func signalTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SignalRejectAndStepReopen", testSignalRejectAndStepReopen},
	}
}

// A receive recorded with a payload the run cannot decode is set aside:
// its signal is relabelled rejected and the wait reopened, keeping its input
// and position, so the run waits for the next signal.
func testSignalRejectAndStepReopen(t *testing.T, s store.Store) {
	ctx := t.Context()
	insert(t, s, newRun("r1"))
	key := store.StepKey{RunID: "r1", Name: "flow.receive:go", Occurrence: 0}
	var first int64
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.StepWait(ctx, store.StepBeginParams{Key: key, Input: []byte(`{"signal":"go"}`), Position: 3, Now: base}); err != nil {
			return err
		}
		for _, p := range []string{`"bad"`, `1`} {
			if _, err := tx.SignalSend(ctx, store.Signal{RunID: "r1", Name: "go", Payload: []byte(p), SentAt: base}); err != nil {
				return err
			}
		}
		sig, err := tx.SignalNext(ctx, "r1", "go")
		if err != nil {
			return err
		}
		first = sig.ID
		if err := tx.SignalConsume(ctx, sig.ID, key.String()); err != nil {
			return err
		}
		return tx.StepComplete(ctx, store.StepCompleteParams{Key: key, Output: []byte(`{"payload":"bad"}`), Now: base + 1})
	})

	do(t, s, func(ctx context.Context, tx store.Tx) error {
		ids, err := tx.SignalReject(ctx, "r1", key.String(), "rejected by "+key.String())
		if err != nil {
			return err
		}
		if len(ids) != 1 || ids[0] != first {
			t.Errorf("SignalReject marked %v, want [%d]", ids, first)
		}
		return tx.StepReopen(ctx, key)
	})
	got := step(t, s, key)
	if got.Status != store.StepWaiting || got.Output != nil || string(got.Input) != `{"signal":"go"}` || got.Position != 3 {
		t.Errorf("reopened step = %+v; want waiting, no output, input and position kept", got)
	}
	signals, err := s.Reader().SignalList(ctx, "r1")
	if err != nil || len(signals) != 2 || signals[0].ConsumedBy != "rejected by "+key.String() || signals[1].ConsumedBy != "" {
		t.Fatalf("signals = %+v, %v; want the first rejected, the second pending", signals, err)
	}
	// Only a completed record reopens; nothing else is relabelled.
	expectErr(t, s, flowtype.ErrConflict, "reopen a waiting step", func(ctx context.Context, tx store.Tx) error { return tx.StepReopen(ctx, key) })
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		ids, err := tx.SignalReject(ctx, "r1", key.String(), "rejected by "+key.String())
		if len(ids) != 0 {
			t.Errorf("second SignalReject marked %v", ids)
		}
		return err
	})
}
