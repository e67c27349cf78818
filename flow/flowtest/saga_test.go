package flowtest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
)

var (
	errWarehouseClosed = errors.New("warehouse closed")
	errRefundDown      = errors.New("refund service down")
)

// saga is an order workflow of four steps: reserve and charge can be
// undone, notify cannot, and ship comes last.
type saga struct {
	undone                        *recorder
	shipped                       *counter
	reserve, charge, notify, ship flow.Step[string, string]
	workflow                      flow.Workflow[string, string]
}

func newSaga() *saga {
	s := &saga{undone: &recorder{}, shipped: &counter{}}
	s.reserve = flow.Step[string, string]{
		Name: "reserve",
		Run:  func(_ context.Context, id string) (string, error) { return "res-" + id, nil },
		Compensate: func(_ context.Context, in, out string) error {
			s.undone.add("reserve(" + in + ")=" + out)
			return nil
		},
	}
	s.charge = flow.Step[string, string]{
		Name: "charge",
		Run:  func(_ context.Context, res string) (string, error) { return "ch-" + res, nil },
		Compensate: func(_ context.Context, in, out string) error {
			s.undone.add("charge(" + in + ")=" + out)
			return nil
		},
		CompensateRetry: &flow.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Minute},
	}
	s.notify = flow.Step[string, string]{
		Name: "notify",
		Run:  func(_ context.Context, ch string) (string, error) { return "sent", nil },
	}
	s.ship = flow.Step[string, string]{
		Name: "ship",
		Run: func(_ context.Context, ch string) (string, error) {
			s.shipped.inc()
			return "parcel", nil
		},
	}
	s.workflow = flow.Workflow[string, string]{
		Name: "order",
		Run: func(wc flow.Context, id string) (string, error) {
			res, err := flow.Do(wc, s.reserve, id)
			if err != nil {
				return "", err
			}
			ch, err := flow.Do(wc, s.charge, res)
			if err != nil {
				return "", err
			}
			if _, err := flow.Do(wc, s.notify, ch); err != nil {
				return "", err
			}
			return flow.Do(wc, s.ship, ch)
		},
	}
	return s
}

func TestSagaHappyPathCompensatesNothing(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	s := newSaga()
	out, run, err := flowtest.RunWorkflow(env, s.workflow, "o1")
	if err != nil || out != "parcel" {
		t.Fatalf("RunWorkflow = %q, %v; want parcel, nil", out, err)
	}
	if got := env.Compensated(run.ID()); len(got) != 0 {
		t.Fatalf("compensated %v, want none", got)
	}
	info := env.Inspect(run.ID())
	if info.Status != flow.StatusCompleted || len(info.Steps) != 4 {
		t.Fatalf("run %s with %d steps, want completed with 4", info.Status, len(info.Steps))
	}
	if info.FinishedAt.IsZero() || !info.FinishedAt.Equal(env.Now()) {
		t.Fatalf("finished at %v, want the clock's %v", info.FinishedAt, env.Now())
	}
}

// When the last step fails permanently, the completed steps with a
// Compensate hook are undone in reverse completion order, with their
// recorded input and output; steps without one are passed over.
func TestSagaLastStepFailsPermanentlyRollsBackInReverseOrder(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	s := newSaga()
	env.FailStep("ship", -1, flow.Permanent(errWarehouseClosed))

	_, run, err := flowtest.RunWorkflow(env, s.workflow, "o1")
	if !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("err = %v, want ErrRolledBack", err)
	}
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) {
		t.Fatalf("err is %T, want *flow.RolledBackError", err)
	}
	if rb.RunID != run.ID() || !strings.Contains(rb.Cause, "ship") || !strings.Contains(rb.Cause, errWarehouseClosed.Error()) {
		t.Fatalf("RolledBackError = %+v; want run %s and a cause naming ship and %q", rb, run.ID(), errWarehouseClosed)
	}

	if got, want := env.Compensated(run.ID()), []string{"charge", "reserve"}; !slices.Equal(got, want) {
		t.Fatalf("Compensated = %v, want %v", got, want)
	}
	if got, want := s.undone.get(), []string{"charge(res-o1)=ch-res-o1", "reserve(o1)=res-o1"}; !slices.Equal(got, want) {
		t.Fatalf("compensations ran %v, want %v", got, want)
	}
	if n := s.shipped.get(); n != 0 {
		t.Fatalf("ship body ran %d times; an injected failure must replace it", n)
	}

	info := env.Inspect(run.ID())
	if info.Status != flow.StatusFailed || !strings.Contains(info.Error, errWarehouseClosed.Error()) {
		t.Fatalf("run %s with error %q, want failed with the cause", info.Status, info.Error)
	}
	for step, want := range map[string]string{"reserve": "completed", "charge": "completed", "notify": "none"} {
		if got := stepRecord(t, info, step, 0).Compensation; got != want {
			t.Errorf("step %s: compensation %q, want %q", step, got, want)
		}
	}
	ship := stepRecord(t, info, "ship", 0)
	if ship.Status != "failed" || ship.Attempts != 1 {
		t.Fatalf("ship: %s after %d attempt(s), want failed after 1", ship.Status, ship.Attempts)
	}

	attempts := env.Attempts(run.ID())
	shipAttempts := attemptsOf(attempts, "ship", false)
	if len(shipAttempts) != 1 || !shipAttempts[0].Injected || !errors.Is(shipAttempts[0].Err, errWarehouseClosed) {
		t.Fatalf("ship attempts = %+v, want one injected failure", shipAttempts)
	}
	if n := len(attemptsOf(attempts, "notify", true)); n != 0 {
		t.Fatalf("notify has %d compensation attempts; it has no Compensate", n)
	}
	kinds := eventKinds(env.History(run.ID()))
	if !slices.Contains(kinds, "workflow_failed") || kinds[len(kinds)-1] != "run_failed" {
		t.Fatalf("history %v: want workflow_failed and run_failed last", kinds)
	}
}

// A compensation that exhausts its retries parks the run for an operator;
// Resume, once the cause is fixed, finishes the unwind.
func TestCompensationFailingSuspendsUntilResumed(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	env := flowtest.New(t, nil)
	s := newSaga()
	env.FailStep("ship", -1, flow.Permanent(errWarehouseClosed))
	env.FailCompensation("charge", -1, errRefundDown)

	_, run, err := flowtest.RunWorkflow(env, s.workflow, "o2")
	if !errors.Is(err, flow.ErrSuspended) {
		t.Fatalf("err = %v, want ErrSuspended", err)
	}
	var se *flow.SuspendedError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "charge") || !strings.Contains(se.Reason, errRefundDown.Error()) {
		t.Fatalf("err = %v; want a *flow.SuspendedError whose reason names charge and its error", err)
	}
	if got := env.Compensated(run.ID()); len(got) != 0 {
		t.Fatalf("Compensated = %v; reserve must wait for charge, which comes first", got)
	}
	info := env.Inspect(run.ID())
	charge := stepRecord(t, info, "charge", 0)
	if info.Status != flow.StatusSuspended || charge.Compensation != "failed" || charge.CompensationAttempts != 2 {
		t.Fatalf("run %s, charge compensation %s after %d attempt(s); want suspended, failed after 2 (its CompensateRetry)",
			info.Status, charge.Compensation, charge.CompensationAttempts)
	}
	if got := attemptsOf(env.Attempts(run.ID()), "charge", true); len(got) != 2 || !got[1].Injected || got[1].Attempt != 2 {
		t.Fatalf("charge compensation attempts = %+v, want 2 injected", got)
	}
	if err := env.Engine.Skip(ctx, "no-such-run"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("Skip(unknown run) = %v, want ErrRunNotFound", err)
	}

	env.FailCompensation("charge", 0, nil) // the refund service is back
	if err := env.Engine.Resume(ctx, run.ID()); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	_, err = flowtest.Await(env, run)
	if !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("after Resume: err = %v, want ErrRolledBack", err)
	}
	if got, want := env.Compensated(run.ID()), []string{"charge", "reserve"}; !slices.Equal(got, want) {
		t.Fatalf("Compensated = %v, want %v", got, want)
	}
	if got, want := s.undone.get(), []string{"charge(res-o2)=ch-res-o2", "reserve(o2)=res-o2"}; !slices.Equal(got, want) {
		t.Fatalf("compensations ran %v, want %v", got, want)
	}
	if info := env.Inspect(run.ID()); info.Status != flow.StatusFailed {
		t.Fatalf("run %s, want failed", info.Status)
	}
	if err := env.Engine.Resume(ctx, run.ID()); !errors.Is(err, flow.ErrConflict) {
		t.Fatalf("Resume of a finished run = %v, want ErrConflict", err)
	}
}

// Skip marks the failed compensation as skipped and finishes the unwind
// without running it.
func TestCompensationFailingSuspendsUntilSkipped(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	env := flowtest.New(t, nil)
	s := newSaga()
	env.FailStep("ship", -1, flow.Permanent(errWarehouseClosed))
	env.FailCompensation("charge", -1, errRefundDown)

	_, run, err := flowtest.RunWorkflow(env, s.workflow, "o3")
	if !errors.Is(err, flow.ErrSuspended) {
		t.Fatalf("err = %v, want ErrSuspended", err)
	}
	before := len(env.Attempts(run.ID()))
	if err := env.Engine.Skip(ctx, run.ID()); err != nil {
		t.Fatalf("Skip: %v", err)
	}
	_, err = flowtest.Await(env, run)
	if !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("after Skip: err = %v, want ErrRolledBack", err)
	}
	if got, want := env.Compensated(run.ID()), []string{"reserve"}; !slices.Equal(got, want) {
		t.Fatalf("Compensated = %v, want %v", got, want)
	}
	if got, want := s.undone.get(), []string{"reserve(o3)=res-o3"}; !slices.Equal(got, want) {
		t.Fatalf("compensations ran %v, want %v", got, want)
	}
	info := env.Inspect(run.ID())
	if c := stepRecord(t, info, "charge", 0); c.Compensation != "skipped" {
		t.Fatalf("charge compensation %q, want skipped", c.Compensation)
	}
	if info.Status != flow.StatusFailed {
		t.Fatalf("run %s, want failed", info.Status)
	}
	after := env.Attempts(run.ID())[before:]
	if len(after) != 1 || after[0].Step != "reserve" || !after[0].Compensation {
		t.Fatalf("attempts after Skip = %+v, want only reserve's compensation", after)
	}
	if !slices.Contains(eventKinds(env.History(run.ID())), "compensation_skipped") {
		t.Fatal("history has no compensation_skipped event")
	}
}
