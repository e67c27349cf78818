package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/flowlite/flowlite/internal/store"
)

// eventTests are the conformance tests of store.EventReader and
// store.EventTx; Exercise runs them with the others.
func eventTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Events", testEvents},
		{"EventsOfConcurrentWrites", testEventsOfConcurrentWrites},
		{"EventsUnderALease", testEventsUnderALease},
	}
}

func testEvents(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"), newRun("b"))
	// At decreases: the history is in append order, not time order.
	appended := []store.Event{
		{RunID: "a", At: base + 30, Kind: "run.started"},
		{RunID: "b", At: base + 29, Kind: "run.started"},
		{RunID: "a", At: base + 20, Kind: "step.failed", Step: "charge", Occurrence: 1, Attempt: 2, Detail: "card declined"},
		{RunID: "a", At: base + 10, Kind: "run.failed", Detail: "card declined"},
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, e := range appended[:2] {
			if err := tx.EventAppend(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, e := range appended[2:] {
			if err := tx.EventAppend(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	for run, want := range map[string][]store.Event{
		"a": {appended[0], appended[2], appended[3]},
		"b": {appended[1]},
	} {
		got, err := s.Reader().EventList(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("run %s has %d events, want %d: %+v", run, len(got), len(want), got)
		}
		var last int64
		for i := range got {
			if got[i].ID <= last {
				t.Errorf("run %s event %d has ID %d, not above %d", run, i, got[i].ID, last)
			}
			last = got[i].ID
			w := want[i]
			w.ID = got[i].ID
			if d := diff(w, got[i]); d != "" {
				t.Errorf("run %s event %d: %s", run, i, d)
			}
		}
	}
	err := s.Write(t.Context(), func(tx store.Tx) error {
		return tx.EventAppend(t.Context(), store.Event{RunID: "ghost", At: base, Kind: "run.started"})
	})
	if err == nil {
		t.Error("event of an unknown run was appended")
	}
	// Among several events of one write, one of an unknown run fails the
	// write and none is kept.
	err = s.Write(t.Context(), func(tx store.Tx) error {
		for _, id := range []string{"b", "ghost", "b"} {
			if err := tx.EventAppend(t.Context(), store.Event{RunID: id, At: base, Kind: "lost"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		t.Error("events with one of an unknown run were appended")
	}
	if got, err := s.Reader().EventList(t.Context(), "b"); err != nil || len(got) != 1 {
		t.Errorf("run b after a failed write of events: %+v, %v; want its one event", got, err)
	}
}

// Events of concurrent writes, some of which fail after appending, land in
// the order each write appended them, values intact, and those of a failed
// write never land, however the writes were batched together. The IDs of
// one write's events grow, but need not be consecutive: where writes run
// side by side (PostgreSQL), their events take IDs from one sequence in
// turns.
func testEventsOfConcurrentWrites(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"))
	const writers = 20
	detail := func(w, i int) string { return fmt.Sprintf("w%02d e%d \"quoted\"\n\tüñí €", w, i) }
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = s.Write(t.Context(), func(tx store.Tx) error {
				for i := range 3 {
					e := store.Event{RunID: "a", At: base + int64(w), Kind: "k", Step: "s", Occurrence: w, Attempt: i, Detail: detail(w, i)}
					if err := tx.EventAppend(t.Context(), e); err != nil {
						return err
					}
				}
				if w%3 == 0 {
					return errors.New("refused")
				}
				return nil
			})
		}()
	}
	wg.Wait()
	got, err := s.Reader().EventList(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	byWriter := map[int][]store.Event{}
	for _, e := range got {
		byWriter[e.Occurrence] = append(byWriter[e.Occurrence], e)
	}
	for w := range writers {
		evs := byWriter[w]
		if failed := w%3 == 0; failed {
			if errs[w] == nil || len(evs) != 0 {
				t.Errorf("writer %d: error %v, %d events; want its error and none", w, errs[w], len(evs))
			}
			continue
		}
		if errs[w] != nil || len(evs) != 3 {
			t.Fatalf("writer %d: error %v, %d events; want 3", w, errs[w], len(evs))
		}
		for i, e := range evs {
			if e.Attempt != i || e.Detail != detail(w, i) || e.At != base+int64(w) || e.Kind != "k" || e.Step != "s" ||
				(i > 0 && e.ID <= evs[i-1].ID) {
				t.Errorf("writer %d event %d: %+v", w, i, e)
			}
		}
	}
}

// testEventsUnderALease: EventAppendLeased appends only under the run's
// current lease, skipping (without failing the write) a lost lease and a
// run that is gone, in order with the events appended before it; and
// EventListKind returns one kind of a run's events, oldest first, of its
// current execution only.
func testEventsUnderALease(t *testing.T, s store.Store) {
	p := newRun("p")
	p.Queue = "queue-p"
	insert(t, s, p)
	r := claimQueue(t, s, p.Queue, "w-p", base)
	stale := r.Lease()
	stale.Fence--
	var appended []bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		appended = nil
		if err := tx.EventAppend(ctx, store.Event{RunID: "p", At: base + 1, Kind: "step_started", Step: "export", Attempt: 1}); err != nil {
			return err
		}
		for _, c := range []struct {
			l      store.Lease
			detail string
		}{
			{r.Lease(), `{"done":1}`},
			{stale, `{"done":2}`},
			{store.Lease{RunID: "ghost", Owner: "w-p", Fence: r.Fence}, `{"done":3}`},
			{r.Lease(), `{"done":4}`},
		} {
			ok, err := tx.EventAppendLeased(ctx, c.l, store.Event{RunID: c.l.RunID, At: base + 2, Kind: "step_progress", Step: "export", Attempt: 1, Detail: c.detail})
			if err != nil {
				return err
			}
			appended = append(appended, ok)
		}
		return nil
	})
	if want := []bool{true, false, false, true}; fmt.Sprint(appended) != fmt.Sprint(want) {
		t.Fatalf("EventAppendLeased appended %v, want %v (current lease, stale fence, unknown run, current lease)", appended, want)
	}
	all, err := s.Reader().EventList(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range all {
		kinds = append(kinds, e.Kind+e.Detail)
	}
	if got, want := fmt.Sprint(kinds[len(kinds)-3:]), `[step_started step_progress{"done":1} step_progress{"done":4}]`; got != want {
		t.Fatalf("history ends %s, want %s", got, want)
	}
	progress, err := s.Reader().EventListKind(t.Context(), "p", "step_progress")
	if err != nil {
		t.Fatal(err)
	}
	if len(progress) != 2 || progress[0].Detail != `{"done":1}` || progress[1].Detail != `{"done":4}` ||
		progress[0].ID >= progress[1].ID || progress[0].Step != "export" || progress[0].Attempt != 1 || progress[0].At != base+2 {
		t.Fatalf("EventListKind = %+v, want the two progress events in order", progress)
	}
	if none, err := s.Reader().EventListKind(t.Context(), "ghost", "step_progress"); err != nil || len(none) != 0 {
		t.Fatalf("EventListKind of an unknown run = %v, %v; want none", none, err)
	}

	// Once the run continued as new, only the new execution's events count.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.RunContinue(ctx, r.Lease(), store.RunContinueParams{Input: []byte(`{}`), Version: 1, Now: base + 3}); err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: "p", At: base + 3, Kind: "continued_as_new", Occurrence: 2})
	})
	if progress, err := s.Reader().EventListKind(t.Context(), "p", "step_progress"); err != nil || len(progress) != 0 {
		t.Fatalf("EventListKind after a continue = %+v, %v; want none of the ended execution's", progress, err)
	}
	r = claimQueue(t, s, p.Queue, "w-p", base+4)
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.EventAppendLeased(ctx, r.Lease(), store.Event{RunID: "p", At: base + 5, Kind: "step_progress", Step: "export", Attempt: 1, Detail: `{"done":5}`})
		return err
	})
	if progress, err := s.Reader().EventListKind(t.Context(), "p", "step_progress"); err != nil || len(progress) != 1 || progress[0].Detail != `{"done":5}` {
		t.Fatalf("EventListKind in the second execution = %+v, %v; want its one progress event", progress, err)
	}
}
