package flow_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// seen records where a context value was read, and what it was.
type seen struct {
	mu   sync.Mutex
	what []string
}

func (s *seen) add(ctx context.Context, where string) {
	v, ok := flow.Value(ctx, "tenant")
	if !ok {
		v = "<none>"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.what = append(s.what, where+"="+v)
}

func (s *seen) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.what)
}

// Values put in the starter's context reach every execution of the run:
// the body on each replay (after a durable sleep, in a new execution), a
// step, its compensation, a child's body and step, and a run a step starts
// from its own context; Inspect shows them. The starter's context is long
// gone by then: they come from the run's record.
func TestContextValuesPropagate(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var s seen
	child := flow.Workflow[int, int]{Name: "values-child", Run: func(wc flow.Context, n int) (int, error) {
		s.add(wc, "child body")
		return flow.Do(wc, flow.Step[int, int]{Name: "child-step", Run: func(ctx context.Context, n int) (int, error) {
			s.add(ctx, "child step")
			return n, nil
		}}, n)
	}}
	spawned := flow.Workflow[int, int]{Name: "values-spawned", Run: func(wc flow.Context, n int) (int, error) {
		s.add(wc, "spawned body")
		return n, nil
	}}
	reserve := flow.Step[int, int]{
		Name: "reserve",
		Run: func(ctx context.Context, n int) (int, error) {
			s.add(ctx, "step")
			// A run a step starts from its own context carries the values on.
			_, err := flow.Start(ctx, e, spawned, n, &flow.StartOptions{RunID: "spawned"})
			return n, err
		},
		Compensate: func(ctx context.Context, _ int, _ int) error {
			s.add(ctx, "compensation")
			return nil
		},
	}
	wf := flow.Workflow[int, int]{Name: "values-parent", Run: func(wc flow.Context, n int) (int, error) {
		s.add(wc, "body")
		if _, err := flow.Do(wc, reserve, n); err != nil {
			return 0, err
		}
		if err := flow.Sleep(wc, 10*time.Millisecond); err != nil {
			return 0, err
		}
		if _, err := flow.Call(wc, child, n, nil); err != nil {
			return 0, err
		}
		return 0, errors.New("undo it all")
	}}
	for _, w := range []flow.Workflow[int, int]{wf, child, spawned} {
		flow.Register(e, w)
	}
	startEngine(t, e)
	starter, cancel := context.WithCancel(flow.WithValues(context.Background(), map[string]string{"tenant": "acme", "trace": "t-1"}))
	r, err := flow.Start(starter, e, wf, 1, &flow.StartOptions{RunID: "v"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t)
	if _, err := r.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("Result = %v, want rolled back", err)
	}
	sp, err := flow.Lookup(ctx, e, spawned, "spawned")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Result(ctx); err != nil {
		t.Fatal(err)
	}
	got := s.get()
	for _, want := range []string{"body=acme", "step=acme", "compensation=acme", "child body=acme", "child step=acme", "spawned body=acme"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not seen; saw %v", want, got)
		}
	}
	bodies := 0
	for _, g := range got {
		if strings.HasPrefix(g, "body=") {
			bodies++
			if g != "body=acme" {
				t.Errorf("an execution of the body saw %s", g)
			}
		}
	}
	if bodies < 2 {
		t.Errorf("the body ran %d times, want a replay after the sleep", bodies)
	}
	for _, id := range []string{"v", "v/flow.child:values-child#0", "spawned"} {
		info, err := e.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Values["tenant"] != "acme" || info.Values["trace"] != "t-1" || len(info.Values) != 2 {
			t.Errorf("run %s: values %v", id, info.Values)
		}
	}
	if d := historyOf(t, e, "v")[0].Detail; !strings.Contains(d, "context values tenant, trace") {
		t.Errorf("run_started detail %q does not name the values", d)
	}
}

// A run started without values has none, and reads none; a bad key fails
// the start and records nothing.
func TestContextValuesAbsentAndBad(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	var s seen
	wf := flow.Workflow[int, int]{Name: "no-values", Run: func(wc flow.Context, n int) (int, error) {
		s.add(wc, "body")
		return n, nil
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	r, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.get(); !slices.Equal(got, []string{"body=<none>"}) {
		t.Errorf("saw %v", got)
	}
	if info, _ := e.Inspect(ctx, r.ID()); info.Values != nil {
		t.Errorf("values %v, want none", info.Values)
	}
	for _, key := range []string{"", "new\nline"} {
		_, err := flow.Start(flow.WithValue(ctx, key, "x"), e, wf, 2, nil)
		var ne *flow.NameError
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), "context value key") {
			t.Errorf("Start with key %q = %v, want a NameError for the context value key", key, err)
		}
	}
	if n := totalRuns(t, e); n != 1 {
		t.Errorf("%d runs recorded, want 1", n)
	}
	// Outside a run, Value reads what WithValue put in.
	if v, ok := flow.Value(flow.WithValue(context.Background(), "k", "v"), "k"); !ok || v != "v" {
		t.Errorf("Value = %q, %v", v, ok)
	}
}

// An exported history carries the run's values, so a replay of it runs
// the code with them: a body whose calls depend on a value replays
// cleanly, and diverges once the values are taken out.
func TestContextValuesReplay(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[int, int]{Name: "tenant-branch", Run: func(wc flow.Context, n int) (int, error) {
		tenant, _ := flow.Value(wc, "tenant")
		return flow.Do(wc, flow.Step[int, int]{Name: "bill-" + tenant, Run: func(_ context.Context, n int) (int, error) { return n, nil }}, n)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx := waitCtx(t)
	r, err := flow.Start(flow.WithValue(ctx, "tenant", "acme"), e, wf, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	h, err := e.ExportHistory(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if h.Run.Values["tenant"] != "acme" {
		t.Fatalf("exported values %v", h.Run.Values)
	}
	if rep, err := e.Replay(ctx, h); err != nil || !rep.Returned {
		t.Fatalf("replay with the values = %+v, %v; want clean", rep, err)
	}
	h.Run.Values = nil
	if _, err := e.Replay(ctx, h); err == nil || !strings.Contains(err.Error(), "bill-") {
		t.Fatalf("replay without the values = %v, want a divergence at bill-", err)
	}
}
