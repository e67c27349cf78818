package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// batchCountingStore records the size of every RunFinishMany call, and
// fails the first failFirst of them with errInjected.
type batchCountingStore struct {
	store.Store
	mu        sync.Mutex
	batches   []int
	failFirst int
}

var errInjected = errors.New("injected write failure")

func (s *batchCountingStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Write(ctx, func(tx store.Tx) error { return fn(&batchCountingTx{Tx: tx, s: s}) })
}

type batchCountingTx struct {
	store.Tx
	s *batchCountingStore
}

func (t *batchCountingTx) RunFinishMany(ctx context.Context, items []store.RunFinishItem) ([]int, error) {
	t.s.mu.Lock()
	t.s.batches = append(t.s.batches, len(items))
	fail := len(t.s.batches) <= t.s.failFirst
	t.s.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return t.Tx.RunFinishMany(ctx, items)
}

func (s *batchCountingStore) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

// newBatchEngine returns a started engine over a counting store whose
// workflow "gate" runs one step, "work", which waits for release; the
// parent workflow "parent" starts one "gate" child and waits for it.
func newBatchEngine(t *testing.T, failFirst int, release <-chan struct{}, entered *sync.WaitGroup) (*Engine, *batchCountingStore) {
	t.Helper()
	base := openTestStore(t)
	s := &batchCountingStore{Store: base, failFirst: failFirst}
	e, err := New(s, Config{PollInterval: 10 * time.Millisecond, Queues: map[string]int{"default": 200}})
	if err != nil {
		t.Fatal(err)
	}
	work := Step{
		Name: "work", Input: []byte("{}"), Retry: flowtype.RetryPolicy{MaxAttempts: 1},
		Run: func(ctx context.Context, _ *sql.Tx) ([]byte, error) {
			entered.Done()
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return []byte(`"done"`), nil
		},
	}
	mustRegister(t, e, Workflow{
		Key:       flowtype.WorkflowKey{Name: "gate", Version: 1},
		FirstStep: FirstStep{Name: "work", Input: []byte("{}")},
		Run:       func(rc *RunContext, _ []byte) ([]byte, error) { return rc.Step(work) },
	})
	mustRegister(t, e, Workflow{
		Key: flowtype.WorkflowKey{Name: "parent", Version: 1},
		Run: func(rc *RunContext, _ []byte) ([]byte, error) {
			id, err := rc.StartChild(StartParams{Workflow: flowtype.WorkflowKey{Name: "gate", Version: 1}, Input: []byte("{}")})
			if err != nil {
				return nil, err
			}
			out, err := rc.AwaitChild(id)
			if err != nil {
				return nil, err
			}
			return out.Output, nil
		},
	})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e, s
}

// startGatesAndParent starts n runs of "gate", r000 and on, whose IDs it
// returns, and the run "p" of "parent".
func startGatesAndParent(t *testing.T, e *Engine, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("r%03d", i)
		if _, err := e.StartRun(t.Context(), StartParams{ID: id, Workflow: flowtype.WorkflowKey{Name: "gate", Version: 1}, Input: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := e.StartRun(t.Context(), StartParams{ID: "p", Workflow: flowtype.WorkflowKey{Name: "parent", Version: 1}, Input: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	return ids
}

func mustRegister(t *testing.T, e *Engine, wf Workflow) {
	t.Helper()
	if err := e.Register(wf); err != nil {
		t.Fatal(err)
	}
}

// waitSettled waits until every run of ids is finished and returns them.
func waitSettled(t *testing.T, s store.Store, ids []string) map[string]store.Run {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runs := make(map[string]store.Run, len(ids))
		for _, id := range ids {
			r, err := s.Reader().RunGet(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.Finished() {
				runs[id] = r
			}
		}
		if len(runs) == len(ids) {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs finished after 20s", len(runs), len(ids))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Runs that end at the same moment have their outcomes written together:
// fewer RunFinishMany calls than runs, every run completed with its step
// checkpointed, and each run's history exactly what a write of its own
// would have recorded, in that order.
func TestOutcomesOfRunsEndingTogetherAreBatched(t *testing.T) {
	t.Parallel()
	const n = 100
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(n + 1) // the gates and the child of "p"
	e, s := newBatchEngine(t, 0, release, &entered)
	ids := startGatesAndParent(t, e, n)
	entered.Wait() // every body runs: their outcomes come at once
	close(release)
	// The parent completes only if its child's batched outcome woke it.
	if p := waitSettled(t, s, []string{"p"})["p"]; p.Status != flowtype.StatusCompleted || string(p.Output) != `"done"` {
		t.Errorf("parent: status %s, output %s; want completed with its child's \"done\"", p.Status, p.Output)
	}
	runs := waitSettled(t, s, ids)
	for _, id := range ids {
		r := runs[id]
		if r.Status != flowtype.StatusCompleted || string(r.Output) != `"done"` || r.LeaseOwner != "" {
			t.Errorf("run %s: status %s, output %s, owner %q; want completed, \"done\", no owner", id, r.Status, r.Output, r.LeaseOwner)
		}
		st, err := s.Reader().StepList(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].Status != store.StepCompleted || string(st[0].Output) != `"done"` || st[0].Attempts != 1 {
			t.Errorf("run %s steps: %+v; want work completed once with \"done\"", id, st)
		}
		want := []string{flowtype.EventRunStarted, flowtype.EventRunClaimed, flowtype.EventStepStarted, flowtype.EventStepCompleted, flowtype.EventRunCompleted}
		if got := eventKindsOf(t, s, id); !slices.Equal(got, want) {
			t.Errorf("run %s history %v, want %v", id, got, want)
		}
	}
	sizes := s.sizes()
	total := 0
	for _, b := range sizes {
		total += b
	}
	if total != n+2 || len(sizes) >= n/2 {
		t.Errorf("outcome batches %v: %d runs in %d writes; want all %d runs in fewer than %d writes", sizes, total, len(sizes), n+2, n/2)
	}
}

// A batch whose write fails leaves every run in it as it was: each then
// records its outcome with a write of its own, and nothing is lost or
// written twice. A child's outcome, batched, still wakes its parent.
func TestFailedOutcomeBatchFallsBackToSingleWrites(t *testing.T) {
	t.Parallel()
	const n = 20
	release := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(n + 1)
	e, s := newBatchEngine(t, 1, release, &entered)
	ids := startGatesAndParent(t, e, n)
	entered.Wait()
	close(release)
	runs := waitSettled(t, s, append(slices.Clone(ids), "p"))
	for id, r := range runs {
		if r.Status != flowtype.StatusCompleted || string(r.Output) != `"done"` {
			t.Errorf("run %s: status %s, output %s; want completed with \"done\"", id, r.Status, r.Output)
		}
		kinds := eventKindsOf(t, s, id)
		if c := count(kinds, flowtype.EventRunCompleted); c != 1 {
			t.Errorf("run %s history %v: %d run_completed events, want 1", id, kinds, c)
		}
		if id != "p" && count(kinds, flowtype.EventStepCompleted) != 1 {
			t.Errorf("run %s history %v: want one step_completed", id, kinds)
		}
	}
	if sizes := s.sizes(); len(sizes) == 0 {
		t.Error("no outcome batch was written")
	}
}

func count(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}
