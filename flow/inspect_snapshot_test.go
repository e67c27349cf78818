package flow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// Inspect reads a run and its steps from one snapshot. A run
// whose only step fails its first attempt goes, in committed states, from
// pending and due now with no step, to running with the step begun, to
// pending and due in ten minutes with the step retrying. Reading the run
// and then its steps apart could join the first state with the last: a
// run pending and due now whose step already failed (23 of 300 tries at
// dedb742). Readers spin on each run while it moves through its states
// and check that what they see is one of those states.
func TestInspectIsOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(epoch)
	path := dbPath(t)
	e := openEngine(t, path, manualConfig(clk))
	// Runs are started through an engine that is not started, so that
	// they are committed pending and claimed apart (a started engine with
	// a free slot claims a run in the transaction that starts it).
	starter := openEngine(t, path, manualConfig(clk))
	backoff := 10 * time.Minute
	failOnce := flow.Step[int, int]{
		Name:  "fail-once",
		Retry: &flow.RetryPolicy{MaxAttempts: 2, InitialInterval: backoff, MaxInterval: backoff, Jitter: -1},
		Run: func(context.Context, int) (int, error) {
			return 0, errors.New("not yet")
		},
	}
	wf := flow.Workflow[int, int]{Name: "retry-later", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, failOnce, n)
	}}
	flow.Register(e, wf)
	flow.Register(starter, wf)
	startEngine(t, e)

	// consistent says why info is no state the run was in, or "".
	consistent := func(info flow.RunInfo) string {
		switch {
		case info.Status == flow.StatusPending && !info.RunAt.After(epoch):
			if len(info.Steps) > 0 {
				return fmt.Sprintf("pending and due now, with step %s (%s, %d attempt(s))", info.Steps[0].Name, info.Steps[0].Status, info.Steps[0].Attempts)
			}
		case info.Status == flow.StatusPending:
			if !info.RunAt.Equal(epoch.Add(backoff)) || len(info.Steps) != 1 || info.Steps[0].Status != "retrying" {
				return fmt.Sprintf("pending, due at +%s, with %d step(s)", info.RunAt.Sub(epoch), len(info.Steps))
			}
		case info.Status != flow.StatusRunning:
			return "in state " + string(info.Status)
		}
		return ""
	}
	settled := func(info flow.RunInfo) bool {
		return info.Status == flow.StatusPending && info.RunAt.After(epoch)
	}
	for i := range 5 {
		run, err := flow.Start(ctx, starter, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		var g errgroup.Group
		for range 2 {
			g.Go(func() error {
				for {
					info, err := e.Inspect(ctx, run.ID())
					if err != nil {
						return err
					}
					if why := consistent(info); why != "" {
						return fmt.Errorf("run %d: Inspect shows the run %s", i, why)
					}
					if settled(info) {
						return nil
					}
				}
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}
