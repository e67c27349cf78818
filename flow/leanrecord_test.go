package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// leanPair registers the same job twice, with a full and a lean record,
// each failing its first fails attempts, and returns them.
func leanPair(e *flow.Engine, fails int32) (full, lean flow.Job[int]) {
	handler := func() func(context.Context, int) error {
		var calls atomic.Int32
		return func(context.Context, int) error {
			if calls.Add(1) <= fails {
				return errors.New("not yet")
			}
			return nil
		}
	}
	full = flow.Job[int]{Name: "full-job", Retry: &fastRetry, Handler: handler()}
	lean = flow.Job[int]{Name: "lean-job", Retry: &fastRetry, Handler: handler(), Record: flow.LeanRecord}
	flow.RegisterJob(e, full)
	flow.RegisterJob(e, lean)
	return full, lean
}

// shape is a history without what differs between two runs of two jobs:
// IDs, times, the job's name, the claim's owner and the retry's delay.
func shape(events []flow.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		detail := ""
		if ev.Kind == flow.EventStepRetried || ev.Kind == flow.EventStepFailed {
			detail, _, _ = strings.Cut(ev.Detail, ";")
		}
		step := strings.NewReplacer("full-job", "job", "lean-job", "job").Replace(ev.Step)
		out[i] = fmt.Sprintf("%s %s#%d a%d %s", ev.Kind, step, ev.Occurrence, ev.Attempt, detail)
	}
	return out
}

// sameHistory fails the test unless the lean run's history, as read
// back, has the shape of the full run's, and returns the lean one.
func sameHistory(t *testing.T, e *flow.Engine, fullID, leanID string) []flow.Event {
	t.Helper()
	fh, err := e.History(t.Context(), fullID)
	if err != nil {
		t.Fatal(err)
	}
	lh, err := e.History(t.Context(), leanID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shape(fh), shape(lh)) {
		t.Fatalf("lean history\n  %s\nwant the full one\n  %s", strings.Join(shape(lh), "\n  "), strings.Join(shape(fh), "\n  "))
	}
	return lh
}

// storedEvents counts the rows of the run's history in the database.
func storedEvents(t *testing.T, path, runID string) int {
	t.Helper()
	db, table := tableDB(t, path)
	var n int
	if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM %s WHERE run_id = $1", table("events")), runID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A lean job stores three events fewer than a full one on its happy path,
// and its history, read back, is the full one's: the same events in the
// same order, the derived ones with negative IDs and times from the
// records. Both claim paths are covered: the claim loop's (runs enqueued
// before the engine starts; on PostgreSQL its one-statement claim) and the
// claim in the start's own transaction (an idle started engine).
func TestLeanRecordHistoryIsTheFullOne(t *testing.T) {
	for _, tc := range []struct {
		name         string
		startedFirst bool
	}{{"claim loop", false}, {"claimed at start", true}} {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(t)
			e := openEngine(t, path, testConfig())
			full, lean := leanPair(e, 0)
			ctx := waitCtx(t)
			if tc.startedFirst {
				startEngine(t, e)
			}
			fr, err := flow.Enqueue(ctx, e, full, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			lr, err := flow.Enqueue(ctx, e, lean, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.startedFirst {
				startEngine(t, e)
			}
			for _, r := range []*flow.Run[struct{}]{fr, lr} {
				if _, err := r.Result(ctx); err != nil {
					t.Fatal(err)
				}
			}
			lh := sameHistory(t, e, fr.ID(), lr.ID())
			if f, l := storedEvents(t, path, fr.ID()), storedEvents(t, path, lr.ID()); l != f-3 {
				t.Errorf("stored events: lean %d, full %d; want 3 fewer", l, f)
			}
			derived := 0
			for i, ev := range lh {
				if ev.ID < 0 {
					derived++
				}
				if i > 0 && ev.At.Before(lh[i-1].At) {
					t.Errorf("event %d (%s) at %s, before the one before it (%s)", i, ev.Kind, ev.At, lh[i-1].At)
				}
			}
			if derived != 3 {
				t.Errorf("%d derived events (negative IDs), want 3: %v", derived, lh)
			}
			info, err := e.Inspect(ctx, lr.ID())
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Steps) != 1 || info.Steps[0].Status != "completed" || info.Steps[0].Attempts != 1 {
				t.Errorf("lean run's steps %+v, want one completed at attempt 1", info.Steps)
			}
		})
	}
}

// Time travel walks a lean run's derived events as it walks stored ones:
// after the derived claim the run is running, after the derived step
// start its step runs, after the derived completion the step is done.
func TestLeanRecordTimeTravel(t *testing.T) {
	e := openEngine(t, dbPath(t), testConfig())
	_, lean := leanPair(e, 0)
	ctx := waitCtx(t)
	r, err := flow.Enqueue(ctx, e, lean, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, e)
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := e.History(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, ev := range events {
		if ev.ID >= 0 {
			continue
		}
		st, err := e.InspectAfter(ctx, r.ID(), ev.ID)
		if err != nil {
			t.Fatalf("InspectAfter(%s, derived %s %d): %v", r.ID(), ev.Kind, ev.ID, err)
		}
		switch ev.Kind {
		case flow.EventRunClaimed:
			if st.Run.Status != flow.StatusRunning || st.Run.StartedAt.IsZero() {
				t.Errorf("after the derived claim: %s, started %s; want running, started", st.Run.Status, st.Run.StartedAt)
			}
		case flow.EventStepStarted:
			if len(st.Run.Steps) != 1 || st.Run.Steps[0].Status != "running" {
				t.Errorf("after the derived step start: steps %+v, want one running", st.Run.Steps)
			}
		case flow.EventStepCompleted:
			if len(st.Run.Steps) != 1 || st.Run.Steps[0].Status != "completed" || st.Run.Status != flow.StatusRunning {
				t.Errorf("after the derived completion: run %s, steps %+v; want running, one completed", st.Run.Status, st.Run.Steps)
			}
		default:
			t.Errorf("derived event of kind %s", ev.Kind)
		}
		checked++
	}
	if checked != 3 {
		t.Fatalf("%d derived events, want 3", checked)
	}
}

// A lean job that fails before it succeeds stores each failure and retry,
// later claims and its step's completion, as a full one does: the history reads the same, and
// the change feed, which reads only what is stored, sees the run start,
// every retry and the end.
func TestLeanRecordRetriesAreStored(t *testing.T) {
	path := dbPath(t)
	e := openEngine(t, path, testConfig())
	full, lean := leanPair(e, 2)
	ctx := waitCtx(t)
	startEngine(t, e)
	fr, err := flow.Enqueue(ctx, e, full, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := flow.Enqueue(ctx, e, lean, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*flow.Run[struct{}]{fr, lr} {
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sameHistory(t, e, fr.ID(), lr.ID())
	// Only the first claim's two events are left out: the completion of a
	// later attempt is stored, as its start was.
	if f, l := storedEvents(t, path, fr.ID()), storedEvents(t, path, lr.ID()); l != f-2 {
		t.Errorf("stored events: lean %d, full %d; want 2 fewer", l, f)
	}
	var kinds []string
	collectChanges(t, ctx, e, &flow.ChangesOptions{}, func(cs []flow.Change) bool {
		kinds = kinds[:0]
		for _, c := range cs {
			if c.RunID == lr.ID() {
				kinds = append(kinds, c.Kind)
			}
		}
		return slices.Contains(kinds, flow.EventRunCompleted)
	})
	if n := countOf(kinds, flow.EventStepRetried); n != 2 {
		t.Errorf("feed of the lean run: %d step_retried, want 2: %v", n, kinds)
	}
	if kinds[0] != flow.EventRunStarted || countOf(kinds, flow.EventRunClaimed) != 2 {
		t.Errorf("feed of the lean run %v: want run_started first and the two later claims", kinds)
	}
}

func countOf(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}

// An invalid Record is refused when the job is registered.
func TestLeanRecordInvalid(t *testing.T) {
	e := openEngine(t, dbPath(t), testConfig())
	err := flow.RegisterJobSafely(e, flow.Job[int]{Name: "j", Record: 7, Handler: func(context.Context, int) error { return nil }})
	if err == nil || !strings.Contains(err.Error(), "unknown Record 7") {
		t.Fatalf("RegisterJobSafely = %v, want an unknown Record error", err)
	}
}

// A lean job whose first attempt is interrupted (its engine stops before
// the attempt ends: the run is given back) and which another engine then
// completes reads the same history as a full job through the same.
func TestLeanRecordInterruptedAttempt(t *testing.T) {
	path := dbPath(t)
	ctx := waitCtx(t)
	entered := make(chan string, 4)
	job := func(name string, record flow.JobRecord) flow.Job[int] {
		var calls atomic.Int32
		return flow.Job[int]{Name: name, Record: record, Retry: &fastRetry, Handler: func(ctx context.Context, _ int) error {
			if calls.Add(1) == 1 {
				entered <- name
				<-ctx.Done() // works until its engine stops
				return ctx.Err()
			}
			return nil
		}}
	}
	first := openEngine(t, path, testConfig())
	full, lean := job("full-job", flow.FullRecord), job("lean-job", flow.LeanRecord)
	flow.RegisterJob(first, full)
	flow.RegisterJob(first, lean)
	startEngine(t, first)
	fr, err := flow.Enqueue(ctx, first, full, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := flow.Enqueue(ctx, first, lean, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	<-entered
	stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_ = first.Stop(stopCtx) // interrupts both attempts: an error says so
	second := openEngine(t, path, testConfig())
	flow.RegisterJob(second, full)
	flow.RegisterJob(second, lean)
	startEngine(t, second)
	for _, id := range []string{fr.ID(), lr.ID()} {
		eventually(t, id+" completed", func() bool {
			info, err := second.Inspect(ctx, id)
			return err == nil && info.Status == flow.StatusCompleted
		})
	}
	sameHistory(t, second, fr.ID(), lr.ID())
	info, err := second.Inspect(ctx, lr.ID())
	if err != nil || len(info.Steps) != 1 || info.Steps[0].Attempts != 2 {
		t.Errorf("lean run's steps %+v, %v; want one, completed at attempt 2 (the interrupted one counts)", info.Steps, err)
	}
}
