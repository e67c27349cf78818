package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// simClock is the engine's clock in this simulation. It stands still while
// the engine has work to do now, and jumps to the next due time (a retry's
// backoff, a boot wait, a soak timer) once nothing is left to do, so hours
// of rollout pass in seconds and every run sees the same simulated times on
// every machine.
//
// Leases are safe with the engine's default lease timeout: the clock moves
// only when no run is in flight, so no lease ever expires by a jump.
type simClock struct {
	*clock.Manual
	start time.Time
}

func newSimClock(start time.Time) *simClock {
	return &simClock{Manual: clock.NewManual(start), start: start}
}

// since returns the simulated time elapsed since the clock started.
func (c *simClock) since(t time.Time) time.Duration { return t.Sub(c.start) }

// maxRuns bounds the runs one idle check reads; the simulation starts far
// fewer (a rollout and its batches).
const maxRuns = 10_000

// settlePoll is how often, in real time, the clock looks whether the engine
// went idle.
const settlePoll = 5 * time.Millisecond

// errStuck reports runs that wait for something no time can bring, such as
// a signal nobody sends.
var errStuck = errors.New("runs wait, but for no time: nothing can move them")

// idle reads every run in one snapshot and reports whether the engine has
// nothing to do at the current time: no run in flight and none due. next is
// the earliest time an unfinished run is due, zero when none waits for a
// time, and active how many runs are unfinished.
func (c *simClock) idle(ctx context.Context, e *flow.Engine) (idle bool, next time.Time, active int, err error) {
	// A run in flight means busy; this cheap look spares the full snapshot
	// below most of the time.
	running, err := e.ListRuns(ctx, flow.RunFilter{Status: flow.StatusRunning, Limit: 1})
	if err != nil || len(running) > 0 {
		return false, time.Time{}, len(running), err
	}
	runs, err := e.ListRuns(ctx, flow.RunFilter{Limit: maxRuns})
	if err != nil {
		return false, time.Time{}, 0, err
	}
	if len(runs) == maxRuns {
		return false, time.Time{}, 0, fmt.Errorf("more than %d runs: too many for the simulated clock", maxRuns-1)
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
		active++
		if !r.RunAt.After(now) {
			idle = false
		}
		// A run waiting for a signal or a child without timeout is due at
		// the end of time; only earlier due times are worth jumping to.
		if r.RunAt.Year() < 3000 && (next.IsZero() || r.RunAt.Before(next)) {
			next = r.RunAt
		}
	}
	return idle, next, active, nil
}

// settle waits, in real time, until the engine is idle at the current
// simulated time, and returns the next due time (zero: none) and how many
// runs are unfinished.
func (c *simClock) settle(ctx context.Context, e *flow.Engine) (next time.Time, active int, err error) {
	for {
		idle, next, active, err := c.idle(ctx, e)
		if err != nil || idle {
			return next, active, err
		}
		select {
		case <-ctx.Done():
			return time.Time{}, 0, ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}

// jump moves the clock to t and tells the engine to look for due runs.
func (c *simClock) jump(e *flow.Engine, t time.Time) {
	if t.After(c.Now()) {
		c.Set(t)
	}
	e.WakeAll()
}

// drive runs the simulation until no run is left unfinished, or until the
// clock reaches until if it is not zero: it lets the engine settle, then
// jumps to the next due time, again and again. It returns errStuck if runs
// wait for something no time brings.
func (c *simClock) drive(ctx context.Context, e *flow.Engine, until time.Time) error {
	for {
		next, active, err := c.settle(ctx, e)
		switch {
		case err != nil:
			return err
		case active == 0:
			return nil
		case !until.IsZero() && (next.IsZero() || !next.Before(until)):
			c.jump(e, until)
			_, _, err := c.settle(ctx, e)
			return err
		case next.IsZero():
			return fmt.Errorf("%d run(s) at %s: %w", active, c.Now().UTC().Format(time.RFC3339), errStuck)
		}
		c.jump(e, next)
	}
}
