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
