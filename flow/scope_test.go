package flow_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowhistory"
	"github.com/flowlite/flowlite/internal/clock"
	"golang.org/x/sync/errgroup"
)

// The scenarios of go-workflows' and Temporal's cancellation tests (a
// timer, a signal wait, an activity, a sub-workflow before and while it
// runs, nested scopes, cancel after the work finished), on flow.WithCancel.

// isScopeCancelled reports whether err is the error of a call its scope's
// cancel ended, under both names it matches.
func isScopeCancelled(err error) bool {
	return errors.Is(err, flow.ErrScopeCancelled) && errors.Is(err, context.Canceled) && !errors.Is(err, flow.ErrCancelled)
}

// recordedStep returns the record of the call name#occurrence of a run.
func recordedStep(t *testing.T, e *flow.Engine, runID, name string, occurrence int) flowhistory.Step {
	t.Helper()
	h, err := e.ExportHistory(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range h.Steps {
		if s.Name == name && s.Occurrence == occurrence {
			return s
		}
	}
	t.Fatalf("run %s has no record of %s#%d", runID, name, occurrence)
	return flowhistory.Step{}
}

// scopeEvent returns the detail of the run's scope_cancelled event, and
// how many there are.
func scopeEvents(t *testing.T, e *flow.Engine, runID string) []string {
	t.Helper()
	events, err := e.History(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, ev := range events {
		if ev.Kind == flow.EventScopeCancelled {
			details = append(details, ev.Step+": "+ev.Detail)
		}
	}
	return details
}

// A cancel before a sleep makes the sleep return at once; the run goes on.
func TestScopeCancelledBeforeSleepReturnsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(epoch)
	e := openEngine(t, dbPath(t), manualConfig(clk))
	var c counter
	after := countedStep(&c, "after")
	var sleepErr atomic.Value
	wf := flow.Workflow[string, string]{Name: "scope-cancel-first", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		cancel()
		cancel() // a second call does nothing
		err := flow.Sleep(sc, 24*time.Hour)
		sleepErr.Store(err)
		if !isScopeCancelled(err) {
			return "", err
		}
		return flow.Do(wc, after, in)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(ctx)
	if err != nil || out != "x+after" {
		t.Fatalf("result = %q, %v (sleep returned %v)", out, err, sleepErr.Load())
	}
	if n := countKind(t, e, run.ID(), flow.EventTimerStarted); n != 0 {
		t.Fatalf("%d timers started in a cancelled scope, want none", n)
	}
	if got := scopeEvents(t, e, run.ID()); len(got) != 1 || got[0] != "scope0/flow.cancel: nothing was left open" {
		t.Fatalf("scope_cancelled events %q, want one that ended nothing", got)
	}
}

// A branch sleeping in a scope ends when another branch cancels the
// scope, without the clock moving; the sleep's record fails with "scope
// cancelled", and the run completes.
func TestScopeCancelEndsTimerInParallelBranch(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(epoch)
	e := openEngine(t, dbPath(t), manualConfig(clk))
	var c counter
	after := countedStep(&c, "after")
	wf := flow.Workflow[string, string]{Name: "scope-timer", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		got, err := flow.All(sc,
			func(b flow.Context) (string, error) {
				if err := flow.Sleep(b, 24*time.Hour); !isScopeCancelled(err) {
					return "", err
				}
				return "timer cancelled", nil
			},
			func(b flow.Context) (string, error) {
				if _, err := flow.Receive[string](b, "stop", 0); err != nil {
					return "", err
				}
				cancel()
				return "stopped", nil
			})
		if err != nil {
			return "", err
		}
		return flow.Do(wc, after, strings.Join(got, ","))
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e, run.ID(), "stop", "now", nil); err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(ctx)
	if err != nil || out != "timer cancelled,stopped+after" {
		t.Fatalf("result = %q, %v", out, err)
	}
	sleep := recordedStep(t, e, run.ID(), "scope0/all0.0/flow.sleep", 0)
	if sleep.Status != "failed" || sleep.Error != "scope cancelled" || sleep.ErrorCode != "flowlite.scope_cancelled" {
		t.Fatalf("sleep record %s %q (%s), want failed with scope cancelled", sleep.Status, sleep.Error, sleep.ErrorCode)
	}
	if got := scopeEvents(t, e, run.ID()); len(got) != 1 || !strings.Contains(got[0], "scope0/all0.0/flow.sleep#0 (waiting)") {
		t.Fatalf("scope_cancelled events %q, want one naming the sleep", got)
	}
	if n := countKind(t, e, run.ID(), flow.EventTimerFired); n != 0 {
		t.Fatalf("the cancelled timer fired %d times", n)
	}
	// Time travel folds the cancel and what it ended as Inspect shows them.
	history, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range history {
		if ev.Kind != flow.EventScopeCancelled {
			continue
		}
		got, err := e.InspectAfter(ctx, run.ID(), history[i].ID) // after what the cancel ended
		if err != nil {
			t.Fatal(err)
		}
		var sleepThen flow.StepRecord
		for _, s := range got.Run.Steps {
			if s.Name == "scope0/all0.0/flow.sleep" {
				sleepThen = s
			}
		}
		if sleepThen.Status != "failed" || sleepThen.Error != "scope cancelled" {
			t.Fatalf("sleep after the cancel, by time travel: %s %q, want failed, scope cancelled", sleepThen.Status, sleepThen.Error)
		}
	}
	final, err := e.InspectAt(ctx, run.ID(), history[len(history)-1].At)
	if err != nil {
		t.Fatal(err)
	}
	if diff := compareStates(final.Run, inspect(t, e, run.ID())); diff != "" {
		t.Fatalf("time travel to the end differs from Inspect:\n%s", diff)
	}
}

// A receive in a scope ends when the scope is cancelled; a signal sent
// later stays for a receive outside the scope.
func TestScopeCancelEndsReceive(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[string, string]{Name: "scope-receive", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		_, err := flow.All(sc,
			func(b flow.Context) (string, error) {
				_, err := flow.Receive[string](b, "approve", 0)
				if !isScopeCancelled(err) {
					return "", errors.Join(errors.New("receive not cancelled"), err)
				}
				return "", nil
			},
			func(b flow.Context) (string, error) {
				if _, err := flow.Receive[string](b, "abort", 0); err != nil {
					return "", err
				}
				cancel()
				return "", nil
			})
		if err != nil {
			return "", err
		}
		// The scope's receive consumed nothing: a later signal is received here.
		return flow.Receive[string](wc, "approve", 0)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e, run.ID(), "abort", "", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the scope's cancel", func() bool { return len(scopeEvents(t, e, run.ID())) == 1 })
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e, run.ID(), "approve", "yes", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != "yes" {
		t.Fatalf("result = %q, %v", out, err)
	}
	rec := recordedStep(t, e, run.ID(), "scope0/all0.0/flow.receive:approve", 0)
	if rec.Status != "failed" || rec.ErrorCode != "flowlite.scope_cancelled" {
		t.Fatalf("receive record %s (%s), want failed, scope cancelled", rec.Status, rec.ErrorCode)
	}
	// The change feed carries the cancel and the receive it ended.
	var feed []string
	for ch, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ch.RunID == run.ID() && strings.HasPrefix(ch.Step, "scope0/") && (ch.Kind == flow.EventScopeCancelled || ch.Kind == flow.EventStepFailed) {
			feed = append(feed, ch.Kind+" "+ch.Step)
		}
	}
	want := []string{"step_failed scope0/all0.0/flow.receive:approve", "scope_cancelled scope0/flow.cancel"}
	if !slices.Equal(feed, want) {
		t.Fatalf("change feed has %q, want %q", feed, want)
	}
}

// A running step's context ends with ErrScopeCancelled as its cause when
// its scope is cancelled: the step fails for good, is not retried, and a
// step of the scope not yet begun is not begun.
func TestScopeCancelEndsRunningStep(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	h := newHolds()
	var c counter
	never, after := countedStep(&c, "never"), countedStep(&c, "after")
	blocking := h.blocking
	blocking.Retry = &flow.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Millisecond}
	attempts := atomic.Int32{}
	run0 := blocking.Run
	blocking.Run = func(ctx context.Context, in string) (string, error) {
		attempts.Add(1)
		return run0(ctx, in)
	}
	untilInside := flow.Step[string, string]{Name: "until-inside", Run: func(ctx context.Context, in string) (string, error) {
		for !h.inside.Load() {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return in, nil
	}}
	var stepErr, laterErr atomic.Value
	wf := flow.Workflow[string, string]{Name: "scope-step", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		_, err := flow.All(sc,
			func(b flow.Context) (string, error) {
				_, err := flow.Do(b, blocking, in)
				stepErr.Store(err)
				_, err = flow.Do(b, never, in)
				laterErr.Store(err)
				return "", nil
			},
			func(b flow.Context) (string, error) {
				// A parked branch resumes only in the run's next execution,
				// which the running step holds off: the cancel comes from a
				// step of its own, once the other step runs.
				if _, err := flow.Do(b, untilInside, in); err != nil {
					return "", err
				}
				cancel()
				return "", nil
			})
		if err != nil {
			return "", err
		}
		return flow.Do(wc, after, in)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != "x+after" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if cause := h.cause(); !errors.Is(cause, flow.ErrScopeCancelled) {
		t.Fatalf("step's context cause = %v, want ErrScopeCancelled", cause)
	}
	var se *flow.StepError
	if err, _ := stepErr.Load().(error); !isScopeCancelled(err) || !errors.As(err, &se) {
		t.Fatalf("Do of the running step returned %v, want a *StepError matching ErrScopeCancelled", err)
	}
	if err, _ := laterErr.Load().(error); !isScopeCancelled(err) {
		t.Fatalf("Do of a later step returned %v, want ErrScopeCancelled", err)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("the cancelled step ran %d attempts, want 1", n)
	}
	if c.get("never") != 0 {
		t.Fatal("a step of the cancelled scope began")
	}
	rec := recordedStep(t, e, run.ID(), "scope0/all0.0/blocking", 0)
	if rec.Status != "failed" || rec.ErrorCode != "flowlite.scope_cancelled" || !rec.ErrorPermanent {
		t.Fatalf("step record %s %q (%s), want failed for good, scope cancelled", rec.Status, rec.Error, rec.ErrorCode)
	}
}

// A child started in a scope is cancelled with it, exactly once, and its
// result awaited outside the scope says so; cancelled before the start,
// the scope starts no child.
func TestScopeCancelCancelsChild(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	h := newHolds()
	var c counter
	var u undoLog
	childStep := compensable(&c, &u, "child-step")
	child := flow.Workflow[string, string]{Name: "scope-child", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, childStep, in)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, h.blocking, s)
	}}
	var startAfterErr atomic.Value
	parent := flow.Workflow[string, string]{Name: "scope-parent", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		ch, err := flow.StartChild(sc, child, in, nil)
		if err != nil {
			return "", err
		}
		if _, err := flow.Receive[string](wc, "stop", 0); err != nil {
			return "", err
		}
		cancel()
		// Cancelled before the start: nothing starts.
		_, err = flow.StartChild(sc, child, in, &flow.ChildOptions{RunID: wc.RunID() + "-never"})
		startAfterErr.Store(err)
		if _, err := ch.Result(sc); !isScopeCancelled(err) {
			return "", errors.Join(errors.New("result in the scope"), err)
		}
		_, err = ch.Result(wc)
		if !errors.Is(err, flow.ErrCancelled) {
			return "", errors.Join(errors.New("result outside the scope"), err)
		}
		return "child cancelled", nil
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child's step to run", h.inside.Load)
	if _, err := flow.Signal(ctx, e, run.ID(), "stop", "", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != "child cancelled" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if err, _ := startAfterErr.Load().(error); !isScopeCancelled(err) {
		t.Fatalf("StartChild after the cancel returned %v, want ErrScopeCancelled", err)
	}
	if _, err := e.Inspect(ctx, run.ID()+"-never"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("inspect the child started after the cancel: %v, want ErrRunNotFound", err)
	}
	childID := run.ID() + "/scope0/flow.child:scope-child#0"
	if st := inspect(t, e, childID).Status; st != flow.StatusCancelled {
		t.Fatalf("child is %s, want cancelled", st)
	}
	if got := u.list(); !slices.Equal(got, []string{"child-step"}) {
		t.Fatalf("compensated %v, want the child's step", got)
	}
	if n := countKind(t, e, childID, flow.EventCancelRequested); n != 1 {
		t.Fatalf("child has %d cancel requests, want 1", n)
	}
	if got := scopeEvents(t, e, run.ID()); len(got) != 1 || !strings.Contains(got[0], "child "+childID) {
		t.Fatalf("scope_cancelled events %q, want one naming the child", got)
	}
}

// A child that no worker has claimed yet is cancelled at once.
func TestScopeCancelCancelsChildBeforeItStarts(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	childStep := countedStep(&c, "child-step")
	child := flow.Workflow[string, string]{Name: "scope-idle-child", Run: func(wc flow.Context, in string) (string, error) {
		return flow.Do(wc, childStep, in)
	}}
	parent := flow.Workflow[string, string]{Name: "scope-idle-parent", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		// On a queue no worker serves, the child stays pending.
		ch, err := flow.StartChild(sc, child, in, &flow.ChildOptions{Queue: "nobody"})
		if err != nil {
			return "", err
		}
		cancel()
		_, err = ch.Result(wc)
		if !errors.Is(err, flow.ErrCancelled) {
			return "", errors.Join(errors.New("child result"), err)
		}
		return "cancelled before it started", nil
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != "cancelled before it started" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if c.get("child-step") != 0 {
		t.Fatal("the child's step ran")
	}
}

// Nested scopes: cancelling the outer one ends the inner one's calls;
// cancelling the inner one leaves the outer one's alone; cancelling a
// scope whose work finished ends nothing and keeps its steps' results.
func TestScopeNestedAndCancelAfterFinish(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	step := countedStep(&c, "step")
	wf := flow.Workflow[string, []string]{Name: "scope-nested", Run: func(wc flow.Context, in string) ([]string, error) {
		var got []string
		outer, cancelOuter := flow.WithCancel(wc)
		inner, cancelInner := flow.WithCancel(outer)
		cancelInner()
		if _, err := flow.Do(inner, step, "inner"); isScopeCancelled(err) {
			got = append(got, "inner cancelled")
		}
		s, err := flow.Do(outer, step, "outer")
		if err != nil {
			return nil, err
		}
		got = append(got, s)
		inner2, _ := flow.WithCancel(outer)
		cancelOuter()
		if err := flow.Sleep(inner2, time.Hour); isScopeCancelled(err) {
			got = append(got, "inner2 cancelled with outer")
		}
		done, cancelDone := flow.WithCancel(wc)
		s, err = flow.Do(done, step, "done")
		if err != nil {
			return nil, err
		}
		cancelDone() // after its work finished: ends nothing
		got = append(got, s)
		s, err = flow.Do(wc, step, "after")
		if err != nil {
			return nil, err
		}
		return append(got, s), nil
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(ctx)
	want := []string{"inner cancelled", "outer+step", "inner2 cancelled with outer", "done+step", "after+step"}
	if err != nil || !slices.Equal(out, want) {
		t.Fatalf("result = %q, %v; want %q", out, err, want)
	}
	if n := c.get("step"); n != 3 {
		t.Fatalf("step ran %d times, want 3", n)
	}
	// The inner scope cancelled with the outer one records no cancel of
	// its own.
	if got := scopeEvents(t, e, run.ID()); len(got) != 3 {
		t.Fatalf("scope_cancelled events %q, want 3 (inner, outer, done)", got)
	}
}

// The completed steps of a cancelled scope stay completed, and are
// compensated with the run's others when the run fails later.
func TestScopeCompletedStepsAreCompensatedWhenTheRunFails(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	var u undoLog
	inScope, outside := compensable(&c, &u, "in-scope"), compensable(&c, &u, "outside")
	wf := flow.Workflow[string, string]{Name: "scope-saga", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		if _, err := flow.Do(sc, inScope, in); err != nil {
			return "", err
		}
		cancel()
		if _, err := flow.Do(wc, outside, in); err != nil {
			return "", err
		}
		return "", errors.New("give up")
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("result err = %v, want ErrRolledBack", err)
	}
	if got := u.list(); !slices.Equal(got, []string{"outside", "in-scope"}) {
		t.Fatalf("compensated %v, want outside then in-scope", got)
	}
}

// A run whose scope was cancelled while a parallel branch slept replays
// the same way on a new engine: the cancel and its effects are not
// repeated, the branch's calls after the cancel stay cancelled whatever
// order the branches replay in, and the run goes on.
func TestScopeCancelSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(epoch)
	var c counter
	work, after := countedStep(&c, "work"), countedStep(&c, "after")
	wf := flow.Workflow[string, string]{Name: "scope-restart", Run: func(wc flow.Context, in string) (string, error) {
		sc, cancel := flow.WithCancel(wc)
		got, err := flow.All(sc,
			func(b flow.Context) (string, error) {
				if err := flow.Sleep(b, 24*time.Hour); !isScopeCancelled(err) {
					return "", err
				}
				if _, err := flow.Do(b, work, in); !isScopeCancelled(err) {
					return "", errors.Join(errors.New("work after the cancel"), err)
				}
				return "slept", nil
			},
			func(b flow.Context) (string, error) {
				if _, err := flow.Receive[string](b, "stop", 0); err != nil {
					return "", err
				}
				cancel()
				return "stopped", nil
			})
		if err != nil {
			return "", err
		}
		if _, err := flow.Receive[string](wc, "finish", 0); err != nil {
			return "", err
		}
		return flow.Do(wc, after, strings.Join(got, ","))
	}}
	register := func(e *flow.Engine) { flow.Register(e, wf) }
	e1, close1 := engineSession(t, path, manualConfig(clk), register)
	run, err := flow.Start(ctx, e1, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e1, run.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e1, run.ID(), "stop", "", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to wait for finish", func() bool {
		return len(scopeEvents(t, e1, run.ID())) == 1 && inspect(t, e1, run.ID()).Status == flow.StatusWaiting &&
			countKind(t, e1, run.ID(), flow.EventSignalWaiting) == 2
	})
	// As go-workflows' Timer_CancelBeforeFiringRemovesFutureEvent: the
	// cancelled timer no longer makes the run due. (The execution that
	// cancelled it parked on it, so the run ran again at once, and then
	// waits for the signal alone.)
	eventually(t, "the run to wait for the signal alone", func() bool {
		info := inspect(t, e1, run.ID())
		return info.Status == flow.StatusWaiting && info.RunAt.Year() >= 3000
	})
	if info := inspect(t, e1, run.ID()); info.RunAt.Equal(epoch.Add(24 * time.Hour)) {
		t.Fatalf("run due at the cancelled timer's %s", info.RunAt.UTC())
	}
	close1()

	e2, _ := engineSession(t, path, manualConfig(clk), register)
	if _, err := flow.Signal(ctx, e2, run.ID(), "finish", "", nil); err != nil {
		t.Fatal(err)
	}
	out, err := handle(t, e2, wf, run.ID()).Result(ctx)
	if err != nil || out != "slept,stopped+after" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if c.get("work") != 0 || c.get("after") != 1 {
		t.Fatalf("work ran %d times, after %d; want 0 and 1", c.get("work"), c.get("after"))
	}
	if got := scopeEvents(t, e2, run.ID()); len(got) != 1 {
		t.Fatalf("scope_cancelled events %q, want the one", got)
	}

	// The exported history replays clean against the same code, and a
	// body that no longer cancels the scope is reported as diverging.
	h, err := e2.ExportHistory(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if report, err := e2.Replay(ctx, h); err != nil || !report.Returned {
		t.Fatalf("replay: %+v, %v", report, err)
	}
	changed := wf
	changed.Run = func(wc flow.Context, in string) (string, error) {
		sc, _ := flow.WithCancel(wc)
		_, err := flow.All(sc,
			func(b flow.Context) (string, error) { return "", flow.Sleep(b, 24*time.Hour) },
			func(b flow.Context) (string, error) {
				_, err := flow.Receive[string](b, "stop", 0)
				return "", err
			})
		if err != nil {
			return "", err
		}
		if _, err := flow.Receive[string](wc, "finish", 0); err != nil {
			return "", err
		}
		return flow.Do(wc, after, "")
	}
	e3 := openEngine(t, dbPath(t), nil)
	flow.Register(e3, changed)
	var divergence *flow.NonDeterminismError
	if _, err := e3.Replay(ctx, h); !errors.As(err, &divergence) {
		t.Fatalf("replay of a body that does not cancel: %v, want a *NonDeterminismError", err)
	}
}

// A Timeout whose run is waiting when its engine closes times out on the
// next engine once the clock passes it, and a signal sent after that
// stays for a receive outside the scope.
func TestScopeTimeoutSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(epoch)
	wf := flow.Workflow[string, string]{Name: "scope-timeout", Run: func(wc flow.Context, in string) (string, error) {
		_, err := flow.Timeout(wc, time.Hour, func(sc flow.Context) (string, error) {
			return flow.Receive[string](sc, "answer", 0)
		})
		if !isScopeCancelled(err) || !strings.Contains(err.Error(), "timed out after 1h0m0s") {
			return "", errors.Join(errors.New("want a timeout"), err)
		}
		return flow.Receive[string](wc, "answer", 0)
	}}
	register := func(e *flow.Engine) { flow.Register(e, wf) }
	e1, close1 := engineSession(t, path, manualConfig(clk), register)
	run, err := flow.Start(ctx, e1, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if info := awaitStatus(t, e1, run.ID(), flow.StatusWaiting); !info.RunAt.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("waiting run due at %s, want the timeout's %s", info.RunAt.UTC(), epoch.Add(time.Hour))
	}
	close1()

	clk.Advance(time.Hour)
	e2, _ := engineSession(t, path, manualConfig(clk), register)
	eventually(t, "the timeout's cancel", func() bool { return len(scopeEvents(t, e2, run.ID())) == 1 })
	awaitStatus(t, e2, run.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e2, run.ID(), "answer", "late", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := handle(t, e2, wf, run.ID()).Result(ctx); err != nil || out != "late" {
		t.Fatalf("result = %q, %v", out, err)
	}
}

// A reset cuts a cancellation scope as it cuts a parallel call: a call in
// the scope is no point to go back to, and going back to a call before
// the scope runs the scope again whole, its cancel included; the cancel of
// the first pass ended nothing the second pass needs.
func TestScopeReset(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	first, mid := countedStep(&c, "first"), countedStep(&c, "mid")
	inScope, last := countedStep(&c, "in-scope"), countedStep(&c, "last")
	wf := flow.Workflow[string, string]{Name: "scope-reset", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, first, in)
		if err != nil {
			return "", err
		}
		if s, err = flow.Do(wc, mid, s); err != nil {
			return "", err
		}
		sc, cancel := flow.WithCancel(wc)
		if s, err = flow.Do(sc, inScope, s); err != nil {
			return "", err
		}
		cancel()
		return flow.Do(wc, last, s)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Reset(ctx, run.ID(), "scope0/in-scope#0"); !errors.Is(err, flow.ErrConflict) {
		t.Fatalf("reset at a call of the scope: %v, want ErrConflict", err)
	}
	// Every call of the scope started before last: it is kept whole, its
	// cancel with it, and replays.
	if err := e.Reset(ctx, run.ID(), "last#0"); err != nil {
		t.Fatal(err)
	}
	if out, err := handle(t, e, wf, run.ID()).Result(ctx); err != nil || out != "x+first+mid+in-scope+last" {
		t.Fatalf("after the reset to last: %q, %v", out, err)
	}
	if c.get("first") != 1 || c.get("in-scope") != 1 || c.get("last") != 2 {
		t.Fatalf("steps ran first=%d in-scope=%d last=%d, want 1, 1, 2", c.get("first"), c.get("in-scope"), c.get("last"))
	}
	if got := scopeEvents(t, e, run.ID()); len(got) != 1 {
		t.Fatalf("scope_cancelled events %q, want the first pass's", got)
	}
	// Going back to mid (position 1 at the top level) discards the scope
	// whole, though its calls' own positions (0 and 1 in the scope) are
	// not after mid's: it started after mid, so it runs again, and so does
	// its cancel.
	if err := e.Reset(ctx, run.ID(), "mid#0"); err != nil {
		t.Fatal(err)
	}
	if out, err := handle(t, e, wf, run.ID()).Result(ctx); err != nil || out != "x+first+mid+in-scope+last" {
		t.Fatalf("after the reset to first: %q, %v", out, err)
	}
	if c.get("first") != 1 || c.get("mid") != 2 || c.get("in-scope") != 2 || c.get("last") != 3 {
		t.Fatalf("steps ran first=%d mid=%d in-scope=%d last=%d, want 1, 2, 2, 3", c.get("first"), c.get("mid"), c.get("in-scope"), c.get("last"))
	}
	if got := scopeEvents(t, e, run.ID()); len(got) != 2 {
		t.Fatalf("scope_cancelled events %q, want one per pass", got)
	}
}

// BenchmarkScopes measures what a cancellation scope costs three no-op
// steps: none outside a scope, the same steps inside one, and inside one
// that is cancelled after them (one more write: the cancel's record and
// its read of the run's calls). Run it with:
//
//	go test -run '^$' -bench '^BenchmarkScopes$' -benchtime 3000x ./flow/
func BenchmarkScopes(b *testing.B) {
	three := func(wc flow.Context, n int) (int, error) {
		for range 3 {
			var err error
			if n, err = flow.Do(wc, noop, n); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	for _, bc := range []struct {
		name string
		run  func(wc flow.Context, n int) (int, error)
	}{
		{"ThreeSteps", three},
		{"ThreeStepsInScope", func(wc flow.Context, n int) (int, error) {
			sc, _ := flow.WithCancel(wc)
			return three(sc, n)
		}},
		{"ThreeStepsThenCancel", func(wc flow.Context, n int) (int, error) {
			sc, cancel := flow.WithCancel(wc)
			n, err := three(sc, n)
			cancel()
			return n, err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			e := openSQLiteEngine(b, filepath.Join(b.TempDir(), "bench.db"), &flow.Config{
				Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}},
				PollInterval: 50 * time.Millisecond,
			}, nil)
			wf := flow.Workflow[int, int]{Name: "scoped", Run: bc.run}
			flow.Register(e, wf)
			if err := e.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer e.Stop(ctx)
			b.ResetTimer()
			start := time.Now()
			runs := make([]*flow.Run[int], b.N)
			var g errgroup.Group
			for p := range producers {
				g.Go(func() error {
					for i := p; i < b.N; i += producers {
						var err error
						if runs[i], err = flow.Start(ctx, e, wf, i, nil); err != nil {
							return err
						}
					}
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			for _, r := range runs {
				if _, err := r.Result(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "runs/s")
		})
	}
}
