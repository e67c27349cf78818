package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// DeleteRun deletes a finished run with its steps and history, which frees
// its unique key, and refuses, changing nothing, an unknown run, an
// unfinished one and the child of an unfinished parent. That the deleted
// run's steps, events and signals go with it is the store's: storetest's
// RunDeleteOne checks it on every adapter.
func TestDeleteRun(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
	kid := doubler("delete-kid", 1)
	parent := flow.Workflow[int, int]{Name: "delete-parent", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.StartChild(wc, kid, n, &flow.ChildOptions{RunID: "kid-of-a-sleeper"}); err != nil {
			return 0, err
		}
		return n, flow.Sleep(wc, time.Hour) // unfinished while the test runs
	}}
	flow.Register(e, kid)
	flow.Register(e, parent)
	startEngine(t, e)
	ctx := waitCtx(t)
	opts := &flow.EnqueueOptions{UniqueKey: "k", UniqueStates: riverDefault()}

	done := enqueue(t, e, job, email{To: "a"}, opts)
	if _, err := done.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteRun(ctx, done.ID()); err != nil {
		t.Fatalf("delete a completed run: %v", err)
	}
	if _, err := e.Inspect(ctx, done.ID()); !errors.Is(err, flow.ErrRunNotFound) {
		t.Errorf("inspect a deleted run: %v, want ErrRunNotFound", err)
	}
	if _, err := e.History(ctx, done.ID()); !errors.Is(err, flow.ErrRunNotFound) {
		t.Errorf("history of a deleted run: %v, want ErrRunNotFound", err)
	}
	if r := enqueue(t, e, job, email{To: "a"}, opts); r.Existing() {
		t.Errorf("the deleted run's unique key is still taken by %s", r.ID())
	}

	if err := e.DeleteRun(ctx, "no-such-run"); !errors.Is(err, flow.ErrRunNotFound) || !strings.Contains(err.Error(), "no-such-run") {
		t.Errorf("delete an unknown run: %v", err)
	}

	later := enqueue(t, e, job, email{To: "b"}, &flow.EnqueueOptions{Delay: time.Hour})
	before := eventKinds(t, e, later.ID())
	err := e.DeleteRun(ctx, later.ID())
	if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "run is pending, not finished") {
		t.Errorf("delete a pending run: %v", err)
	}
	if got := eventKinds(t, e, later.ID()); !slices.Equal(got, before) {
		t.Errorf("refused delete changed the history: %v, was %v", got, before)
	}

	// A finished child of an unfinished parent stays: the parent may still
	// read its outcome.
	sleeper, err := flow.Start(ctx, e, parent, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	var child *flow.Run[int]
	eventually(t, "the child to be started", func() bool {
		child, err = flow.Lookup(ctx, e, kid, "kid-of-a-sleeper")
		return err == nil
	})
	if _, err := child.Result(ctx); err != nil {
		t.Fatal(err)
	}
	err = e.DeleteRun(ctx, child.ID())
	if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "its parent "+sleeper.ID()+" has not finished") {
		t.Errorf("delete the child of an unfinished parent: %v", err)
	}
	if _, err := e.Inspect(ctx, child.ID()); err != nil {
		t.Errorf("refused delete removed the child: %v", err)
	}
}

// RunNow makes a delayed run, or one backing off before its next attempt,
// due now; it refuses running, finished and unknown runs, changing nothing.
func TestRunNow(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var calls atomic.Int32
	release := make(chan struct{})
	var attempts sync.Map // subject → attempt numbers seen
	job := flow.Job[email]{
		Name:  "run-now",
		Retry: &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Hour, MaxInterval: time.Hour},
		Handler: func(ctx context.Context, m email) error {
			calls.Add(1)
			info, _ := flow.Attempt(ctx)
			prev, _ := attempts.LoadOrStore(m.Subject, []int{})
			attempts.Store(m.Subject, append(prev.([]int), info.Attempt))
			switch m.Subject {
			case "flaky":
				if info.Attempt == 1 {
					return errors.New("try again")
				}
			case "block":
				<-release
			}
			return nil
		},
	}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)

	delayed, err := flow.Enqueue(ctx, e, job, email{Subject: "delayed"}, &flow.EnqueueOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RunNow(ctx, delayed.ID()); err != nil {
		t.Fatalf("run a delayed run now: %v", err)
	}
	if _, err := delayed.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if kinds := eventKinds(t, e, delayed.ID()); !slices.Contains(kinds, flow.EventRunMadeDue) {
		t.Errorf("history %v lacks %s", kinds, flow.EventRunMadeDue)
	}

	flaky, err := flow.Enqueue(ctx, e, job, email{Subject: "flaky"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first attempt failed", func() bool {
		info, err := e.Inspect(ctx, flaky.ID())
		return err == nil && info.Status == flow.StatusPending && len(info.Steps) == 1 && info.Steps[0].Status == "retrying"
	})
	if err := e.RunNow(ctx, flaky.ID()); err != nil {
		t.Fatalf("run a backing-off run now: %v", err)
	}
	if _, err := flaky.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := attempts.Load("flaky"); !slices.Equal(got.([]int), []int{1, 2}) {
		t.Errorf("attempts of the backing-off run: %v, want [1 2]", got)
	}

	// Refusals.
	err = e.RunNow(ctx, delayed.ID())
	if !errors.Is(err, flow.ErrRunFinished) || !strings.Contains(err.Error(), "run is completed") {
		t.Errorf("run a completed run now: %v", err)
	}
	blocked, err := flow.Enqueue(ctx, e, job, email{Subject: "block"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the handler runs", func() bool {
		info, err := e.Inspect(ctx, blocked.ID())
		return err == nil && info.Status == flow.StatusRunning && slices.Contains(eventKinds(t, e, blocked.ID()), flow.EventStepStarted)
	})
	before := eventKinds(t, e, blocked.ID())
	err = e.RunNow(ctx, blocked.ID())
	if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "run is running, not pending") {
		t.Errorf("run a running run now: %v", err)
	}
	if got := eventKinds(t, e, blocked.ID()); !slices.Equal(got, before) {
		t.Errorf("refused run-now changed the history: %v, was %v", got, before)
	}
	close(release)
	if _, err := blocked.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.RunNow(ctx, "no-such-run"); !errors.Is(err, flow.ErrRunNotFound) || !strings.Contains(err.Error(), "no-such-run") {
		t.Errorf("run an unknown run now: %v", err)
	}
}

// A handler that snoozes is called again later without using an attempt:
// with MaxAttempts 1, five snoozes still leave the sixth call its attempt.
func TestJobSnooze(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var mu sync.Mutex
	var seen []int
	job := flow.Job[email]{
		Name:        "snoozer",
		MaxAttempts: 1,
		Handler: func(ctx context.Context, _ email) error {
			info, _ := flow.Attempt(ctx)
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, info.Attempt)
			if len(seen) <= 5 {
				return flow.JobSnooze(10 * time.Millisecond)
			}
			return nil
		},
	}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)
	run, err := flow.Enqueue(ctx, e, job, email{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatalf("snoozing job: %v", err)
	}
	mu.Lock()
	if !slices.Equal(seen, []int{1, 1, 1, 1, 1, 1}) {
		t.Errorf("attempt numbers %v, want six calls as attempt 1", seen)
	}
	mu.Unlock()
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Steps[0].Attempts != 1 {
		t.Errorf("step attempts %d, want 1", info.Steps[0].Attempts)
	}
	events, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var snoozes int
	for _, ev := range events {
		if ev.Kind == flow.EventStepSnoozed {
			snoozes++
			if ev.Detail != "snoozed for 10ms" {
				t.Errorf("snooze event detail %q", ev.Detail)
			}
		}
	}
	if snoozes != 5 {
		t.Errorf("%d snooze events, want 5", snoozes)
	}
	if err := flow.JobSnooze(-time.Second); err == nil || !strings.Contains(err.Error(), "negative duration -1s") {
		t.Errorf("JobSnooze(-1s) = %v, want an error naming the duration", err)
	}
}

// A handler that cancels its own run ends it cancelled, not failed: no
// retry, no dead letter, and Result says why.
func TestJobCancel(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var calls atomic.Int32
	job := flow.Job[email]{
		Name:        "canceller",
		MaxAttempts: 5,
		Handler: func(context.Context, email) error {
			calls.Add(1)
			return flow.JobCancel(errors.New("account closed"))
		},
	}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)
	run, err := flow.Enqueue(ctx, e, job, email{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(ctx)
	var ce *flow.CancelledError
	if !errors.As(err, &ce) || !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("Result = %v, want a *CancelledError", err)
	}
	if !strings.Contains(ce.Reason, "account closed") || !strings.Contains(ce.Reason, "step canceller") {
		t.Errorf("cancel reason %q lacks the step and its reason", ce.Reason)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handler called %d times, want 1", n)
	}
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusCancelled || !strings.Contains(info.Error, "account closed") {
		t.Errorf("run %s with error %q, want cancelled with the reason", info.Status, info.Error)
	}
	dead, err := e.DeadLetters(ctx, flow.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 0 {
		t.Errorf("%d dead letters, want none", len(dead))
	}
}

// RunAt moves a pending run's due time both ways, records it, and treats a
// time in the past as RunNow.
func TestRunAt(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var ran sync.Map // subject → time the handler ran
	job := flow.Job[email]{
		Name: "run-at",
		Handler: func(_ context.Context, m email) error {
			ran.Store(m.Subject, time.Now())
			return nil
		},
	}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	ctx := waitCtx(t)

	// Later: a delayed run is put off further, and stays pending.
	later, err := flow.Enqueue(ctx, e, job, email{Subject: "later"}, &flow.EnqueueOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := e.Inspect(ctx, later.ID())
	at := before.RunAt.Add(time.Hour).Truncate(time.Millisecond)
	if err := e.RunAt(ctx, later.ID(), at); err != nil {
		t.Fatalf("put a delayed run off: %v", err)
	}
	info, _ := e.Inspect(ctx, later.ID())
	if !info.RunAt.Equal(at) || info.Status != flow.StatusPending {
		t.Fatalf("after RunAt: due %s, %s; want %s, pending", info.RunAt, info.Status, at)
	}
	history, err := e.History(ctx, later.ID())
	if err != nil {
		t.Fatal(err)
	}
	last := history[len(history)-1]
	if last.Kind != flow.EventRunRescheduled || !strings.Contains(last.Detail, at.UTC().Format(time.RFC3339Nano)) ||
		!strings.Contains(last.Detail, "was due at "+before.RunAt.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("last event %s %q, want %s naming both due times", last.Kind, last.Detail, flow.EventRunRescheduled)
	}

	// The change feed carries it.
	var fed bool
	for c, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		fed = fed || (c.RunID == later.ID() && c.Kind == flow.EventRunRescheduled && c.Detail == last.Detail)
	}
	if !fed {
		t.Errorf("the change feed lacks the %s event", flow.EventRunRescheduled)
	}

	// Earlier: the same run brought forward to a near time runs then, not
	// before.
	set := time.Now()
	soon := set.Add(300 * time.Millisecond)
	if err := e.RunAt(ctx, later.ID(), soon); err != nil {
		t.Fatalf("bring a delayed run forward: %v", err)
	}
	if _, err := later.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := ran.Load("later"); v.(time.Time).Before(soon.Truncate(time.Millisecond)) {
		t.Errorf("ran %s after RunAt, before its new due time (%s)", v.(time.Time).Sub(set), soon.Sub(set))
	}

	// A run due already, in a queue no engine works, is put off.
	idle, err := flow.Enqueue(ctx, e, job, email{Subject: "idle"}, &flow.EnqueueOptions{Queue: "nobody-works-it"})
	if err != nil {
		t.Fatal(err)
	}
	put := time.Now().Add(10 * time.Minute).Truncate(time.Millisecond)
	if err := e.RunAt(ctx, idle.ID(), put); err != nil {
		t.Fatalf("put a due run off: %v", err)
	}
	if info, _ := e.Inspect(ctx, idle.ID()); !info.RunAt.Equal(put) {
		t.Errorf("put off to %s, want %s", info.RunAt, put)
	}
	// A time in the past is now: recorded as run_made_due.
	if err := e.RunAt(ctx, idle.ID(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatalf("RunAt in the past: %v", err)
	}
	info, _ = e.Inspect(ctx, idle.ID())
	if !info.RunAt.Before(put) || info.RunAt.After(time.Now()) {
		t.Errorf("RunAt in the past: due %s, want now", info.RunAt)
	}
	if kinds := eventKinds(t, e, idle.ID()); kinds[len(kinds)-1] != flow.EventRunMadeDue {
		t.Errorf("RunAt in the past recorded %v, want %s last", kinds, flow.EventRunMadeDue)
	}

	// Refusals change nothing.
	refused := []struct {
		name string
		id   string
		at   time.Time
		want error
		says string
	}{
		{"completed", later.ID(), time.Now().Add(time.Hour), flow.ErrRunFinished, "run is completed"},
		{"unknown", "no-such-run", time.Now().Add(time.Hour), flow.ErrRunNotFound, "no-such-run"},
		{"zero time", idle.ID(), time.Time{}, nil, "the time is zero"},
	}
	for _, c := range refused {
		var before []string
		if c.id != "no-such-run" {
			before = eventKinds(t, e, c.id)
		}
		err := e.RunAt(ctx, c.id, c.at)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: RunAt = %v, want %v saying %q", c.name, err, c.want, c.says)
		}
		if c.id != "no-such-run" && !slices.Equal(eventKinds(t, e, c.id), before) {
			t.Errorf("%s: a refused RunAt changed the history", c.name)
		}
	}
}

// RunAt refuses a run that is not waiting to be claimed: running, waiting
// for a signal.
func TestRunAtRefusesUnclaimableStates(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	release := make(chan struct{})
	block := flow.Job[email]{Name: "run-at-block", Handler: func(context.Context, email) error { <-release; return nil }}
	flow.RegisterJob(e, block)
	wf := flow.Workflow[int, string]{Name: "run-at-wait", Run: func(wc flow.Context, _ int) (string, error) {
		return flow.Receive[string](wc, "go", 0)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	running, err := flow.Enqueue(ctx, e, block, email{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "one run running and one waiting", func() bool {
		a, _ := e.Inspect(ctx, running.ID())
		b, _ := e.Inspect(ctx, waiting.ID())
		return a.Status == flow.StatusRunning && b.Status == flow.StatusWaiting
	})
	for _, c := range []struct{ id, says string }{
		{running.ID(), "run is running, not pending"},
		{waiting.ID(), "run is waiting, not pending"},
	} {
		before, _ := e.Inspect(ctx, c.id)
		err := e.RunAt(ctx, c.id, time.Now().Add(time.Hour))
		if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("RunAt = %v, want ErrConflict saying %q", err, c.says)
		}
		if after, _ := e.Inspect(ctx, c.id); !after.RunAt.Equal(before.RunAt) || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("a refused RunAt changed run %s", c.id)
		}
	}
	close(release)
	if _, err := flow.Signal(ctx, e, waiting.ID(), "go", "x", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := waiting.Result(ctx); err != nil {
		t.Fatal(err)
	}
}

// An operator putting runs off while engines claim them: each run either
// was put off (and did not run) or was claimed first (and RunAt said so),
// never both.
func TestRunAtRacingClaims(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	var calls sync.Map // subject → *atomic.Int32
	job := flow.Job[email]{Name: "run-at-race", Handler: func(_ context.Context, m email) error {
		n, _ := calls.LoadOrStore(m.Subject, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		return nil
	}}
	engines := make([]*flow.Engine, 2)
	for i := range engines {
		engines[i] = openEngine(t, path, nil)
		flow.RegisterJob(engines[i], job)
		startEngine(t, engines[i])
	}
	ctx := waitCtx(t)
	const n = 60
	ids := make([]string, n)
	runs := make([]*flow.Run[struct{}], n)
	for i := range n {
		run, err := flow.Enqueue(ctx, engines[0], job, email{Subject: fmt.Sprint(i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], runs[i] = run.ID(), run
		// Put it off at once, racing the engines' claims of it.
		err = engines[1].RunAt(ctx, run.ID(), time.Now().Add(time.Hour))
		switch {
		case err == nil:
			ids[i] = "off:" + run.ID()
		case errors.Is(err, flow.ErrConflict), errors.Is(err, flow.ErrRunFinished):
		default:
			t.Fatalf("RunAt %s: %v", run.ID(), err)
		}
	}
	off := 0
	for i, id := range ids {
		if put, ok := strings.CutPrefix(id, "off:"); ok {
			off++
			info, err := engines[0].Inspect(ctx, put)
			if err != nil {
				t.Fatal(err)
			}
			if info.Status != flow.StatusPending || time.Until(info.RunAt) < 50*time.Minute {
				t.Errorf("run %s put off is %s, due %s", put, info.Status, info.RunAt)
			}
			continue
		}
		if _, err := runs[i].Result(ctx); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		if c, _ := calls.Load(fmt.Sprint(i)); c == nil || c.(*atomic.Int32).Load() != 1 {
			t.Errorf("run %s claimed before RunAt ran %v times, want 1", id, c)
		}
	}
	time.Sleep(100 * time.Millisecond)
	for i, id := range ids {
		if strings.HasPrefix(id, "off:") {
			if c, ok := calls.Load(fmt.Sprint(i)); ok {
				t.Errorf("run %s was put off and still ran %d times", id, c.(*atomic.Int32).Load())
			}
		}
	}
	t.Logf("%d of %d runs put off, the others claimed first", off, n)
}
