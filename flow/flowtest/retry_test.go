package flowtest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

var (
	errFlaky = errors.New("flaky upstream")
	// Errors a workflow branches on are *flow.Error values: their Code
	// survives the history, so errors.Is matches on replays too.
	errDown = &flow.Error{Code: "upstream_down", Message: "upstream down"}
	errBad  = &flow.Error{Code: "bad_request", Message: "bad request"}
)

// fetch returns a step that counts how often its body ran.
func fetch(ran *counter, retry *flow.RetryPolicy) flow.Step[int, string] {
	return flow.Step[int, string]{
		Name: "fetch",
		Run: func(_ context.Context, n int) (string, error) {
			ran.inc()
			return "item-" + strconv.Itoa(n), nil
		},
		Retry: retry,
	}
}

func TestInjectedFailuresAreRetriedUntilSuccess(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var ran counter
	step := fetch(&ran, nil) // the default policy: 5 attempts
	wf := flow.Workflow[int, string]{Name: "fetcher", Run: func(wc flow.Context, n int) (string, error) {
		return flow.Do(wc, step, n)
	}}
	env.FailStep("fetch", 2, errFlaky)

	out, run, err := flowtest.RunWorkflow(env, wf, 7)
	if err != nil || out != "item-7" {
		t.Fatalf("RunWorkflow = %q, %v; want item-7, nil", out, err)
	}
	got := env.Attempts(run.ID())
	if len(got) != 3 {
		t.Fatalf("attempts = %+v, want 3", got)
	}
	for i, a := range got {
		failed := i < 2
		if a.Step != "fetch" || a.Attempt != i+1 || a.Occurrence != 0 || a.Compensation ||
			a.Injected != failed || errors.Is(a.Err, errFlaky) != failed {
			t.Errorf("attempt %d = %+v", i+1, a)
		}
	}
	if n := ran.get(); n != 1 {
		t.Fatalf("body ran %d times, want once (the injected attempts replace it)", n)
	}
	if s := stepRecord(t, env.Inspect(run.ID()), "fetch", 0); s.Status != "completed" || s.Attempts != 3 || s.Output == nil {
		t.Fatalf("fetch recorded as %+v, want completed after 3 attempts", s)
	}
}

// When a step's attempts are exhausted, Do returns a *flow.StepError the
// workflow may handle; a workflow that does completes.
func TestExhaustedRetriesReturnStepErrorTheWorkflowHandles(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var ran counter
	step := fetch(&ran, &flow.RetryPolicy{MaxAttempts: 3})
	var mu sync.Mutex
	var caught *flow.StepError
	wf := flow.Workflow[int, string]{Name: "tolerant", Run: func(wc flow.Context, n int) (string, error) {
		out, err := flow.Do(wc, step, n)
		var se *flow.StepError
		if errors.As(err, &se) {
			mu.Lock()
			caught = se
			mu.Unlock()
			return "fallback after " + strconv.Itoa(se.Attempts) + " attempts", nil
		}
		return out, err
	}}
	env.FailStep("fetch", -1, errDown)

	out, run, err := flowtest.RunWorkflow(env, wf, 1)
	if err != nil || out != "fallback after 3 attempts" {
		t.Fatalf("RunWorkflow = %q, %v; want the fallback", out, err)
	}
	mu.Lock()
	se := caught
	mu.Unlock()
	if se == nil || se.Step != "fetch" || se.Occurrence != 0 || se.RunID != run.ID() || !errors.Is(se, errDown) {
		t.Fatalf("StepError = %+v, want fetch#0 of the run wrapping errDown", se)
	}
	if n := len(env.Attempts(run.ID())); n != 3 {
		t.Fatalf("%d attempts, want MaxAttempts = 3", n)
	}
	info := env.Inspect(run.ID())
	if s := stepRecord(t, info, "fetch", 0); s.Status != "failed" || s.Attempts != 3 || s.Error != errDown.Error() {
		t.Fatalf("fetch recorded as %+v, want failed after 3 attempts with %q", s, errDown)
	}
	if info.Status != flow.StatusCompleted || ran.get() != 0 {
		t.Fatalf("run %s, body ran %d times; want completed, 0", info.Status, ran.get())
	}
}

// flow.Permanent stops retrying at once, whether the body returns it or the
// failure is injected.
func TestPermanentErrorStopsAfterOneAttempt(t *testing.T) {
	t.Parallel()
	for _, inject := range []bool{false, true} {
		t.Run("inject="+strconv.FormatBool(inject), func(t *testing.T) {
			t.Parallel()
			env := flowtest.New(t, nil)
			var ran counter
			step := flow.Step[int, int]{Name: "validate", Run: func(_ context.Context, n int) (int, error) {
				ran.inc()
				return 0, flow.Permanent(errBad)
			}}
			if inject {
				step.Run = func(_ context.Context, n int) (int, error) { ran.inc(); return n, nil }
				env.FailStep("validate", -1, flow.Permanent(errBad))
			}
			wf := flow.Workflow[int, int]{Name: "validator", Run: func(wc flow.Context, n int) (int, error) {
				return flow.Do(wc, step, n)
			}}
			_, run, err := flowtest.RunWorkflow(env, wf, 3)
			if !errors.Is(err, flow.ErrRolledBack) {
				t.Fatalf("err = %v, want ErrRolledBack", err)
			}
			got := env.Attempts(run.ID())
			if len(got) != 1 || !errors.Is(got[0].Err, errBad) || got[0].Injected != inject {
				t.Fatalf("attempts = %+v, want exactly one failing with errBad", got)
			}
			var perm *flow.PermanentError
			if !errors.As(got[0].Err, &perm) {
				t.Fatalf("attempt error %v is not a *flow.PermanentError", got[0].Err)
			}
			if want := map[bool]int{false: 1, true: 0}[inject]; ran.get() != want {
				t.Fatalf("body ran %d times, want %d", ran.get(), want)
			}
			if s := stepRecord(t, env.Inspect(run.ID()), "validate", 0); s.Status != "failed" || s.Attempts != 1 {
				t.Fatalf("validate recorded as %s after %d attempt(s), want failed after 1", s.Status, s.Attempts)
			}
		})
	}
}

// A retry due in over an hour happens as soon as the test waits for it:
// Await moves the clock to the run's due time. The engine does not run the
// attempt before it is due by its clock.
func TestHourLongBackoffPassesOnTheManualClock(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var ran counter
	step := fetch(&ran, &flow.RetryPolicy{
		MaxAttempts: 2, InitialInterval: 70 * time.Minute, MaxInterval: 70 * time.Minute, Jitter: 0.1,
	})
	wf := flow.Workflow[int, string]{Name: "patient", Run: func(wc flow.Context, n int) (string, error) {
		return flow.Do(wc, step, n)
	}}
	env.FailStep("fetch", 1, errFlaky)
	start := env.Now()

	out, run, err := flowtest.RunWorkflow(env, wf, 2)
	if err != nil || out != "item-2" {
		t.Fatalf("RunWorkflow = %q, %v; want item-2, nil", out, err)
	}
	if moved := env.Now().Sub(start); moved < time.Hour {
		t.Fatalf("clock moved %s, want at least 1h", moved)
	}
	var retriedAt, secondStartAt time.Time
	for _, ev := range env.History(run.ID()) {
		switch {
		case ev.Kind == "step_retried":
			retriedAt = ev.At
		case ev.Kind == "step_started" && ev.Attempt == 2:
			secondStartAt = ev.At
		}
	}
	if retriedAt.IsZero() || secondStartAt.Sub(retriedAt) < time.Hour {
		t.Fatalf("retry recorded at %v, second attempt at %v; want it at least 1h later", retriedAt, secondStartAt)
	}
	if info := env.Inspect(run.ID()); info.Status != flow.StatusCompleted {
		t.Fatalf("run %s, want completed", info.Status)
	}
}

// Each attempt is bounded by the step's Timeout through its context, and a
// timed-out attempt is retried per the policy.
func TestAttemptTimeoutFailsTheAttemptAndIsRetried(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var ran counter
	step := flow.Step[int, int]{
		Name: "hang",
		Run: func(ctx context.Context, n int) (int, error) {
			ran.inc()
			<-ctx.Done()
			return 0, ctx.Err()
		},
		Timeout: 20 * time.Millisecond,
		Retry:   &flow.RetryPolicy{MaxAttempts: 2},
	}
	var mu sync.Mutex
	var caught error
	wf := flow.Workflow[int, int]{Name: "hanger", Run: func(wc flow.Context, n int) (int, error) {
		out, err := flow.Do(wc, step, n)
		if err != nil {
			mu.Lock()
			caught = err
			mu.Unlock()
		}
		return out, err
	}}

	_, run, err := flowtest.RunWorkflow(env, wf, 1)
	if !errors.Is(err, flow.ErrRolledBack) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v, want a rollback caused by a timeout", err)
	}
	mu.Lock()
	stepErr := caught
	mu.Unlock()
	var se *flow.StepError
	if !errors.As(stepErr, &se) || se.Attempts != 2 || !errors.Is(se, context.DeadlineExceeded) ||
		!strings.Contains(se.Error(), "timed out after 20ms") {
		t.Fatalf("Do returned %v; want a *flow.StepError after 2 attempts that timed out after 20ms", stepErr)
	}
	if n := ran.get(); n != 2 {
		t.Fatalf("body ran %d times, want 2", n)
	}
	attempts := env.Attempts(run.ID())
	if len(attempts) != 2 || !errors.Is(attempts[0].Err, context.DeadlineExceeded) || attempts[0].Injected {
		t.Fatalf("attempts = %+v, want 2 ending with the context's deadline", attempts)
	}
	s := stepRecord(t, env.Inspect(run.ID()), "hang", 0)
	if s.Status != "failed" || s.Attempts != 2 || !strings.Contains(s.Error, "timed out") {
		t.Fatalf("hang recorded as %+v, want failed after 2 timed-out attempts", s)
	}
}
