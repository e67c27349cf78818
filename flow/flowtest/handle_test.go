package flowtest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// typedRun wraps a run as flowdefgen's generated handles do: its Result
// turns the stored output into a typed value.
type typedRun struct{ *flow.Run[string] }

func (r typedRun) Result(ctx context.Context) (int, error) {
	s, err := r.Run.Result(ctx)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}

// TestAwaitTakesAWrappingHandle: Await takes any handle with an ID and a
// typed Result, such as a generated run handle, moving the clock as it
// does for a *flow.Run, and returns the handle's typed result (issue 22,
// item 4).
func TestAwaitTakesAWrappingHandle(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	wf := flow.Workflow[int, string]{Name: "itoa_later", Run: func(wc flow.Context, n int) (string, error) {
		if err := flow.Sleep(wc, time.Hour); err != nil {
			return "", err
		}
		return strconv.Itoa(n), nil
	}}
	run := flowtest.Start(env, wf, 42, nil)
	got, err := flowtest.Await(env, typedRun{run})
	if err != nil || got != 42 {
		t.Fatalf("Await = %d, %v; want 42", got, err)
	}
}
