package flow_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// aheadClock runs ahead of the wall clock, so that an engine using it sees
// the leases of others as expired.
type aheadClock struct{ by time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.by) }

// A job with MaxAttempts 1 whose lease lapsed mid-attempt is rescued, and
// the interrupted attempt counts: the run fails for good (a dead letter)
// instead of calling its handler a second time (River's rescuer discards
// such jobs too).
func TestRescuedJobDoesNotRunBeyondMaxAttempts(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var calls atomic.Int32
	release := make(chan struct{})
	job := flow.Job[string]{Name: "once", MaxAttempts: 1, Handler: func(ctx context.Context, _ string) error {
		calls.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}

	worker := openEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond, WorkerID: "worker"})
	flow.RegisterJob(worker, job)
	startEngine(t, worker)
	run, err := flow.Enqueue(ctx, worker, job, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the handler runs", func() bool { return calls.Load() == 1 })

	// Another engine, whose clock says the worker's lease expired, rescues
	// the run and claims it again.
	rescuer := openEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond, WorkerID: "rescuer", Clock: aheadClock{time.Hour}})
	flow.RegisterJob(rescuer, job)
	if n, err := rescuer.Rescue(ctx); err != nil || n != 1 {
		t.Fatalf("Rescue = %d, %v; want the run rescued", n, err)
	}
	startEngine(t, rescuer)

	_, err = run.Result(ctx)
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) || rb.Attempts != 1 {
		t.Fatalf("Result = %v, want the job failed for good after its 1 attempt", err)
	}
	close(release)
	if n := calls.Load(); n != 1 {
		t.Fatalf("handler called %d times, want MaxAttempts = 1", n)
	}
	dead, err := worker.DeadLetters(ctx, flow.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != run.ID() {
		t.Fatalf("dead letters = %v, want the rescued job", dead)
	}
	info, err := worker.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Steps) != 1 || info.Steps[0].Attempts != 1 {
		t.Fatalf("steps = %+v, want one step with 1 attempt", info.Steps)
	}
}

// Cancelling a run that no worker executes (in a queue no engine works, or
// a paused one) ends it cancelled within the call: Result returns at once.
func TestCancelOfARunNoWorkerExecutesEndsItAtOnce(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var ran atomic.Int32
	step := flow.Step[int, int]{Name: "work", Run: func(_ context.Context, n int) (int, error) { ran.Add(1); return n, nil }}
	wf := flow.Workflow[int, int]{Name: "idle", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, step, n) }}
	flow.Register(e, wf)
	startEngine(t, e)
	if err := e.PauseQueue(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	for _, queue := range []string{"nobody-works-it", "paused"} {
		run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Cancel(ctx); err != nil {
			t.Fatalf("%s: cancel: %v", queue, err)
		}
		info, err := e.Inspect(ctx, run.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != flow.StatusCancelled || info.FinishedAt.IsZero() {
			t.Fatalf("%s: after Cancel the run is %s, want cancelled", queue, info.Status)
		}
		short, cancel := context.WithTimeout(ctx, time.Second)
		_, err = run.Result(short)
		cancel()
		if !errors.Is(err, flow.ErrCancelled) {
			t.Fatalf("%s: Result = %v, want ErrCancelled at once", queue, err)
		}
		if err := run.Cancel(ctx); !errors.Is(err, flow.ErrRunFinished) {
			t.Fatalf("%s: second cancel = %v, want ErrRunFinished", queue, err)
		}
	}
	if ran.Load() != 0 {
		t.Fatal("a cancelled run's step ran")
	}
}

// A waiting run with a completed, compensable step is cancelled while no
// engine works its queue: it cannot end cancelled before its step is
// undone, so it becomes compensating, and the compensation runs once an
// engine picks it up, not before.
func TestCancelOfAnIdleRunWithWorkToUndoCompensatesWhenPickedUp(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var undone atomic.Int32
	reserve := flow.Step[int, int]{
		Name:       "reserve",
		Run:        func(_ context.Context, n int) (int, error) { return n, nil },
		Compensate: func(context.Context, int, int) error { undone.Add(1); return nil },
	}
	wf := flow.Workflow[int, int]{Name: "hold", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.Do(wc, reserve, n); err != nil {
			return 0, err
		}
		_, err := flow.Receive[string](wc, "never", 0)
		return n, err
	}}
	e1 := openEngine(t, path, nil)
	flow.Register(e1, wf)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits", func() bool {
		info, err := e1.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if err := e1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := e1.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusCompensating || undone.Load() != 0 {
		t.Fatalf("after Cancel: %s with %d compensations, want compensating with none run yet", info.Status, undone.Load())
	}
	e1.Close()

	e2 := openEngine(t, path, nil)
	flow.Register(e2, wf)
	startEngine(t, e2)
	handle, err := flow.Lookup(ctx, e2, wf, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handle.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("Result = %v, want cancelled", err)
	}
	if n := undone.Load(); n != 1 {
		t.Fatalf("compensation ran %d times, want once", n)
	}
}
