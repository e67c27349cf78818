// Package flowsim runs an engine on simulated time: days of timers, retry
// backoffs and deadlines pass in moments, and every run sees the same times
// on every machine. Demos, examples and long-horizon tests use it; a test of
// a single workflow is simpler with flow/flowtest.
//
// A Clock stands still while the engine has work due now, and moves only
// when the engine is idle (no run in flight, none due), to the next time a
// run is due. So a run never sees time jump in the middle of an execution,
// and no lease expires by a jump: the engine's default lease timeout is
// safe.
//
//	clk := flowsim.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	e, _ := flowsqlite.Open(ctx, path, &flow.Config{Clock: clk}, nil)
//	// register, start the engine, start runs…
//	err := clk.Run(ctx, e) // until every run finished
//
// The clock learns what is due by reading the engine's runs (ListRuns), so
// it suits simulations of up to MaxRuns runs.
package flowsim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// MaxRuns bounds the runs a Clock reads to find the next due time.
const MaxRuns = 10_000

// settlePoll is how often, in real time, a Clock looks whether the engine
// went idle.
const settlePoll = 2 * time.Millisecond

// ErrStuck reports runs that wait, but for no time: for a signal nobody
// sends, say. No jump of the clock can move them.
var ErrStuck = errors.New("runs wait, but for no time: nothing can move them")

// Clock is a simulated clock; it implements flow.Clock. Its methods are
// safe for concurrent use.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	start time.Time
}

// New returns a clock stopped at start.
func New(start time.Time) *Clock { return &Clock{now: start, start: start} }

// Now returns the simulated time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Elapsed returns the simulated time passed since the clock started.
func (c *Clock) Elapsed() time.Duration { return c.Now().Sub(c.start) }

// set moves the clock forward to t; it never goes back.
func (c *Clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// Run lets the engine work and moves the clock to each next due time until
// no run is unfinished. Runs that wait for no time (a signal nobody sends)
// make it return an error wrapping ErrStuck.
func (c *Clock) Run(ctx context.Context, e *flow.Engine) error {
	for {
		next, active, err := c.Settle(ctx, e)
		switch {
		case err != nil:
			return err
		case active == 0:
			return nil
		case next.IsZero():
			return fmt.Errorf("%d run(s) at %s: %w", active, c.Now().UTC().Format(time.RFC3339), ErrStuck)
		}
		c.jump(e, next)
	}
}

// AdvanceTo moves the clock to t the way real time would pass: it stops at
// every earlier due time on the way (a retry's backoff, a timer, a
// timeout), lets the engine settle there, then goes on. It returns once the
// engine settled at t.
func (c *Clock) AdvanceTo(ctx context.Context, e *flow.Engine, t time.Time) error {
	for {
		next, _, err := c.Settle(ctx, e)
		if err != nil {
			return err
		}
		stop := t
		if !next.IsZero() && next.Before(t) {
			stop = next
		}
		c.jump(e, stop)
		if !stop.Before(t) {
			_, _, err := c.Settle(ctx, e)
			return err
		}
	}
}

// Settle waits, in real time, until the engine is idle at the current
// simulated time, and returns the next time a run is due (zero: none waits
// for a time) and how many runs are unfinished.
func (c *Clock) Settle(ctx context.Context, e *flow.Engine) (next time.Time, active int, err error) {
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
func (c *Clock) jump(e *flow.Engine, t time.Time) {
	c.set(t)
	e.WakeAll()
}

// idle reads the runs and reports whether the engine has nothing to do at
// the current time: no run in flight and none due.
func (c *Clock) idle(ctx context.Context, e *flow.Engine) (idle bool, next time.Time, active int, err error) {
	// A run in flight means busy; this cheap look spares the full read
	// below most of the time.
	running, err := e.ListRuns(ctx, flow.RunFilter{Status: flow.StatusRunning, Limit: 1})
	if err != nil || len(running) > 0 {
		return false, time.Time{}, len(running), err
	}
	runs, err := e.ListRuns(ctx, flow.RunFilter{Limit: MaxRuns + 1})
	if err != nil {
		return false, time.Time{}, 0, err
	}
	if len(runs) > MaxRuns {
		return false, time.Time{}, 0, fmt.Errorf("flowsim: more than %d runs: too many for a simulated clock", MaxRuns)
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
