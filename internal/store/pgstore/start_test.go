package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestStartAlone checks the one-statement start against a start in Write:
// the run as RunInsert records it, its run_started event, and a ready wake
// once it committed; an ID that is taken writes nothing and reports false;
// a unique key, an event of another run and a closed store are refused.
func TestStartAlone(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{MaxConns: 2})
	l := listen(t, s)
	ctx := t.Context()
	p := store.RunInsertParams{
		ID: "r1", Workflow: order1, Queue: "emails", Priority: 2, Input: []byte(`{"to":"a"}`),
		RunAt: base + 5, Deadline: base + 100, Now: base,
	}
	started := store.Event{RunID: "r1", At: base + 1, Kind: "run_started", Detail: "first"}
	if ok, err := s.StartAlone(ctx, p, started); err != nil || !ok {
		t.Fatalf("StartAlone = %v, %v; want inserted", ok, err)
	}
	run, err := s.Reader().RunGet(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != flowtype.StatusPending || run.Workflow != order1.Name || run.Version != order1.Version ||
		run.Queue != "emails" || run.Priority != 2 || string(run.Input) != `{"to":"a"}` || run.RunAt != base+5 ||
		run.Deadline != base+100 || run.CreatedAt != base || run.UpdatedAt != base || run.LeaseOwner != "" ||
		run.UniqueKey != "" {
		t.Errorf("run recorded: %+v", run)
	}
	want := store.Wake{Kind: store.WakeReady, Queue: "emails", RunID: "r1", DueAt: base + 5}
	if w := l.next(t, 5*time.Second); w != want {
		t.Errorf("wake after the start = %+v, want %+v", w, want)
	}
	checkEvents := func(when string) {
		t.Helper()
		events, err := s.Reader().EventList(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || events[0].Kind != "run_started" || events[0].At != base+1 || events[0].Detail != "first" {
			t.Errorf("events %s: %+v; want the one run_started", when, events)
		}
	}
	checkEvents("after the start")

	again := started
	again.Detail = "second"
	if ok, err := s.StartAlone(ctx, p, again); err != nil || ok {
		t.Fatalf("StartAlone of a taken ID = %v, %v; want false", ok, err)
	}
	checkEvents("after a start of the taken ID")
	select {
	case w := <-l.wakes:
		t.Errorf("a start that inserted nothing woke %+v", w)
	case <-time.After(200 * time.Millisecond):
	}

	child := store.RunInsertParams{ID: "r1/c#0", Workflow: order1, Queue: "emails", Input: []byte(`1`), RunAt: base, ParentID: "r1", Now: base}
	if ok, err := s.StartAlone(ctx, child, store.Event{RunID: child.ID, At: base, Kind: "run_started"}); err != nil || !ok {
		t.Fatalf("StartAlone of a child = %v, %v; want inserted", ok, err)
	}
	if run, err := s.Reader().RunGet(ctx, child.ID); err != nil || run.ParentID != "r1" || run.Deadline != 0 {
		t.Errorf("child recorded: parent %q, deadline %d, %v; want parent r1, no deadline", run.ParentID, run.Deadline, err)
	}

	keyed := p
	keyed.ID, keyed.UniqueKey = "r2", "k"
	if _, err := s.StartAlone(ctx, keyed, store.Event{RunID: "r2", At: base, Kind: "run_started"}); err == nil {
		t.Error("StartAlone of a run with a unique key succeeded")
	}
	other := p
	other.ID = "r3"
	if _, err := s.StartAlone(ctx, other, started); err == nil {
		t.Error("StartAlone with the event of another run succeeded")
	}
	for _, id := range []string{"r2", "r3"} {
		if _, err := s.Reader().RunGet(ctx, id); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("run %s after a refused start: %v; want not found", id, err)
		}
	}
	s.Close()
	if _, err := s.StartAlone(ctx, other, store.Event{RunID: "r3", At: base, Kind: "run_started"}); !errors.Is(err, flowtype.ErrClosed) {
		t.Errorf("StartAlone on a closed store: %v; want ErrClosed", err)
	}
}
