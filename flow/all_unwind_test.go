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

// Cancelling a run whose flow.All has one branch waiting on a timer and
// another with completed compensable steps must compensate all of those
// steps, whichever branch the execution that unwinds reaches first.
func TestAllCancelWhileBranchWaitsCompensatesSiblings(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		ctx := waitCtx(t)
		e := openEngine(t, dbPath(t), nil)
		var undone atomic.Int32
		reserved := make(chan struct{})
		var once sync.Once
		reserve := flow.Step[int, int]{
			Name:       "reserve",
			Run:        func(_ context.Context, n int) (int, error) { return n, nil },
			Compensate: func(context.Context, int, int) error { undone.Add(1); return nil },
		}
		hold := flow.Step[int, int]{Name: "hold", Run: func(ctx context.Context, n int) (int, error) {
			select {
			case <-reserved:
				return n, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}}
		wf := flow.Workflow[int, int]{Name: "all-cancel", Run: func(wc flow.Context, _ int) (int, error) {
			_, err := flow.All(wc,
				func(wc flow.Context) (int, error) {
					if _, err := flow.Do(wc, hold, 0); err != nil {
						return 0, err
					}
					return 0, flow.Sleep(wc, time.Hour)
				},
				func(wc flow.Context) (int, error) {
					for k := range 3 {
						if _, err := flow.Do(wc, reserve, k); err != nil {
							return 0, err
						}
					}
					once.Do(func() { close(reserved) })
					return 0, nil
				},
			)
			return 0, err
		}}
		flow.Register(e, wf)
		startEngine(t, e)
		run, err := flow.Start(ctx, e, wf, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the run waits", func() bool {
			info, err := e.Inspect(ctx, run.ID())
			return err == nil && info.Status == flow.StatusWaiting
		})
		if err := run.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = run.Result(ctx)
		if !errors.Is(err, flow.ErrCancelled) || undone.Load() != 3 {
			info, _ := e.Inspect(ctx, run.ID())
			t.Fatalf("try %d: result %v, %d of 3 compensations ran; reason %q", i, err, undone.Load(), info.Reason)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A branch waiting on a long timer does not hold its siblings back: they run
// all their steps in the same execution.
func TestAllWaitingBranchDoesNotStopSiblings(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var ran atomic.Int32
	step := flow.Step[int, int]{Name: "work", Run: func(_ context.Context, n int) (int, error) {
		ran.Add(1)
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "all-sibling", Run: func(wc flow.Context, _ int) (int, error) {
		_, err := flow.All(wc,
			func(wc flow.Context) (int, error) { return 0, flow.Sleep(wc, time.Hour) },
			func(wc flow.Context) (int, error) {
				for k := range 5 {
					if _, err := flow.Do(wc, step, k); err != nil {
						return 0, err
					}
				}
				return 0, nil
			},
		)
		return 0, err
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits for its timer", func() bool {
		info, err := e.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if n := ran.Load(); n != 5 {
		t.Errorf("the sibling ran %d of its 5 steps before the run waited", n)
	}
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("result %v, want cancelled", err)
	}
}

// Cancelling a run that waits after two flow.All calls compensates the steps
// of both: on the execution that unwinds, the first All returns its
// branches' recorded results rather than the cancellation, so the body
// replays on into the second, and the unwind learns every completed step.
func TestAllCancelAfterFanOutsCompensatesEveryBranch(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var undone atomic.Int32
	step := flow.Step[int, int]{
		Name:       "flash",
		Run:        func(_ context.Context, n int) (int, error) { return n, nil },
		Compensate: func(context.Context, int, int) error { undone.Add(1); return nil },
	}
	fanOut := func(wc flow.Context) error {
		branches := make([]func(flow.Context) (int, error), 4)
		for i := range branches {
			branches[i] = func(wc flow.Context) (int, error) { return flow.Do(wc, step, i) }
		}
		_, err := flow.All(wc, branches...)
		return err
	}
	wf := flow.Workflow[int, int]{Name: "fan-outs-then-wait", Run: func(wc flow.Context, _ int) (int, error) {
		for range 2 {
			if err := fanOut(wc); err != nil {
				return 0, err
			}
		}
		return 0, flow.Sleep(wc, time.Hour)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits", func() bool {
		info, err := e.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		info, _ := e.Inspect(ctx, run.ID())
		t.Fatalf("result %v, want cancelled; reason %q", err, info.Reason)
	}
	if n := undone.Load(); n != 8 {
		t.Errorf("%d of 8 compensations ran", n)
	}
}
