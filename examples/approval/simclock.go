package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// simClock is the engine's clock in this simulation: a manual clock that
// the program moves, so that two days of waiting for managers pass in a
// second and every run sees the same simulated times on every machine.
//
// The clock is moved only when the engine is idle (no run in flight, none
// due), so a run never sees time jump in the middle of an execution, and no
// lease ever expires by a jump: the engine's default lease timeout is safe.
type simClock struct {
	*clock.Manual
	start time.Time
}

func newSimClock(start time.Time) *simClock {
	return &simClock{Manual: clock.NewManual(start), start: start}
}

// maxRuns bounds the runs one idle check reads.
const maxRuns = 10_000

// settlePoll is how often, in real time, the clock looks whether the engine
// went idle.
const settlePoll = 2 * time.Millisecond

// idle reads every run in one snapshot and reports whether the engine has
// nothing to do at the current time: no run in flight and none due. next is
// the earliest time an unfinished run is due, zero when none waits for a
// time.
func (c *simClock) idle(ctx context.Context, e *flow.Engine) (idle bool, next time.Time, err error) {
	runs, err := e.ListRuns(ctx, flow.RunFilter{Limit: maxRuns})
	if err != nil {
		return false, time.Time{}, err
	}
	if len(runs) == maxRuns {
		return false, time.Time{}, fmt.Errorf("more than %d runs: too many for the simulated clock", maxRuns-1)
	}
	now := c.Now()
	idle = true
	for _, r := range runs {
		switch r.Status {
		case flow.StatusCompleted, flow.StatusFailed, flow.StatusCancelled, flow.StatusSuspended:
			continue
		case flow.StatusRunning:
			idle = false
		}
		if !r.RunAt.After(now) {
			idle = false
		}
		// A run waiting for a signal without timeout is due at the end of
		// time; only earlier due times are worth jumping to.
		if r.RunAt.Year() < 3000 && (next.IsZero() || r.RunAt.Before(next)) {
			next = r.RunAt
		}
	}
	return idle, next, nil
}

// settle waits, in real time, until the engine is idle at the current
// simulated time, and returns the next due time (zero: none).
func (c *simClock) settle(ctx context.Context, e *flow.Engine) (time.Time, error) {
	for {
		idle, next, err := c.idle(ctx, e)
		if err != nil || idle {
			return next, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}

// advanceTo moves the clock to t the way real time would pass: it stops at
// every earlier due time (a retry's backoff, a signal's timeout) on the
// way, wakes the engine and lets it settle there, then goes on.
func (c *simClock) advanceTo(ctx context.Context, e *flow.Engine, t time.Time) error {
	for {
		next, err := c.settle(ctx, e)
		if err != nil {
			return err
		}
		stop := t
		if !next.IsZero() && next.Before(t) {
			stop = next
		}
		if stop.After(c.Now()) {
			c.Set(stop)
		}
		e.WakeAll()
		if !stop.Before(t) {
			_, err := c.settle(ctx, e)
			return err
		}
	}
}
