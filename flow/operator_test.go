package flow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

func countRows(t *testing.T, path, query, id string) int {
	t.Helper()
	var n int
	if err := rawDB(t, path).QueryRow(query, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// DeleteRun deletes a finished run with its steps and history, which frees
// its unique key, and refuses, changing nothing, an unknown run, an
// unfinished one and the child of an unfinished parent.
func TestDeleteRun(t *testing.T) {
	t.Parallel()
	path := sqlitePath(t)
	e := openEngine(t, path, nil)
	job := emailJob(&recorder{})
	flow.RegisterJob(e, job)
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
	for _, table := range []string{"flowlite_steps", "flowlite_events", "flowlite_signals"} {
		if n := countRows(t, path, "SELECT count(*) FROM "+table+" WHERE run_id = ?", done.ID()); n != 0 {
			t.Errorf("%d rows of %s left for the deleted run", n, table)
		}
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
	child := enqueue(t, e, job, email{To: "c"}, nil)
	if _, err := child.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rawDB(t, path).Exec("UPDATE flowlite_runs SET parent_id = ? WHERE id = ?", later.ID(), child.ID()); err != nil {
		t.Fatal(err)
	}
	err = e.DeleteRun(ctx, child.ID())
	if !errors.Is(err, flow.ErrConflict) || !strings.Contains(err.Error(), "its parent "+later.ID()+" has not finished") {
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
