package flow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// A Cancel issued right after Enqueue meets the started engine's claim of
// the job: before it, during it or after it. Whichever it meets, the
// cancel succeeds and the run ends cancelled: cancelled at once while no
// worker held it, or through its context once a worker did, at once,
// also when the claim committed but its execution had not begun. On
// PostgreSQL a claim committed between Cancel's read of the run and its
// update used to fail the call with ErrConflict ("changed while being
// cancelled"), cancelling nothing; on both, a request made between the
// claim and the start of its execution waited for the next heartbeat. The
// race is won or lost each time, so it is run several times.
func TestCancelRacingAClaimCancelsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	// A request that reaches the run only through a heartbeat comes a
	// minute late, beyond the wait for each result below.
	cfg := testConfig()
	cfg.LeaseTimeout, cfg.HeartbeatInterval = 3*time.Minute, time.Minute
	e := openEngine(t, dbPath(t), cfg)
	job := flow.Job[int]{Name: "until-cancelled", MaxAttempts: 1, Handler: func(ctx context.Context, _ int) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	for i := range 20 {
		run, err := flow.Enqueue(ctx, e, job, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Cancel(ctx, run.ID()); err != nil {
			t.Fatalf("try %d: Cancel right after Enqueue: %v", i, err)
		}
		wait, cancel := context.WithTimeout(ctx, slowBound(5*time.Second))
		_, err = run.Result(wait)
		cancel()
		if !errors.Is(err, flow.ErrCancelled) {
			t.Fatalf("try %d: Result after Cancel = %v, want ErrCancelled at once", i, err)
		}
	}
}
