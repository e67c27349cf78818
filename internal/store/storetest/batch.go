package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// batchTests are the conformance tests of the multi-row writes,
// RunInsertMany and EventAppendMany; Exercise runs them with the others.
func batchTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RunInsertManyRecordsAsRunInsert", testRunInsertManyRecords},
		{"RunInsertManySkipsTakenIDsAndKeys", testRunInsertManySkips},
		{"RunInsertManyChunks", testRunInsertManyChunks},
		{"RunInsertManyRefusesBadStates", testRunInsertManyBadStates},
		{"RunInsertManyLargeBatches", testRunInsertManyLarge},
		{"EventAppendMany", testEventAppendMany},
	}
}

func insertMany(t *testing.T, s store.Store, ps []store.RunInsertParams) []bool {
	t.Helper()
	var inserted []bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		inserted, err = tx.RunInsertMany(ctx, ps)
		return err
	})
	if len(inserted) != len(ps) {
		t.Fatalf("RunInsertMany reported %d outcomes for %d runs", len(inserted), len(ps))
	}
	return inserted
}

// testRunInsertManyRecords checks that every field RunInsert records is
// recorded the same by RunInsertMany, bytes of the input included, and
// that the runs are claimed in the order of the batch.
func testRunInsertManyRecords(t *testing.T, s store.Store) {
	full := store.RunInsertParams{
		ID: "full", Workflow: order2, Queue: "emails", Priority: 3,
		Input: []byte("{\"to\":\"a@example.com\",\"note\":\"é \\\" \\u0000\"}\x00\xff"), RunAt: base + 10, Deadline: base + 99,
		ParentID: "parent", UniqueKey: "k1", UniqueStates: store.AllStates(), Now: base,
	}
	single := full
	single.ID, single.UniqueKey = "single", "k2"
	insert(t, s, newRun("parent"), single)
	batch := []store.RunInsertParams{full}
	for i := range 5 {
		batch = append(batch, newRun(fmt.Sprintf("b%d", i)))
	}
	if got := insertMany(t, s, batch); !slices.Equal(got, []bool{true, true, true, true, true, true}) {
		t.Fatalf("RunInsertMany = %v, want every run inserted", got)
	}
	want := get(t, s, "single")
	want.ID, want.UniqueKey = "full", "k1"
	got := get(t, s, "full")
	if d := diff(want, got); d != "" {
		t.Errorf("run inserted by RunInsertMany differs from one inserted by RunInsert: %s", d)
	}
	// Runs due at the same time are claimed in the order they were inserted.
	var claimed []string
	for range 6 {
		runs := claim(t, s, store.RunClaimParams{Queue: "q", Known: []flowtype.WorkflowKey{order1}, Owner: "w", Max: 1, Now: base, LeaseExpiresAt: base + 1000})
		claimed = append(claimed, ids(runs)...)
	}
	if want := []string{"parent", "b0", "b1", "b2", "b3", "b4"}; !slices.Equal(claimed, want) {
		t.Errorf("claimed %v, want %v", claimed, want)
	}
}

// testRunInsertManySkips checks each reason for skipping a run: an ID
// taken before the batch or earlier in it, a unique key held by an
// unfinished run, by an earlier run of the batch, or by a current hold.
func testRunInsertManySkips(t *testing.T, s store.Store) {
	insert(t, s, newRun("taken"), keyed("holder", "held"))
	settledRun(t, s, keyed("done", "period"), flowtype.StatusCompleted, base+1)
	if !takeHold(t, s, store.UniqueHoldParams{Workflow: order1.Name, Key: "period", RunID: "done", HeldUntil: base + 1_000, Now: base}) {
		t.Fatal("hold of a free key not taken")
	}
	batch := []store.RunInsertParams{
		newRun("a"),              // 0: new
		newRun("taken"),          // 1: ID taken before the batch
		keyed("b", "held"),       // 2: key held by an unfinished run
		keyed("c", "fresh"),      // 3: new key
		keyed("d", "fresh"),      // 4: key taken by item 3
		newRun("a"),              // 5: ID taken by item 0
		keyed("e", "period"),     // 6: key held by a current hold of a finished run
		keyed("f", "other"),      // 7: new
		keyed("g", "other-wf"),   // 8: new, in workflow invoice
		keyed("h", "other-wf-2"), // 9: new
	}
	batch[8].Workflow = invoice1
	batch[9].UniqueKey = "other-wf" // item 8's key, but item 8 is another workflow's: no collision
	want := []bool{true, false, false, true, false, false, false, true, true, true}
	if got := insertMany(t, s, batch); !slices.Equal(got, want) {
		t.Errorf("RunInsertMany = %v, want %v", got, want)
	}
	for _, id := range []string{"b", "d", "e"} {
		if _, err := s.Reader().RunGet(t.Context(), id); err == nil {
			t.Errorf("skipped run %s was recorded", id)
		}
	}
	if r := get(t, s, "taken"); r.Input == nil || string(r.Input) != `{"id":"taken"}` {
		t.Errorf("run with a taken ID changed: input %s", r.Input)
	}
	// Once the hold ended, the key is free for a batch.
	late := keyed("e", "period")
	late.Now = base + 1_000
	if got := insertMany(t, s, []store.RunInsertParams{late}); !got[0] {
		t.Error("run not inserted once the hold of its key ended")
	}
}

// testRunInsertManyChunks inserts more runs than one statement takes, with
// a repeated ID across the chunks, and checks the outcome of each.
func testRunInsertManyChunks(t *testing.T, s store.Store) {
	const n = 2500
	batch := make([]store.RunInsertParams, n)
	for i := range batch {
		batch[i] = newRun(fmt.Sprintf("r%04d", i))
	}
	batch[2400].ID = "r0010"
	got := insertMany(t, s, batch)
	for i, ok := range got {
		if ok != (i != 2400) {
			t.Errorf("run %d (%s): inserted %v", i, batch[i].ID, ok)
		}
	}
	counts, err := s.Reader().RunCountByStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if counts[flowtype.StatusPending] != n-1 {
		t.Errorf("%d pending runs, want %d", counts[flowtype.StatusPending], n-1)
	}
	if r := get(t, s, "r0010"); string(r.Input) != `{"id":"r0010"}` {
		t.Errorf("repeated ID: the later run replaced the first: input %s", r.Input)
	}
	if got := insertMany(t, s, nil); len(got) != 0 {
		t.Errorf("RunInsertMany(nil) = %v", got)
	}
}

// testRunInsertManyBadStates checks that unique states without every
// unfinished state are refused, with nothing written.
func testRunInsertManyBadStates(t *testing.T, s store.Store) {
	bad := keyed("bad", "k")
	bad.UniqueStates = []flowtype.RunStatus{flowtype.StatusCompleted}
	err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.RunInsertMany(t.Context(), []store.RunInsertParams{newRun("ok"), bad})
		return err
	})
	if err == nil {
		t.Fatal("RunInsertMany accepted unique states without the unfinished ones")
	}
	if _, err := s.Reader().RunGet(t.Context(), "ok"); err == nil {
		t.Error("a refused batch recorded a run")
	}
}

// testEventAppendMany checks that the events of a batch are listed as
// EventAppend would have recorded them, in batch order, after the events
// appended before.
func testEventAppendMany(t *testing.T, s store.Store) {
	insert(t, s, newRun("a"), newRun("b"))
	first := store.Event{RunID: "a", At: base, Kind: "run_started"}
	batch := []store.Event{
		{RunID: "b", At: base + 2, Kind: "run_started", Detail: "order:1 on q"},
		{RunID: "a", At: base + 1, Kind: "step_failed", Step: "charge", Occurrence: 2, Attempt: 3, Detail: "\"quoted\"\n\tüñí € \\u0000"},
		{RunID: "a", At: base + 3, Kind: "run_failed"},
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.EventAppend(ctx, first); err != nil {
			return err
		}
		if err := tx.EventAppendMany(ctx, batch); err != nil {
			return err
		}
		return tx.EventAppendMany(ctx, nil)
	})
	for run, want := range map[string][]store.Event{"a": {first, batch[1], batch[2]}, "b": {batch[0]}} {
		got, err := s.Reader().EventList(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("run %s: %d events, want %d: %+v", run, len(got), len(want), got)
		}
		for i := range got {
			if i > 0 && got[i].ID <= got[i-1].ID {
				t.Errorf("run %s: event IDs not growing: %d then %d", run, got[i-1].ID, got[i].ID)
			}
			got[i].ID = 0
			if d := diff(want[i], got[i]); d != "" {
				t.Errorf("run %s event %d: %s", run, i, d)
			}
		}
	}
}

// testRunInsertManyLarge checks batches large enough for an adapter's bulk
// path (PostgreSQL's COPY): every field and start option is recorded as
// RunInsert records it, a taken ID in the batch is reported and changes
// nothing, and the batch's run_started events, appended in one
// EventAppendMany, keep batch order. An append naming a run that does not
// exist fails the write, large batch or not.
func testRunInsertManyLarge(t *testing.T, s store.Store) {
	const n = 300
	model := store.RunInsertParams{
		Workflow: order2, Queue: "emails", Priority: 3,
		Input: []byte("{\"note\":\"\u0000\"}\x00\xff"), RunAt: base + 10, Deadline: base + 99, ParentID: "parent",
		StartOptions: store.StartOptions{Timeout: 5_000, Detached: true, Context: []byte(`{"tenant":"t1"}`), ConcurrencyKey: "customer-1"},
		Now:          base,
	}
	single := model
	single.ID = "single"
	insert(t, s, newRun("parent"), single, newRun("taken"))
	for _, taken := range []bool{false, true} {
		prefix := map[bool]string{false: "fresh", true: "withtaken"}[taken]
		batch := make([]store.RunInsertParams, n)
		events := make([]store.Event, n)
		for i := range batch {
			batch[i] = model
			batch[i].ID = fmt.Sprintf("%s-%03d", prefix, i)
			events[i] = store.Event{RunID: batch[i].ID, At: base, Kind: "run_started", Detail: batch[i].ID}
		}
		if taken {
			batch[n/2] = newRun("taken")
			events = slices.Delete(events, n/2, n/2+1)
		}
		var inserted []bool
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			if inserted, err = tx.RunInsertMany(ctx, batch); err != nil {
				return err
			}
			return tx.EventAppendMany(ctx, events)
		})
		for i, ok := range inserted {
			if ok != (batch[i].ID != "taken") {
				t.Errorf("%s batch: run %d (%s) inserted %v", prefix, i, batch[i].ID, ok)
			}
		}
		want := get(t, s, "single")
		for _, i := range []int{0, n/2 + 1, n - 1} {
			want.ID = batch[i].ID
			if d := diff(want, get(t, s, batch[i].ID)); d != "" {
				t.Errorf("%s batch: run %s differs from one inserted by RunInsert: %s", prefix, batch[i].ID, d)
			}
		}
		var last int64
		for _, e := range events {
			got, err := s.Reader().EventList(t.Context(), e.RunID)
			if err != nil || len(got) != 1 || got[0].Kind != "run_started" || got[0].Detail != e.RunID {
				t.Fatalf("%s batch: events of run %s: %+v, %v; want its run_started", prefix, e.RunID, got, err)
			}
			if got[0].ID <= last {
				t.Errorf("%s batch: event of run %s has ID %d, not above %d: not in batch order", prefix, e.RunID, got[0].ID, last)
			}
			last = got[0].ID
		}
	}
	if r := get(t, s, "taken"); string(r.Input) != `{"id":"taken"}` || r.Workflow != order1.Name {
		t.Errorf("run with a taken ID changed: %+v", r)
	}
	ghosts := make([]store.Event, n)
	for i := range ghosts {
		ghosts[i] = store.Event{RunID: "parent", At: base, Kind: "lost"}
	}
	ghosts[n-1].RunID = "ghost"
	err := s.Write(t.Context(), func(tx store.Tx) error { return tx.EventAppendMany(t.Context(), ghosts) })
	if err == nil {
		t.Error("a batch of events with one of an unknown run was appended")
	}
	if got, err := s.Reader().EventList(t.Context(), "parent"); err != nil || len(got) != 0 {
		t.Errorf("run parent after a failed write of events: %d events, %v; want none", len(got), err)
	}
}
