package flowtest

import (
	"context"

	"github.com/flowlite/flowlite/flow"
)

// Stream returns the values of the run's stream name committed so far,
// in position order (flow.StreamMessages), or fails the test. Await the
// run first to read all it wrote.
func Stream[T any](env *Env, runID, name string) []T {
	env.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	msgs, err := flow.StreamMessages[T](ctx, env.Engine, runID, name, 0)
	if err != nil {
		env.t.Fatalf("flowtest: read stream %q of run %s: %v", name, runID, err)
	}
	out := make([]T, len(msgs))
	for i, m := range msgs {
		out[i] = m.Value
	}
	return out
}
