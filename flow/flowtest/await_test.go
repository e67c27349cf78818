package flowtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// Await of a run that is due now returns with the clock where that run
// completed, although another run is due a minute later: the engine is
// idle once the awaited run is done, and Await used to move the clock on
// to the other run before it saw the result. Awaiting the later run then
// moves the clock exactly to its due time. Each round races the awaited
// run's completion against Await's look for a due time, so it repeats.
func TestAwaitStopsTheClockWhenTheRunIsDone(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	stamp := flow.Step[int, time.Time]{Name: "stamp", Run: func(context.Context, int) (time.Time, error) {
		return env.Now(), nil
	}}
	wf := flow.Workflow[int, time.Time]{Name: "stamp", Run: func(wc flow.Context, n int) (time.Time, error) {
		return flow.Do(wc, stamp, n)
	}}
	for i := range 10 {
		start := env.Now()
		later := flowtest.Start(env, wf, i, &flow.StartOptions{Delay: time.Minute})
		now := flowtest.Start(env, wf, i, nil)
		at, err := flowtest.Await(env, now)
		if err != nil {
			t.Fatalf("round %d: Await of the run due now: %v", i, err)
		}
		if !at.Equal(start) || !env.Now().Equal(start) {
			t.Fatalf("round %d: the run due now ran at +%s and Await returned at +%s; want both at +0s, the clock not moved",
				i, at.Sub(start), env.Now().Sub(start))
		}
		at, err = flowtest.Await(env, later)
		if err != nil {
			t.Fatalf("round %d: Await of the run due in a minute: %v", i, err)
		}
		if at.Sub(start) != time.Minute || env.Now().Sub(start) != time.Minute {
			t.Fatalf("round %d: the run due in a minute ran at +%s and Await returned at +%s; want both at +1m",
				i, at.Sub(start), env.Now().Sub(start))
		}
	}
}
