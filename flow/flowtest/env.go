package flowtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
)

// TB is the part of testing.TB that flowtest uses. *testing.T, *testing.B,
// *testing.F and testing.TB satisfy it.
type TB interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Defaults New applies to the zero fields of the caller's flow.Config.
const (
	// DefaultPollInterval is the engine's poll interval in an Env.
	DefaultPollInterval = 10 * time.Millisecond
	// DefaultLeaseTimeout is the engine's lease timeout in an Env: long, so
	// that moving the clock never makes a run in flight look abandoned. Set
	// Config.LeaseTimeout and call Engine.Rescue to test lease expiry.
	DefaultLeaseTimeout = 100_000 * time.Hour
	// DefaultWaitLimit is how long, in real time, Await waits for a run to
	// settle before it fails the test.
	DefaultWaitLimit = 30 * time.Second
)

// opTimeout bounds, in real time, each call the Env makes to the engine.
const opTimeout = 10 * time.Second

// Env is a started flow.Engine on a fresh database (see BackendEnv), with a manual clock,
// failure injection and a record of attempts. Create it with New.
type Env struct {
	// Engine is the engine under test, already started. Use it directly for
	// what the Env does not wrap: Cancel, Resume, Skip, ListRuns, ...
	Engine *flow.Engine
	// WaitLimit bounds, in real time, how long Await waits for a run to
	// settle before it fails the test. Zero means DefaultWaitLimit.
	WaitLimit time.Duration

	t     TB
	clock *clock.Manual

	mu           sync.Mutex
	faults       map[faultKey]*fault
	attempts     []Attempt
	registered   map[string]bool // "name@version" of workflows registered here
	queues       map[string]bool // the queues the engine works
	stepVersions map[string]int  // RunStep calls per step name
}

// New returns an Env for the test t. cfg may be nil; New copies it and
// overrides Clock with the Env's manual clock, wraps Intercept (the caller's
// interceptor still runs, inside the Env's), and defaults PollInterval to
// DefaultPollInterval and LeaseTimeout to DefaultLeaseTimeout. The engine
// is started on a SQLite file in t.TempDir(), opened with flowsqlite.Open
// and synchronous=NORMAL (a test has no power loss to survive), or, with
// FLOWLITE_TEST_BACKEND=postgres (see BackendEnv), in a fresh PostgreSQL
// schema; it is stopped and closed by t.Cleanup. The clock starts at
// 2025-01-01 00:00:00 UTC, or where WithInitialTime says.
func New(t TB, cfg *flow.Config, opts ...Option) *Env {
	t.Helper()
	o, bad := newOptions(opts)
	if bad != "" {
		t.Fatalf("flowtest: %s", bad)
		return nil
	}
	var c flow.Config
	if cfg != nil {
		c = *cfg
	}
	env := &Env{
		t:            t,
		clock:        clock.NewManual(o.start),
		faults:       make(map[faultKey]*fault),
		registered:   make(map[string]bool),
		stepVersions: make(map[string]int),
		queues:       map[string]bool{flow.DefaultQueue: len(c.Queues) == 0},
	}
	for q := range c.Queues {
		env.queues[q] = true
	}
	c.Clock = env.clock
	c.Intercept = env.interceptor(c.Intercept)
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.LeaseTimeout <= 0 {
		c.LeaseTimeout = DefaultLeaseTimeout
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	e, err := openEngine(ctx, t, &c)
	if err != nil {
		t.Fatalf("flowtest: open engine: %v", err)
		return nil
	}
	if err := e.Start(ctx); err != nil {
		_ = e.Close()
		t.Fatalf("flowtest: start engine: %v", err)
		return nil
	}
	env.Engine = e
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("flowtest: stop engine (a step ignored its context?): %v", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("flowtest: close engine: %v", err)
		}
	})
	return env
}

// Clock returns the Env's clock, e.g. to give the code under test the same
// time as the engine. Move it with Advance.
func (env *Env) Clock() flow.Clock { return env.clock }

// Now returns the time of the Env's clock.
func (env *Env) Now() time.Time { return env.clock.Now() }

// Advance moves the clock forward by d and wakes the engine, so that runs
// which became due are picked up at once.
func (env *Env) Advance(d time.Duration) {
	env.t.Helper()
	if d < 0 {
		env.t.Fatalf("flowtest: Advance(%s): the clock does not go back", d)
		return
	}
	env.clock.Advance(d)
	env.Engine.WakeAll()
}

// advanceTo moves the clock to t if t is later, and wakes the engine.
func (env *Env) advanceTo(t time.Time) {
	if t.After(env.clock.Now()) {
		env.clock.Set(t)
	}
	env.Engine.WakeAll()
}

// Inspect returns the run with its steps, or fails the test.
func (env *Env) Inspect(runID string) flow.RunInfo {
	env.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	info, err := env.Engine.Inspect(ctx, runID)
	if err != nil {
		env.t.Fatalf("flowtest: inspect run %s: %v", runID, err)
	}
	return info
}

// History returns the events of the run, oldest first, or fails the test.
func (env *Env) History(runID string) []flow.Event {
	env.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	events, err := env.Engine.History(ctx, runID)
	if err != nil {
		env.t.Fatalf("flowtest: history of run %s: %v", runID, err)
	}
	return events
}

// Compensated returns the names of the run's steps whose compensation
// completed, in the order the compensations ran (the reverse of the order
// the steps completed). Skipped compensations are not included; see
// Inspect's StepRecord.Compensation for those.
func (env *Env) Compensated(runID string) []string {
	env.t.Helper()
	var names []string
	for _, ev := range env.History(runID) {
		if ev.Kind == flow.EventCompensationCompleted {
			names = append(names, ev.Step)
		}
	}
	return names
}

// describe summarizes a run for a failure message.
func (env *Env) describe(runID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	info, err := env.Engine.Inspect(ctx, runID)
	if err != nil {
		return fmt.Sprintf("run %s: %v", runID, err)
	}
	var b strings.Builder
	due := info.RunAt.UTC().Format(time.RFC3339Nano)
	if info.RunAt.Year() >= neverYear {
		due = "no time: it waits for an event"
	}
	fmt.Fprintf(&b, "run %s of %s v%d is %s (run at %s, clock at %s)",
		info.ID, info.Workflow, info.Version, info.Status, due, env.Now().UTC().Format(time.RFC3339Nano))
	if info.Error != "" {
		fmt.Fprintf(&b, "\n  error: %s", info.Error)
	}
	if info.Reason != "" {
		fmt.Fprintf(&b, "\n  reason: %s", info.Reason)
	}
	for _, s := range info.Steps {
		fmt.Fprintf(&b, "\n  step %s#%d: %s after %d attempt(s)", s.Name, s.Occurrence, s.Status, s.Attempts)
		if s.Error != "" {
			fmt.Fprintf(&b, ", error %q", s.Error)
		}
		if s.Compensation != "none" && s.Compensation != "" {
			fmt.Fprintf(&b, "; compensation %s after %d attempt(s)", s.Compensation, s.CompensationAttempts)
		}
	}
	if events, err := env.Engine.History(ctx, runID); err == nil {
		const last = 10
		if len(events) > last {
			events = events[len(events)-last:]
		}
		b.WriteString("\n  last events:")
		for _, ev := range events {
			fmt.Fprintf(&b, "\n    %s %s", ev.Kind, ev.Step)
			if ev.Detail != "" {
				fmt.Fprintf(&b, ": %s", ev.Detail)
			}
		}
	}
	return b.String()
}
