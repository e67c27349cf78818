package flow_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// A branch whose attempt fails after a sibling branch parked the run (for
// its own retry) must still have that failure recorded: the attempt ran and
// failed, so it gets its step_retried event, its error and its backoff, like
// any failed attempt, instead of silently using up an attempt.
func TestAllRecordsFailureAfterSiblingParked(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var firstCalls, secondCalls atomic.Int32
	parked := make(chan struct{})
	var parkOnce sync.Once
	retry := &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: -1}
	first := flow.Step[int, int]{Name: "first", Retry: retry, Run: func(context.Context, int) (int, error) {
		if firstCalls.Add(1) == 1 {
			return 0, errors.New("first fails once")
		}
		return 1, nil
	}}
	second := flow.Step[int, int]{Name: "second", Retry: retry, Run: func(ctx context.Context, _ int) (int, error) {
		if secondCalls.Add(1) > 1 {
			return 2, nil
		}
		select { // fail only once the first branch has parked the run
		case <-parked:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return 0, errors.New("second fails once")
	}}
	wf := flow.Workflow[int, int]{Name: "all-retry", Run: func(wc flow.Context, _ int) (int, error) {
		_, err := flow.All(wc,
			func(wc flow.Context) (int, error) {
				n, err := flow.Do(wc, first, 0)
				if err != nil {
					parkOnce.Do(func() { close(parked) })
				}
				return n, err
			},
			func(wc flow.Context) (int, error) { return flow.Do(wc, second, 0) },
		)
		return 0, err
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatalf("result: %v", err)
	}

	events, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var retried []string
	for _, ev := range events {
		if ev.Kind == flow.EventStepRetried {
			retried = append(retried, ev.Step+": "+ev.Detail)
		}
	}
	if len(retried) != 2 {
		t.Errorf("step_retried events %q, want one per branch", retried)
	}
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Steps {
		if s.Status != "completed" || s.Attempts != 2 {
			t.Errorf("step %s: %s after %d attempts, want completed after 2", s.Name, s.Status, s.Attempts)
		}
	}
	if n := secondCalls.Load(); n != 2 {
		t.Errorf("second ran %d times, want 2", n)
	}
}
