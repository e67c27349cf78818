package engine

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// fakeNotifier is a SQLite store that delivers the wakes a test sends,
// standing in for a database that notifies (pgstore's tests run the real
// one between two engines).
type fakeNotifier struct {
	store.Store
	wakes     chan store.Wake
	listening chan struct{} // closed when Listen starts
	stopped   chan struct{} // closed when Listen returns
}

func (f *fakeNotifier) Listen(ctx context.Context, fn func(store.Wake)) error {
	defer close(f.stopped)
	close(f.listening)
	for {
		select {
		case <-ctx.Done():
			return nil
		case w := <-f.wakes:
			fn(w)
		}
	}
}

// newNotifiedEngine starts an engine working queue "b" over a notifying
// store, polling every 10s so that only a wake makes it look for work
// after its first poll; body runs its workflow.
func newNotifiedEngine(t *testing.T, body WorkflowFunc) (*Engine, *fakeNotifier) {
	t.Helper()
	s := openTestStore(t)
	f := &fakeNotifier{Store: s, wakes: make(chan store.Wake), listening: make(chan struct{}), stopped: make(chan struct{})}
	e, err := New(f, Config{
		Queues: map[string]int{"b": 2}, PollInterval: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(Workflow{Key: jobKey, Run: body}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Error(err)
		}
		select {
		case <-f.stopped:
		default:
			t.Error("Stop returned while the listener still ran")
		}
	})
	<-f.listening
	time.Sleep(100 * time.Millisecond) // past the claimer's first look
	return e, f
}

// insertElsewhere inserts a due run of queue b as another process would:
// through the store, without this engine knowing.
func insertElsewhere(t *testing.T, s store.Store, id string) {
	t.Helper()
	insertElsewhereAt(t, s, id, time.Now())
}

func insertElsewhereAt(t *testing.T, s store.Store, id string, at time.Time) {
	t.Helper()
	err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.RunInsert(t.Context(), store.RunInsertParams{
			ID: id, Workflow: jobKey, Queue: "b", Input: []byte(`{}`), RunAt: at.UnixMilli(), Now: time.Now().UnixMilli(),
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadyWakeClaimsAtOnce(t *testing.T) {
	t.Parallel()
	ran := make(chan string, 4)
	_, f := newNotifiedEngine(t, func(rc *RunContext, _ []byte) ([]byte, error) {
		ran <- rc.RunID()
		return nil, nil
	})
	insertElsewhere(t, f.Store, "r1")
	select {
	case id := <-ran:
		t.Fatalf("run %s claimed without a wake or a poll", id)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	f.wakes <- store.Wake{Kind: store.WakeReady, Queue: "b", RunID: "r1", DueAt: time.Now().UnixMilli()}
	select {
	case <-ran:
		t.Logf("claimed %s after the wake", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("the ready wake did not make the engine claim the run")
	}

	// A wake for a queue the engine does not work, or of a kind it does
	// not know, changes nothing and breaks nothing.
	f.wakes <- store.Wake{Kind: store.WakeReady, Queue: "elsewhere"}
	f.wakes <- store.Wake{Kind: "from-the-future", Queue: "b"}

	// A WakeAll (the listener reconnected) looks in every queue.
	insertElsewhere(t, f.Store, "r2")
	f.wakes <- store.Wake{Kind: store.WakeAll}
	select {
	case id := <-ran:
		if id != "r2" {
			t.Fatalf("ran %s, want r2", id)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a WakeAll did not make the engine claim the run")
	}

	// A run due soon (within a poll) is looked for when it is due.
	due := time.Now().Add(500 * time.Millisecond)
	insertElsewhereAt(t, f.Store, "r3", due)
	f.wakes <- store.Wake{Kind: store.WakeReady, Queue: "b", RunID: "r3", DueAt: due.UnixMilli()}
	select {
	case <-ran:
		if early := time.Until(due); early > 0 {
			t.Fatalf("claimed %s before it was due", early)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a ready wake for a run due in 500ms did not make the engine claim it when due")
	}
}

func TestCancelWakeCancelsRunHere(t *testing.T) {
	t.Parallel()
	running := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	e, f := newNotifiedEngine(t, func(rc *RunContext, _ []byte) ([]byte, error) {
		return rc.Step(Step{Name: "block", Input: []byte(`{}`), Run: func(ctx context.Context, _ *sql.Tx) ([]byte, error) {
			running <- struct{}{}
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return nil, ctx.Err()
		}})
	})
	insertElsewhere(t, f.Store, "c1")
	f.wakes <- store.Wake{Kind: store.WakeReady, Queue: "b", RunID: "c1"}
	select {
	case <-running:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not start")
	}
	// Another process requested the cancellation: the request is in the
	// store before the wake is sent.
	err := f.Store.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.RunRequestCancel(t.Context(), "c1", time.Now().UnixMilli())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f.wakes <- store.Wake{Kind: store.WakeCancel, Queue: "b", RunID: "c1"}
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		t.Fatal("the cancel wake did not cancel the run executing here (its heartbeat is 10s away)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	run, err := e.Wait(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != flowtype.StatusCancelled {
		t.Fatalf("run is %s, want cancelled", run.Status)
	}
}
