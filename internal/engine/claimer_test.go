package engine

import (
	"context"
	"database/sql"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

var onceKey = flowtype.WorkflowKey{Name: "once", Version: 1}

// newFirstStepEngine returns an engine, not started, whose workflow "once"
// declares its first step "work" (as a job does) and whose one attempt
// counts the calls of its body.
func newFirstStepEngine(t *testing.T, calls *atomic.Int32, onBody func()) (*Engine, store.Store) {
	t.Helper()
	s := openTestStore(t)
	e, err := New(s, Config{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	step := Step{
		Name: "work", Input: []byte("{}"), Retry: flowtype.RetryPolicy{MaxAttempts: 1},
		Run: func(context.Context, *sql.Tx) ([]byte, error) {
			calls.Add(1)
			if onBody != nil {
				onBody()
			}
			return []byte("{}"), nil
		},
	}
	err = e.Register(Workflow{
		Key:       onceKey,
		FirstStep: FirstStep{Name: "work", Input: []byte("{}")},
		Run: func(rc *RunContext, _ []byte) ([]byte, error) {
			return rc.Step(step)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, s
}

func eventKindsOf(t *testing.T, s store.Store, runID string) []string {
	t.Helper()
	events, err := s.Reader().EventList(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
	}
	return kinds
}

// The claim of a fresh run of a workflow with a declared first step
// records that step's first attempt, durably, before any body runs; the
// execution uses it and writes no step start of its own. The history is
// the one runStep alone would have written.
func TestClaimRecordsFirstAttempt(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var s store.Store
	var seen []store.Step
	var seenErr error
	e, s := newFirstStepEngine(t, &calls, func() { seen, seenErr = s.Reader().StepList(context.Background(), "r1") })
	ctx := t.Context()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	if _, err := e.StartRun(ctx, StartParams{ID: "r1", Workflow: onceKey, Input: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	run, err := e.Wait(ctx, "r1")
	if err != nil || run.Status != flowtype.StatusCompleted {
		t.Fatalf("run %s, %v; want completed", run.Status, err)
	}
	if seenErr != nil || len(seen) != 1 || seen[0].Name != "work" || seen[0].Status != store.StepRunning || seen[0].Attempts != 1 || string(seen[0].Input) != "{}" {
		t.Fatalf("steps as the body began = %+v, %v; want work running, attempt 1, input {}", seen, seenErr)
	}
	if calls.Load() != 1 {
		t.Errorf("body called %d times, want 1", calls.Load())
	}
	want := []string{flowtype.EventRunStarted, flowtype.EventRunClaimed, flowtype.EventStepStarted, flowtype.EventStepCompleted, flowtype.EventRunCompleted}
	if got := eventKindsOf(t, s, "r1"); !slices.Equal(got, want) {
		t.Errorf("history %v, want %v", got, want)
	}
	if st, err := s.Reader().StepList(ctx, "r1"); err != nil || st[0].Attempts != 1 || st[0].Status != store.StepCompleted {
		t.Errorf("step after the run = %+v, %v; want completed after 1 attempt", st, err)
	}
}

// A run whose claim recorded the first attempt but which is given back
// before its body runs (here: the engine is not running when the run is
// launched) gets the attempt back: with one attempt allowed, the body
// still runs once when the run is claimed again.
func TestGivenBackRunKeepsItsAttempt(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	e, s := newFirstStepEngine(t, &calls, nil)
	ctx := t.Context()
	if _, err := e.StartRun(ctx, StartParams{ID: "r1", Workflow: onceKey, Input: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	runs, err := e.claim(ctx, DefaultQueue, 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim = %v, %v", runs, err)
	}
	slots := e.slots[DefaultQueue]
	if !slots.TryAcquire(1) {
		t.Fatal("no free slot")
	}
	e.launch(runs[0], slots) // not running: the run is given back at once
	steps, err := s.Reader().StepList(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0].Attempts != 0 || steps[0].Status == store.StepRunning {
		t.Fatalf("steps after the give-back = %+v, want the attempt given back", steps)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(context.Background())
	run, err := e.Wait(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != flowtype.StatusCompleted || calls.Load() != 1 {
		t.Errorf("run %s after %d body calls, want completed after 1", run.Status, calls.Load())
	}
}

// The run a start returns without reading it back (insertedRun) is the run
// the store recorded.
func TestStartedRunIsTheRecordedRun(t *testing.T) {
	t.Parallel()
	e, s, clk := newQueueEngine(t)
	ctx := t.Context()
	p := StartParams{
		ID: "r1", Workflow: jobKey, Queue: "mail", Priority: 4, Input: []byte(`{"n":1}`),
		RunAt: clk.Now().Add(time.Minute), Deadline: clk.Now().Add(time.Hour), UniqueKey: "k",
		UniqueStates: store.AllStates(),
	}
	for _, start := range []func() (Started, error){
		func() (Started, error) { return e.StartRun(ctx, p) },
		func() (Started, error) {
			q := p
			q.ID, q.UniqueKey = "r2", "k2"
			sts, err := e.StartRuns(ctx, []StartParams{q})
			if err != nil {
				return Started{}, err
			}
			return sts[0], nil
		},
	} {
		st, err := start()
		if err != nil {
			t.Fatal(err)
		}
		recorded, err := s.Reader().RunGet(ctx, st.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(st.Run, recorded) {
			t.Errorf("started run\n%+v\nrecorded run\n%+v", st.Run, recorded)
		}
	}
}
