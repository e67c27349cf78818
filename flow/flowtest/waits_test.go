package flowtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// Every durable wait passes at once under Await: the clock moves to the
// next due time of anything in the Env whenever the engine is idle. Each
// case asserts the result, that the clock moved by the simulated duration
// (no less, so no wait was cut short), and that the test took a small
// fraction of WaitLimit in real time.

// quickEnv returns an Env whose Await fails after 5s of real time, far
// below the simulated waits of these tests.
func quickEnv(t *testing.T) *flowtest.Env {
	t.Helper()
	env := flowtest.New(t, nil)
	env.WaitLimit = 5 * time.Second
	return env
}

// checkClock fails the test unless the clock moved at least want since
// start, and the real time spent since realStart is far shorter.
func checkClock(t *testing.T, env *flowtest.Env, start time.Time, want time.Duration, realStart time.Time) {
	t.Helper()
	if moved := env.Now().Sub(start); moved < want {
		t.Errorf("clock moved %s, want at least %s", moved, want)
	}
	if took := time.Since(realStart); took > 3*time.Second {
		t.Errorf("took %s of real time for %s of simulated time", took, want)
	}
}

var echo = flow.Step[string, string]{Name: "echo", Run: func(_ context.Context, s string) (string, error) { return s, nil }}

func TestAwaitPassesASleep(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	wf := flow.Workflow[string, string]{Name: "sleeper", Run: func(wc flow.Context, s string) (string, error) {
		if err := flow.Sleep(wc, 72*time.Hour); err != nil {
			return "", err
		}
		return flow.Do(wc, echo, s)
	}}
	start, realStart := env.Now(), time.Now()
	out, _, err := flowtest.RunWorkflow(env, wf, "awake")
	if err != nil || out != "awake" {
		t.Fatalf("RunWorkflow = %q, %v", out, err)
	}
	checkClock(t, env, start, 72*time.Hour, realStart)
}

// The expense workflow of docs/workflows.md: a receive with a 48h timeout, then a
// one-hour cooling-off sleep.
type decision struct{ Approved bool }

func expenseWorkflow(paid *recorder) flow.Workflow[string, string] {
	pay := flow.Step[string, string]{Name: "pay", Run: func(_ context.Context, who string) (string, error) {
		paid.add(who)
		return "paid " + who, nil
	}}
	return flow.Workflow[string, string]{Name: "expense", Run: func(wc flow.Context, who string) (string, error) {
		d, err := flow.Receive[decision](wc, "decision", 48*time.Hour)
		if errors.Is(err, flow.ErrTimedOut) || (err == nil && !d.Approved) {
			return "not approved", nil
		}
		if err != nil {
			return "", err
		}
		if err := flow.Sleep(wc, time.Hour); err != nil {
			return "", err
		}
		return flow.Do(wc, pay, who)
	}}
}

func TestAwaitPassesAReceiveTimeout(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	var paid recorder
	start, realStart := env.Now(), time.Now()
	out, run, err := flowtest.RunWorkflow(env, expenseWorkflow(&paid), "ann")
	if err != nil || out != "not approved" {
		t.Fatalf("RunWorkflow = %q, %v; want the receive to time out", out, err)
	}
	checkClock(t, env, start, 48*time.Hour, realStart)
	if got := env.Now().Sub(start); got != 48*time.Hour {
		t.Errorf("clock moved %s, want exactly the timeout", got)
	}
	if len(paid.get()) != 0 {
		t.Errorf("paid %v after a timeout", paid.get())
	}
	var timedOut bool
	for _, ev := range env.History(run.ID()) {
		timedOut = timedOut || ev.Kind == flow.EventSignalTimedOut
	}
	if !timedOut {
		t.Error("history has no signal_timed_out event")
	}
}

// A signal sent before Await ends the receive; the sleep after it still
// passes at once.
func TestAwaitPassesTheSleepAfterAReceivedSignal(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	var paid recorder
	start, realStart := env.Now(), time.Now()
	run := flowtest.Start(env, expenseWorkflow(&paid), "bob", nil)
	if _, err := flow.Signal(ctxFor(t), env.Engine, run.ID(), "decision", decision{Approved: true}, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := flowtest.Await(env, run); err != nil || out != "paid bob" {
		t.Fatalf("Await = %q, %v", out, err)
	}
	checkClock(t, env, start, time.Hour, realStart)
	if moved := env.Now().Sub(start); moved >= 48*time.Hour {
		t.Errorf("clock moved %s: the receive timeout passed although the signal came first", moved)
	}
}

// A receive without timeout is not skipped: nothing ends it but a signal,
// so Await waits until WaitLimit and fails with the run's state.
func TestAwaitDoesNotSkipAReceiveWithoutTimeout(t *testing.T) {
	t.Parallel()
	ft := &fatalTB{TB: t}
	env := flowtest.New(ft, nil)
	env.WaitLimit = 200 * time.Millisecond
	wf := flow.Workflow[int, int]{Name: "patient", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Receive[int](wc, "go", 0)
	}}
	start := env.Now()
	run := flowtest.Start(env, wf, 0, nil)
	// The run reaches its receive first, so that the failure below can
	// only be Await's: on a loaded machine, getting there can take longer
	// than the 200ms WaitLimit.
	deadline := time.Now().Add(10 * time.Second)
	for env.Inspect(run.ID()).Status != flow.StatusWaiting {
		if time.Now().After(deadline) {
			t.Fatalf("run never waited: %+v", env.Inspect(run.ID()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	msg := ft.catch(func() { _, _ = flowtest.Await(env, run) })
	for _, want := range []string{"did not settle within 200ms", "waiting", "waits for an event"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message lacks %q:\n%s", want, msg)
		}
	}
	if env.Now() != start {
		t.Errorf("clock moved to %s for a wait no time ends", env.Now())
	}
	if _, err := flow.Signal(ctxFor(t), env.Engine, run.ID(), "go", 7, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctxFor(t)); err != nil || out != 7 {
		t.Fatalf("Result after the signal = %d, %v", out, err)
	}
}

// A run's deadline passes while it sleeps: it is cancelled and its
// completed step compensated, at the deadline, not at the end of the sleep.
func TestAwaitPassesADeadline(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	var undone recorder
	book := flow.Step[string, string]{
		Name:       "book",
		Run:        func(_ context.Context, s string) (string, error) { return s, nil },
		Compensate: func(_ context.Context, s, _ string) error { undone.add(s); return nil },
	}
	wf := flow.Workflow[string, string]{Name: "late", Run: func(wc flow.Context, s string) (string, error) {
		if _, err := flow.Do(wc, book, s); err != nil {
			return "", err
		}
		if err := flow.Sleep(wc, 24*time.Hour); err != nil {
			return "", err
		}
		return "too late", nil
	}}
	start, realStart := env.Now(), time.Now()
	run := flowtest.Start(env, wf, "room", &flow.StartOptions{Deadline: start.Add(2 * time.Hour)})
	_, err := flowtest.Await(env, run)
	if !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("Await err = %v, want cancelled by its deadline", err)
	}
	checkClock(t, env, start, 2*time.Hour, realStart)
	if moved := env.Now().Sub(start); moved >= 24*time.Hour {
		t.Errorf("clock moved %s: the run was cancelled at the end of its sleep, not at its deadline", moved)
	}
	if got := env.Compensated(run.ID()); len(got) != 1 || got[0] != "book" {
		t.Errorf("compensated %v, want [book]", got)
	}
}

// A cron slot comes due: AwaitSlot moves the clock to it and returns the
// scheduled run's result.
func TestAwaitSlotPassesACronSlot(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	wf := flow.Workflow[string, string]{Name: "nightly", Run: func(wc flow.Context, s string) (string, error) {
		return flow.Do(wc, echo, s)
	}}
	flowtest.Register(env, wf)
	start, realStart := env.Now(), time.Now()
	if err := flow.Schedule(ctxFor(t), env.Engine, "report", "0 3 * * *", wf, "report", nil); err != nil {
		t.Fatal(err)
	}
	slot := time.Date(2025, 1, 1, 3, 0, 0, 0, time.UTC) // the clock starts at midnight
	out, err := flowtest.AwaitSlot(env, wf, "report", slot)
	if err != nil || out != "report" {
		t.Fatalf("AwaitSlot = %q, %v", out, err)
	}
	checkClock(t, env, start, 3*time.Hour, realStart)

	// The next day's slot too.
	if out, err := flowtest.AwaitSlot(env, wf, "report", slot.Add(24*time.Hour)); err != nil || out != "report" {
		t.Fatalf("AwaitSlot of the second day = %q, %v", out, err)
	}
	checkClock(t, env, start, 27*time.Hour, realStart)
}

// A run waiting for something else than its own due time (here a signal
// without timeout) is released by a cron-started run: Await moves the
// clock to the schedule's slot although the awaited run has no due time.
func TestAwaitMovesTheClockToAScheduleSlot(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	waiter := flow.Workflow[int, string]{Name: "waiter", Run: func(wc flow.Context, _ int) (string, error) {
		return flow.Receive[string](wc, "tick", 0)
	}}
	waiterRun := flowtest.Start(env, waiter, 0, &flow.StartOptions{RunID: "waiter"})
	ticker := flow.Workflow[string, struct{}]{Name: "ticker", Run: func(wc flow.Context, s string) (struct{}, error) {
		return struct{}{}, flow.SignalRun(wc, "waiter", "tick", s)
	}}
	flowtest.Register(env, ticker)
	start, realStart := env.Now(), time.Now()
	if err := flow.Schedule(ctxFor(t), env.Engine, "tick", "@every 6h", ticker, "tock", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := flowtest.Await(env, waiterRun); err != nil || out != "tock" {
		t.Fatalf("Await = %q, %v", out, err)
	}
	checkClock(t, env, start, 6*time.Hour, realStart)
}

// A parent awaits a child whose own body sleeps, then retries a step with a
// long backoff: Await moves the clock through the child's waits although
// the parent itself waits for no time.
func TestAwaitPassesTheWaitsOfAChild(t *testing.T) {
	t.Parallel()
	env := quickEnv(t)
	flaky := flow.Step[string, string]{
		Name:  "flaky",
		Run:   func(_ context.Context, s string) (string, error) { return s + " done", nil },
		Retry: &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: 10 * time.Hour, MaxInterval: 10 * time.Hour},
	}
	env.FailStep("flaky", 1, errors.New("not yet"))
	child := flow.Workflow[string, string]{Name: "child", Run: func(wc flow.Context, s string) (string, error) {
		if err := flow.Sleep(wc, 5*time.Hour); err != nil {
			return "", err
		}
		return flow.Do(wc, flaky, s)
	}}
	flowtest.Register(env, child)
	parent := flow.Workflow[string, string]{Name: "parent", Run: func(wc flow.Context, s string) (string, error) {
		return flow.Call(wc, child, s, nil)
	}}
	start, realStart := env.Now(), time.Now()
	out, _, err := flowtest.RunWorkflow(env, parent, "chore")
	if err != nil || out != "chore done" {
		t.Fatalf("RunWorkflow = %q, %v", out, err)
	}
	// 5h of sleep, then a backoff of about 10h (with jitter).
	checkClock(t, env, start, 5*time.Hour+5*time.Hour, realStart)
}
