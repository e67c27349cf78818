package flow

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/flowlite/flowlite/internal/engine"
)

// WithValue returns a copy of ctx that carries the context value key =
// value, which Start, StartTx, Enqueue, EnqueueTx and the batch starts
// record with the run they start from ctx (go-workflows' context
// propagation, for a tenant, a trace ID, a request ID). The run carries
// its values into every execution of its code: the workflow body (wc),
// each step attempt and each compensation (their ctx), the interceptor,
// and its children, which inherit them. Read them with Value. They are
// read from the run's record, not from the process that executes it, so
// every replay and every retry on any engine sees the values the run was
// started with.
//
// A key follows the naming rules of MaxNameBytes; a bad key, or values
// whose JSON encoding is over Config.MaxPayloadBytes, fail the start,
// recording nothing. Values are shown in full by Inspect, flowlite show and
// the dashboard, so keep secrets out of them.
func WithValue(ctx context.Context, key, value string) context.Context {
	return engine.WithValues(ctx, map[string]string{key: value})
}

// WithValues is WithValue for several values at once.
func WithValues(ctx context.Context, kv map[string]string) context.Context {
	return engine.WithValues(ctx, kv)
}

// Value returns the context value key that ctx carries: inside a run, the
// value the run was started with (or one a step added with WithValue);
// outside, one WithValue put in ctx.
func Value(ctx context.Context, key string) (string, bool) {
	v, ok := engine.ValuesFrom(ctx)[key]
	return v, ok
}

// Values returns a copy of every context value ctx carries (see Value),
// or nil for none.
func Values(ctx context.Context) map[string]string {
	return maps.Clone(engine.ValuesFrom(ctx))
}

// recordedValues decodes a run's recorded context values; a record that
// does not decode reads as none, as it does for the run's code.
func recordedValues(b []byte) map[string]string {
	if len(b) == 0 {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
