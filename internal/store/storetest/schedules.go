package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// scheduleTests are the conformance tests of store.ScheduleReader and
// store.ScheduleTx; Exercise runs them with the others.
func scheduleTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ScheduleUpsertCreates", testScheduleUpsertCreates},
		{"ScheduleUpsertUpdates", testScheduleUpsertUpdates},
		{"ScheduleNotFound", testScheduleNotFound},
		{"ScheduleListDue", testScheduleListDue},
		{"ScheduleNextDue", testScheduleNextDue},
		{"ScheduleAdvance", testScheduleAdvance},
		{"ScheduleAdvanceConcurrent", testScheduleAdvanceConcurrent},
		{"SchedulePauseAndDelete", testSchedulePauseAndDelete},
	}
}

// newSchedule returns upsert parameters of a per-minute schedule of order:1
// whose next slot is base+60s.
func newSchedule(name string) store.ScheduleUpsertParams {
	return store.ScheduleUpsertParams{
		Name: name, Workflow: order1, Queue: "q", Priority: 2, Input: []byte(`{"n":1}`),
		Spec: "* * * * *", CatchUp: flowtype.CatchUpOne, NextAt: base + 60_000, Now: base,
	}
}

func upsertSchedule(t *testing.T, s store.Store, ps ...store.ScheduleUpsertParams) {
	t.Helper()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, p := range ps {
			if err := tx.ScheduleUpsert(ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func getSchedule(t *testing.T, s store.Store, name string) store.Schedule {
	t.Helper()
	sc, err := s.Reader().ScheduleGet(t.Context(), name)
	if err != nil {
		t.Fatalf("get schedule %s: %v", name, err)
	}
	return sc
}

func scheduleNames(list []store.Schedule) []string {
	out := make([]string, len(list))
	for i, sc := range list {
		out[i] = sc.Name
	}
	return out
}

func testScheduleUpsertCreates(t *testing.T, s store.Store) {
	p := newSchedule("nightly")
	upsertSchedule(t, s, p)
	want := store.Schedule{
		Name: "nightly", Workflow: order1, Queue: "q", Priority: 2, Input: []byte(`{"n":1}`),
		Spec: "* * * * *", CatchUp: flowtype.CatchUpOne, NextAt: base + 60_000, CreatedAt: base, UpdatedAt: base,
	}
	if d := diff(want, getSchedule(t, s, "nightly")); d != "" {
		t.Errorf("stored schedule differs: %s", d)
	}
	// Reads inside the write transaction see it too.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		got, err := tx.ScheduleGet(ctx, "nightly")
		if err != nil {
			return err
		}
		if d := diff(want, got); d != "" {
			t.Errorf("schedule read in a transaction differs: %s", d)
		}
		return nil
	})
}

func testScheduleUpsertUpdates(t *testing.T, s store.Store) {
	upsertSchedule(t, s, newSchedule("a"))
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{
			Name: "a", ExpectedNextAt: base + 60_000, NextAt: base + 120_000, LastSlot: base + 60_000, Now: base + 61_000,
		}); err != nil {
			return err
		}
		return tx.ScheduleSetPaused(ctx, "a", true, base+62_000)
	})

	// Same spec: everything is updated but the next slot, the last slot and
	// the pause state.
	p := store.ScheduleUpsertParams{
		Name: "a", Workflow: order2, Queue: "other", Priority: 5, Input: []byte(`{"n":2}`),
		Spec: "* * * * *", CatchUp: flowtype.CatchUpAll, NextAt: base + 999_000, Now: base + 70_000,
	}
	upsertSchedule(t, s, p)
	want := store.Schedule{
		Name: "a", Workflow: order2, Queue: "other", Priority: 5, Input: []byte(`{"n":2}`),
		Spec: "* * * * *", CatchUp: flowtype.CatchUpAll, Paused: true, NextAt: base + 120_000, LastSlot: base + 60_000,
		CreatedAt: base, UpdatedAt: base + 70_000,
	}
	if d := diff(want, getSchedule(t, s, "a")); d != "" {
		t.Errorf("after an update with the same spec: %s", d)
	}

	// Another spec: the next slot is the one given.
	p.Spec, p.Now = "0 * * * *", base+80_000
	upsertSchedule(t, s, p)
	want.Spec, want.NextAt, want.UpdatedAt = "0 * * * *", base+999_000, base+80_000
	if d := diff(want, getSchedule(t, s, "a")); d != "" {
		t.Errorf("after an update with another spec: %s", d)
	}
	list, err := s.Reader().ScheduleList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("updates created schedules: %v", scheduleNames(list))
	}
}

func testScheduleNotFound(t *testing.T, s store.Store) {
	if _, err := s.Reader().ScheduleGet(t.Context(), "nope"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("get: error %v, want ErrRunNotFound", err)
	}
	expectErr(t, s, flowtype.ErrRunNotFound, "pause", func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleSetPaused(ctx, "nope", true, base)
	})
	expectErr(t, s, flowtype.ErrRunNotFound, "delete", func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleDelete(ctx, "nope")
	})
	expectErr(t, s, flowtype.ErrRunNotFound, "advance", func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{Name: "nope", ExpectedNextAt: base, NextAt: base + 1, Now: base})
	})
	list, err := s.Reader().ScheduleList(t.Context())
	if err != nil || len(list) != 0 {
		t.Errorf("list of an empty store = %v, %v", scheduleNames(list), err)
	}
}

func testScheduleListDue(t *testing.T, s store.Store) {
	at := func(name string, nextAt int64) store.ScheduleUpsertParams {
		p := newSchedule(name)
		p.NextAt = nextAt
		return p
	}
	upsertSchedule(t, s,
		at("later", base+10_000), at("due-b", base), at("due-a", base), at("oldest", base-5_000),
		at("paused", base-10_000), at("exact", base+5_000))
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ScheduleSetPaused(ctx, "paused", true, base) })

	due := func(now int64, limit int) []string {
		var list []store.Schedule
		do(t, s, func(ctx context.Context, tx store.Tx) error {
			var err error
			list, err = tx.ScheduleListDue(ctx, now, limit)
			return err
		})
		return scheduleNames(list)
	}
	if got, want := due(base+5_000, 10), []string{"oldest", "due-a", "due-b", "exact"}; !slices.Equal(got, want) {
		t.Errorf("due = %v, want %v (most overdue first, paused and future excluded)", got, want)
	}
	if got, want := due(base+5_000, 2), []string{"oldest", "due-a"}; !slices.Equal(got, want) {
		t.Errorf("due with limit 2 = %v, want %v", got, want)
	}
	if got := due(base-20_000, 10); len(got) != 0 {
		t.Errorf("due before every slot = %v, want none", got)
	}
	list, err := s.Reader().ScheduleList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := scheduleNames(list), []string{"due-a", "due-b", "exact", "later", "oldest", "paused"}; !slices.Equal(got, want) {
		t.Errorf("list = %v, want %v (by name, paused included)", got, want)
	}
}

func testScheduleNextDue(t *testing.T, s store.Store) {
	next := func() (int64, bool) {
		t.Helper()
		at, ok, err := s.Reader().ScheduleNextDue(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return at, ok
	}
	if _, ok := next(); ok {
		t.Error("next due of an empty store: ok, want none")
	}
	a, b := newSchedule("a"), newSchedule("b")
	a.NextAt, b.NextAt = base+20_000, base+10_000
	upsertSchedule(t, s, a, b)
	if at, ok := next(); !ok || at != base+10_000 {
		t.Errorf("next due = %d, %v; want %d", at, ok, base+10_000)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ScheduleSetPaused(ctx, "b", true, base) })
	if at, ok := next(); !ok || at != base+20_000 {
		t.Errorf("next due with b paused = %d, %v; want %d", at, ok, base+20_000)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ScheduleSetPaused(ctx, "a", true, base) })
	if _, ok := next(); ok {
		t.Error("next due with every schedule paused: ok, want none")
	}
}

func testScheduleAdvance(t *testing.T, s store.Store) {
	upsertSchedule(t, s, newSchedule("a"))
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{
			Name: "a", ExpectedNextAt: base + 60_000, NextAt: base + 180_000, LastSlot: base + 120_000, Now: base + 130_000,
		})
	})
	got := getSchedule(t, s, "a")
	if got.NextAt != base+180_000 || got.LastSlot != base+120_000 || got.UpdatedAt != base+130_000 {
		t.Fatalf("after advance: next %d, last %d, updated %d", got.NextAt, got.LastSlot, got.UpdatedAt)
	}
	// A stale expectation changes nothing.
	expectErr(t, s, flowtype.ErrConflict, "advance from a stale slot", func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{
			Name: "a", ExpectedNextAt: base + 60_000, NextAt: base + 999_000, LastSlot: base + 999_000, Now: base + 140_000,
		})
	})
	// Nor does advancing a paused schedule.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleSetPaused(ctx, "a", true, base+150_000)
	})
	expectErr(t, s, flowtype.ErrConflict, "advance a paused schedule", func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{
			Name: "a", ExpectedNextAt: base + 180_000, NextAt: base + 240_000, LastSlot: base + 180_000, Now: base + 200_000,
		})
	})
	if got := getSchedule(t, s, "a"); got.NextAt != base+180_000 || got.LastSlot != base+120_000 {
		t.Errorf("failed advances changed the schedule: next %d, last %d", got.NextAt, got.LastSlot)
	}
}

// testScheduleAdvanceConcurrent races writers to advance one schedule from
// the same slot: exactly one wins.
func testScheduleAdvanceConcurrent(t *testing.T, s store.Store) {
	upsertSchedule(t, s, newSchedule("a"))
	const writers = 8
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			errs <- s.Write(t.Context(), func(tx store.Tx) error {
				return tx.ScheduleAdvance(t.Context(), store.ScheduleAdvanceParams{
					Name: "a", ExpectedNextAt: base + 60_000, NextAt: base + 120_000 + int64(i), LastSlot: base + 60_000, Now: base,
				})
			})
		}()
	}
	won := 0
	for range writers {
		err := <-errs
		switch {
		case err == nil:
			won++
		case !errors.Is(err, flowtype.ErrConflict):
			t.Errorf("losing writer: error %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Errorf("%d writers advanced the schedule from the same slot, want 1", won)
	}
}

func testSchedulePauseAndDelete(t *testing.T, s store.Store) {
	upsertSchedule(t, s, newSchedule("a"), newSchedule("b"))
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ScheduleSetPaused(ctx, "a", true, base+1) })
	if got := getSchedule(t, s, "a"); !got.Paused || got.UpdatedAt != base+1 {
		t.Errorf("after pause: paused %v, updated %d", got.Paused, got.UpdatedAt)
	}
	// Pausing twice is fine.
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ScheduleSetPaused(ctx, "a", true, base+2) })
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ScheduleSetPaused(ctx, "a", false, base+3) })
	if got := getSchedule(t, s, "a"); got.Paused {
		t.Error("after resume: still paused")
	}

	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.ScheduleDelete(ctx, "a") })
	if _, err := s.Reader().ScheduleGet(t.Context(), "a"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("get after delete: error %v, want ErrRunNotFound", err)
	}
	expectErr(t, s, flowtype.ErrRunNotFound, "delete twice", func(ctx context.Context, tx store.Tx) error {
		return tx.ScheduleDelete(ctx, "a")
	})
	getSchedule(t, s, "b") // the other is untouched

	// A failed write leaves the schedules as they were.
	boom := errors.New("boom")
	err := s.Write(t.Context(), func(tx store.Tx) error {
		if err := tx.ScheduleDelete(t.Context(), "b"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("write: %v, want boom", err)
	}
	getSchedule(t, s, "b")
}
