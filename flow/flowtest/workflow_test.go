package flowtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

// A step called in a loop is recorded once per call, by occurrence; a
// replay of the body gets the recorded outputs back without running them.
func TestLoopCallsAreSeparateOccurrences(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var ran counter
	square := flow.Step[int, int]{Name: "square", Run: func(_ context.Context, n int) (int, error) {
		ran.inc()
		return n * n, nil
	}}
	sum := flow.Step[[]int, int]{Name: "sum", Run: func(_ context.Context, ns []int) (int, error) {
		total := 0
		for _, n := range ns {
			total += n
		}
		return total, nil
	}}
	wf := flow.Workflow[[]int, int]{Name: "sum_of_squares", Run: func(wc flow.Context, ns []int) (int, error) {
		var squares []int
		for _, n := range ns {
			sq, err := flow.Do(wc, square, n)
			if err != nil {
				return 0, err
			}
			squares = append(squares, sq)
		}
		return flow.Do(wc, sum, squares)
	}}
	env.FailStep("sum", 2, errFlaky) // two replays of the body

	out, run, err := flowtest.RunWorkflow(env, wf, []int{2, 3, 4})
	if err != nil || out != 29 {
		t.Fatalf("RunWorkflow = %d, %v; want 29, nil", out, err)
	}
	if n := ran.get(); n != 3 {
		t.Fatalf("square ran %d times over 3 executions of the body, want 3", n)
	}
	info := env.Inspect(run.ID())
	for occ, want := range []string{"4", "9", "16"} {
		s := stepRecord(t, info, "square", occ)
		if s.Status != "completed" || string(s.Output) != want {
			t.Errorf("square#%d: %s with output %s, want completed with %s", occ, s.Status, s.Output, want)
		}
	}
	var occurrences []int
	for _, a := range attemptsOf(env.Attempts(run.ID()), "square", false) {
		occurrences = append(occurrences, a.Occurrence)
	}
	if !slices.Equal(occurrences, []int{0, 1, 2}) {
		t.Fatalf("square attempts have occurrences %v, want [0 1 2]", occurrences)
	}
}

// flow.Now is recorded on first execution: every replay of the body reads
// the same time although the clock moved in between.
func TestNowIsStableAcrossReplays(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var mu sync.Mutex
	var seen []time.Time
	later := flow.Step[time.Time, string]{Name: "later", Run: func(_ context.Context, at time.Time) (string, error) {
		return at.UTC().Format(time.RFC3339), nil
	}}
	wf := flow.Workflow[struct{}, time.Time]{Name: "stamp", Run: func(wc flow.Context, _ struct{}) (time.Time, error) {
		now, err := flow.Now(wc)
		if err != nil {
			return time.Time{}, err
		}
		mu.Lock()
		seen = append(seen, now)
		mu.Unlock()
		_, err = flow.Do(wc, later, now)
		return now, err
	}}
	env.FailStep("later", 2, errFlaky)
	start := env.Now()

	out, _, err := flowtest.RunWorkflow(env, wf, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if !env.Now().After(start) {
		t.Fatal("the clock did not move through the retries; the test proves nothing")
	}
	if !out.Equal(start) {
		t.Fatalf("Now returned %v, want the clock at the first execution, %v", out, start)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 {
		t.Fatalf("body executed %d times, want 3 (two retries of later)", len(seen))
	}
	for i, s := range seen {
		if !s.Equal(out) {
			t.Fatalf("execution %d read %v, want %v every time", i+1, s, out)
		}
	}
}

func TestRunStep(t *testing.T) {
	t.Parallel()
	double := func(ran *counter) flow.Step[int, int] {
		return flow.Step[int, int]{Name: "double", Run: func(_ context.Context, n int) (int, error) {
			ran.inc()
			return 2 * n, nil
		}}
	}

	t.Run("success", func(t *testing.T) {
		t.Parallel()
		env := flowtest.New(t, nil)
		var ran counter
		out, err := flowtest.RunStep(env, double(&ran), 21)
		if err != nil || out != 42 || ran.get() != 1 {
			t.Fatalf("RunStep = %d, %v after %d runs; want 42, nil after 1", out, err, ran.get())
		}
		all := env.AllAttempts()
		if len(all) != 1 || all[0].Workflow != flowtest.StepWorkflowPrefix+"double" {
			t.Fatalf("attempts = %+v, want one in workflow %sdouble", all, flowtest.StepWorkflowPrefix)
		}
		runs, err := env.Engine.ListRuns(ctxFor(t), flow.RunFilter{Workflow: flowtest.StepWorkflowPrefix + "double"})
		if err != nil || len(runs) != 1 || runs[0].Status != flow.StatusCompleted || string(runs[0].Output) != "42" {
			t.Fatalf("ListRuns = %+v, %v; want one completed run with output 42", runs, err)
		}
	})

	t.Run("retried", func(t *testing.T) {
		t.Parallel()
		env := flowtest.New(t, nil)
		var ran counter
		env.FailStep("double", 2, errFlaky)
		out, err := flowtest.RunStep(env, double(&ran), 5)
		if err != nil || out != 10 {
			t.Fatalf("RunStep = %d, %v; want 10, nil", out, err)
		}
		if got := env.AllAttempts(); len(got) != 3 || !got[0].Injected || !got[1].Injected || got[2].Err != nil {
			t.Fatalf("attempts = %+v, want 2 injected failures then a success", got)
		}
	})

	t.Run("fails for good", func(t *testing.T) {
		t.Parallel()
		env := flowtest.New(t, nil)
		var ran counter
		env.FailStep("double", -1, flow.Permanent(errBad))
		_, err := flowtest.RunStep(env, double(&ran), 5)
		var se *flow.StepError
		if !errors.As(err, &se) || se.Step != "double" || se.Attempts != 1 || !errors.Is(err, errBad) {
			t.Fatalf("err = %v, want a *flow.StepError after 1 attempt wrapping errBad", err)
		}
		if ran.get() != 0 {
			t.Fatal("the body ran despite the injected failure")
		}
	})

	t.Run("same name, other body", func(t *testing.T) {
		t.Parallel()
		env := flowtest.New(t, nil)
		var ran counter
		if out, err := flowtest.RunStep(env, double(&ran), 1); err != nil || out != 2 {
			t.Fatalf("first RunStep = %d, %v", out, err)
		}
		triple := flow.Step[int, int]{Name: "double", Run: func(_ context.Context, n int) (int, error) { return 3 * n, nil }}
		if out, err := flowtest.RunStep(env, triple, 1); err != nil || out != 3 {
			t.Fatalf("second RunStep = %d, %v; want the second step's body to run", out, err)
		}
	})
}

// The clock moves only when told; Advance wakes the engine so that a run
// which became due starts at once.
func TestDelayedStartWaitsForTheClock(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	hello := flow.Step[string, string]{Name: "hello", Run: func(_ context.Context, s string) (string, error) {
		return "hello " + s, nil
	}}
	wf := flow.Workflow[string, string]{Name: "greeter", Run: func(wc flow.Context, s string) (string, error) {
		return flow.Do(wc, hello, s)
	}}
	run := flowtest.Start(env, wf, "later", &flow.StartOptions{Delay: time.Hour})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := run.Result(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Result before the delay passed = %v, want to still wait", err)
	}
	if info := env.Inspect(run.ID()); info.Status != flow.StatusPending || len(info.Steps) != 0 {
		t.Fatalf("run %s with %d steps before the delay, want pending with none", info.Status, len(info.Steps))
	}

	env.Advance(time.Hour)
	out, err := run.Result(ctxFor(t))
	if err != nil || out != "hello later" {
		t.Fatalf("Result after Advance = %q, %v", out, err)
	}
}

// Await moves the clock through a delayed start as through a backoff.
func TestAwaitMovesTheClockThroughADelayedStart(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	wf := flow.Workflow[int, int]{Name: "noop", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	start := env.Now()
	run := flowtest.Start(env, wf, 9, &flow.StartOptions{Delay: 24 * time.Hour})
	if out, err := flowtest.Await(env, run); err != nil || out != 9 {
		t.Fatalf("Await = %d, %v", out, err)
	}
	if moved := env.Now().Sub(start); moved != 24*time.Hour {
		t.Fatalf("clock moved %s, want exactly the delay, 24h", moved)
	}
}

func TestRegisterIsIdempotentAndStartDeduplicatesRunIDs(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var ran counter
	wf := flow.Workflow[int, int]{Name: "once", Run: func(wc flow.Context, n int) (int, error) {
		ran.inc()
		return n + 1, nil
	}}
	flowtest.Register(env, wf)
	flowtest.Register(env, wf)
	for range 2 {
		run := flowtest.Start(env, wf, 1, &flow.StartOptions{RunID: "order-1"})
		if out, err := flowtest.Await(env, run); err != nil || out != 2 {
			t.Fatalf("Await = %d, %v", out, err)
		}
	}
	if n := ran.get(); n != 1 {
		t.Fatalf("body ran %d times; the second Start of run ID order-1 must return the first run", n)
	}
}

// The caller's interceptor still runs, inside the Env's: it sees injected
// failures as the body's.
func TestUserInterceptorIsChained(t *testing.T) {
	t.Parallel()
	var seen recorder
	env := flowtest.New(t, &flow.Config{
		Intercept: func(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
			err := call(ctx)
			seen.add(fmt.Sprintf("%s#%d attempt %d: %v", info.Step, info.Occurrence, info.Attempt, err))
			return err
		},
	})
	step := flow.Step[int, int]{Name: "inc", Run: func(_ context.Context, n int) (int, error) { return n + 1, nil }}
	env.FailStep("inc", 1, nil)
	if out, err := flowtest.RunStep(env, step, 1); err != nil || out != 2 {
		t.Fatalf("RunStep = %d, %v", out, err)
	}
	want := []string{"inc#0 attempt 1: " + flowtest.ErrInjected.Error(), "inc#0 attempt 2: <nil>"}
	if got := seen.get(); !slices.Equal(got, want) {
		t.Fatalf("user interceptor saw %q, want %q", got, want)
	}
	if got := env.AllAttempts(); len(got) != 2 || !errors.Is(got[0].Err, flowtest.ErrInjected) {
		t.Fatalf("attempts = %+v", got)
	}
}

// A recorded output that no longer decodes into the step's type (the code
// changed between executions) suspends the run with a clear reason instead
// of handing the body a zero value.
func TestChangedStepTypeSuspendsTheRun(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	asText := flow.Step[int, string]{Name: "convert", Run: func(_ context.Context, n int) (string, error) {
		return fmt.Sprintf("n=%d", n), nil
	}}
	asNumber := flow.Step[int, int]{Name: "convert", Run: func(_ context.Context, n int) (int, error) { return n, nil }}
	next := flow.Step[int, int]{Name: "next", Run: func(_ context.Context, n int) (int, error) { return n, nil }}
	var executions counter
	wf := flow.Workflow[int, int]{Name: "retyped", Run: func(wc flow.Context, n int) (int, error) {
		executions.inc()
		var err error
		if executions.get() == 1 {
			_, err = flow.Do(wc, asText, n)
		} else {
			_, err = flow.Do(wc, asNumber, n) // as if deployed in between
		}
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, next, n)
	}}
	env.FailStep("next", 1, errFlaky) // forces a second execution

	_, run, err := flowtest.RunWorkflow(env, wf, 1)
	var se *flow.SuspendedError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "convert") || !strings.Contains(se.Reason, "int") {
		t.Fatalf("err = %v; want a *flow.SuspendedError whose reason names the step and the type", err)
	}
	info := env.Inspect(run.ID())
	if c := stepRecord(t, info, "convert", 0); string(c.Output) != `"n=1"` {
		t.Fatalf("convert output %s changed; want the record left untouched", c.Output)
	}
	if info.Status != flow.StatusSuspended || len(env.Compensated(run.ID())) != 0 {
		t.Fatalf("run %s; want suspended, not compensated", info.Status)
	}
}

// When a run does not settle within WaitLimit, Await fails the test with
// the run's state.
func TestAwaitFailsTheTestWithTheRunState(t *testing.T) {
	t.Parallel()
	ft := &fatalTB{TB: t}
	env := flowtest.New(ft, nil)
	env.WaitLimit = 100 * time.Millisecond
	started, release := make(chan struct{}), make(chan struct{})
	block := flow.Step[int, int]{Name: "block", Run: func(ctx context.Context, n int) (int, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "stuck", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, block, n)
	}}
	run := flowtest.Start(env, wf, 1, nil)
	<-started
	msg := ft.catch(func() { _, _ = flowtest.Await(env, run) })
	close(release)
	for _, want := range []string{"did not settle within 100ms", run.ID(), "running", "step block#0: running", "step_started block"} {
		if !strings.Contains(msg, want) {
			t.Errorf("failure message lacks %q:\n%s", want, msg)
		}
	}
	if out, err := run.Result(ctxFor(t)); err != nil || out != 1 {
		t.Fatalf("Result after release = %d, %v", out, err)
	}
}

// fatalTB is a flowtest.TB whose Fatalf is caught by catch instead of ending
// the test.
type fatalTB struct {
	testing.TB
	msg string
}

type fatalPanic struct{}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatalPanic{})
}

func (f *fatalTB) catch(fn func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(fatalPanic); !ok {
				panic(r)
			}
			msg = f.msg
		}
	}()
	fn()
	f.TB.Fatal("Fatalf was not called")
	return ""
}
