package storetest

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// limitTests are the conformance tests of store.LimitReader and
// store.LimitTx; Exercise runs them with the others.
func limitTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"QueueLimitsRoundTrip", testQueueLimitsRoundTrip},
		{"RunLeasedCounts", testRunLeasedCounts},
		{"RateStarts", testRateStarts},
		{"RunReadyKeys", testRunReadyKeys},
		{"RunClaimKey", testRunClaimKey},
		{"RunClaimKeyUnkeyed", testRunClaimKeyUnkeyed},
		{"RunClaimKeyPausedAndUnknown", testRunClaimKeyPausedAndUnknown},
		{"RunRequeueKeepsConcurrencyKey", testRunRequeueKeepsConcurrencyKey},
	}
}

// keyRun returns insert parameters of a ready order:1 run of queue with
// concurrency key key.
func keyRun(id, queue, key string) store.RunInsertParams {
	p := newRun(id)
	p.Queue, p.ConcurrencyKey = queue, key
	return p
}

// claimKey claims up to max runs of queue's key at now, sorted in claim
// order.
func claimKey(t *testing.T, s store.Store, queue, key, owner string, max int, now int64, known ...flowtype.WorkflowKey) []store.Run {
	t.Helper()
	if known == nil {
		known = []flowtype.WorkflowKey{order1, order2}
	}
	var runs []store.Run
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		runs, err = tx.RunClaimKey(ctx, store.RunClaimKeyParams{
			RunClaimParams: store.RunClaimParams{Queue: queue, Known: known, Owner: owner, Max: max, Now: now, LeaseExpiresAt: now + 30_000},
			Key:            key,
		})
		return err
	})
	sortClaimOrder(runs)
	return runs
}

func readyKeys(t *testing.T, s store.Store, p store.RunReadyKeysParams) []string {
	t.Helper()
	var keys []string
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		keys, err = tx.RunReadyKeys(ctx, p)
		return err
	})
	return keys
}

func leasedCounts(t *testing.T, s store.Store, queue string) map[string]int {
	t.Helper()
	n, err := s.Reader().RunLeasedCounts(t.Context(), queue)
	if err != nil {
		t.Fatalf("leased counts of %s: %v", queue, err)
	}
	// A key with no leased runs may be absent or 0.
	maps.DeleteFunc(n, func(_ string, v int) bool { return v == 0 })
	return n
}

func testQueueLimitsRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := s.Reader()
	if _, ok, err := r.QueueLimitsGet(ctx, "nowhere"); err != nil || ok {
		t.Fatalf("limits of an unknown queue: ok %v, err %v; want none", ok, err)
	}
	full := flowtype.QueueLimits{
		Concurrency: 10, KeyConcurrency: 2,
		Rate:    flowtype.RateLimit{Limit: 100, Period: 1500 * time.Millisecond},
		KeyRate: flowtype.RateLimit{Limit: 5, Period: 250 * time.Millisecond},
		Fair:    true,
		Keys: []flowtype.KeyLimit{
			{Prefix: "tenant:big:", Concurrency: 8, Rate: flowtype.RateLimit{Limit: 50, Period: 1001 * time.Millisecond}, Weight: 4},
			{Prefix: "tenant:", Concurrency: 1, Weight: 1},
			{Prefix: "free:", Rate: flowtype.RateLimit{Limit: 1, Period: time.Minute + 7*time.Millisecond}},
		},
	}
	small := flowtype.QueueLimits{Concurrency: 3}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.QueueLimitsSet(ctx, "b", full, base); err != nil {
			return err
		}
		return tx.QueueLimitsSet(ctx, "a", small, base+1)
	})
	check := func(queue string, want flowtype.QueueLimits) {
		t.Helper()
		got, ok, err := r.QueueLimitsGet(ctx, queue)
		if err != nil || !ok {
			t.Fatalf("limits of %s: ok %v, err %v", queue, ok, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("limits of %s: %+v, want %+v", queue, got, want)
		}
	}
	check("b", full)
	check("a", small)
	list, err := r.QueueLimitsList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Queue != "a" || list[1].Queue != "b" ||
		list[0].UpdatedAt != base+1 || list[1].UpdatedAt != base ||
		!reflect.DeepEqual(list[0].Limits, small) || !reflect.DeepEqual(list[1].Limits, full) {
		t.Errorf("list: %+v, want a then b with their limits", list)
	}
	// QueueLimitsLock reads the same limits inside a write.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		got, ok, err := tx.QueueLimitsLock(ctx, "b")
		if err != nil {
			return err
		}
		if !ok || !reflect.DeepEqual(got, full) {
			t.Errorf("locked limits of b: %+v, %v; want %+v", got, ok, full)
		}
		if _, ok, err := tx.QueueLimitsLock(ctx, "nowhere"); err != nil || ok {
			t.Errorf("lock of an unknown queue's limits: ok %v, err %v", ok, err)
		}
		return nil
	})

	// Set replaces every field, the keys too.
	replaced := flowtype.QueueLimits{KeyRate: flowtype.RateLimit{Limit: 2, Period: 3 * time.Millisecond}}
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.QueueLimitsSet(ctx, "b", replaced, base+2) })
	check("b", replaced)
	if list, _ := r.QueueLimitsList(ctx); len(list) != 2 || list[1].UpdatedAt != base+2 {
		t.Errorf("list after replace: %+v", list)
	}

	var deleted, again bool
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		var err error
		if deleted, err = tx.QueueLimitsDelete(ctx, "b"); err != nil {
			return err
		}
		again, err = tx.QueueLimitsDelete(ctx, "b")
		return err
	})
	if !deleted || again {
		t.Errorf("delete: %v then %v, want true then false", deleted, again)
	}
	if _, ok, err := r.QueueLimitsGet(ctx, "b"); err != nil || ok {
		t.Errorf("limits of b after delete: ok %v, err %v", ok, err)
	}
	check("a", small)
	if list, _ := r.QueueLimitsList(ctx); len(list) != 1 || list[0].Queue != "a" {
		t.Errorf("list after delete: %+v, want a only", list)
	}
}

func testRunLeasedCounts(t *testing.T, s store.Store) {
	insert(t, s,
		keyRun("x1", "lq", "x"), keyRun("x2", "lq", "x"), keyRun("x3", "lq", "x"),
		keyRun("y1", "lq", "y"), keyRun("n1", "lq", ""), keyRun("n2", "lq", ""),
		keyRun("o1", "other", "x"))
	if got := leasedCounts(t, s, "lq"); len(got) != 0 {
		t.Fatalf("leased counts before any claim: %v, want none", got)
	}
	xs := claimKey(t, s, "lq", "x", "w", 2, base)
	ys := claimKey(t, s, "lq", "y", "w", 5, base)
	ns := claimKey(t, s, "lq", "", "w", 1, base)
	claimKey(t, s, "other", "x", "w", 5, base)
	if len(xs) != 2 || len(ys) != 1 || len(ns) != 1 {
		t.Fatalf("claimed %v, %v, %v; want 2, 1, 1", ids(xs), ids(ys), ids(ns))
	}
	want := map[string]int{"x": 2, "y": 1, "": 1}
	if got := leasedCounts(t, s, "lq"); !maps.Equal(got, want) {
		t.Errorf("leased counts: %v, want %v", got, want)
	}
	if got := leasedCounts(t, s, "other"); !maps.Equal(got, map[string]int{"x": 1}) {
		t.Errorf("leased counts of other: %v, want x:1", got)
	}
	// A released run and a finished one are no longer leased.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		if err := tx.RunRelease(ctx, xs[0].Lease(), store.RunReleaseParams{RunAt: base + 10, Now: base + 1}); err != nil {
			return err
		}
		return tx.RunFinish(ctx, ys[0].Lease(), store.RunFinishParams{Status: flowtype.StatusCompleted, Output: []byte(`"ok"`), FinishedAt: base + 1, Now: base + 1})
	})
	want = map[string]int{"x": 1, "": 1}
	if got := leasedCounts(t, s, "lq"); !maps.Equal(got, want) {
		t.Errorf("leased counts after a release and a finish: %v, want %v", got, want)
	}
}

func testRateStarts(t *testing.T, s store.Store) {
	ctx := t.Context()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for i, at := range []int64{base + 10, base + 20, base + 30, base + 40} {
			if err := tx.RateStartAdd(ctx, "rq", "k", "k"+string(rune('0'+i)), at); err != nil {
				return err
			}
		}
		if err := tx.RateStartAdd(ctx, "rq", "", "q0", base+15); err != nil {
			return err
		}
		if err := tx.RateStartAdd(ctx, "rq", "other", "o0", base+15); err != nil {
			return err
		}
		return tx.RateStartAdd(ctx, "elsewhere", "k", "e0", base+35)
	})
	count := func(queue, key string, since int64) store.RateStarts {
		t.Helper()
		n, err := s.Reader().RateStartsCount(ctx, queue, key, since)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		queue, key string
		since      int64
		want       store.RateStarts
	}{
		{"rq", "k", base, store.RateStarts{Count: 4, Oldest: base + 10}},
		{"rq", "k", base + 10, store.RateStarts{Count: 3, Oldest: base + 20}}, // after, not at
		{"rq", "k", base + 25, store.RateStarts{Count: 2, Oldest: base + 30}},
		{"rq", "k", base + 40, store.RateStarts{}},
		{"rq", "", base, store.RateStarts{Count: 1, Oldest: base + 15}},
		{"rq", "nokey", base, store.RateStarts{}},
		{"elsewhere", "k", base, store.RateStarts{Count: 1, Oldest: base + 35}},
	} {
		if got := count(c.queue, c.key, c.since); got != c.want {
			t.Errorf("starts of %s/%q after %d: %+v, want %+v", c.queue, c.key, c.since-base, got, c.want)
		}
	}
	// Prune deletes the queue's starts at or before until, of every key.
	do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.RateStartsPrune(ctx, "rq", base+20) })
	if got, want := count("rq", "k", 0), (store.RateStarts{Count: 2, Oldest: base + 30}); got != want {
		t.Errorf("starts of k after prune at 20: %+v, want %+v", got, want)
	}
	if got := count("rq", "", 0); got != (store.RateStarts{}) {
		t.Errorf("queue's starts after prune at 20: %+v, want none", got)
	}
	if got := count("rq", "other", 0); got != (store.RateStarts{}) {
		t.Errorf("other's starts after prune at 20: %+v, want none", got)
	}
	if got, want := count("elsewhere", "k", 0), (store.RateStarts{Count: 1, Oldest: base + 35}); got != want {
		t.Errorf("another queue's starts after prune: %+v, want %+v", got, want)
	}
}

func testRunReadyKeys(t *testing.T, s store.Store) {
	future := keyRun("c-later", "kq", "c")
	future.RunAt = base + 1000
	hiFuture := keyRun("d-later", "kq", "d")
	hiFuture.RunAt, hiFuture.Priority = base+1000, 9
	lowNow := keyRun("d-now", "kq", "d") // ready behind a sleeping run of a higher priority
	insert(t, s,
		keyRun("a1", "kq", "a"), keyRun("a2", "kq", "a"),
		keyRun("b1", "kq", "b"), // leased below
		future, hiFuture, lowNow,
		keyRun("e1", "kq", "e"), keyRun("f1", "kq", "f"), keyRun("g1", "kq", "g"),
		keyRun("n1", "kq", ""),      // no key: never a key
		keyRun("z1", "otherq", "z"), // another queue
	)
	if got := claimKey(t, s, "kq", "b", "w", 5, base); len(got) != 1 {
		t.Fatalf("claim of b: %v", ids(got))
	}
	p := store.RunReadyKeysParams{Queue: "kq", Now: base, Max: 100, Scan: 100}
	if got, want := readyKeys(t, s, p), []string{"a", "d", "e", "f", "g"}; !slices.Equal(got, want) {
		t.Errorf("ready keys: %v, want %v (not b, leased, nor c, later)", got, want)
	}
	p.Now = base + 1000
	if got, want := readyKeys(t, s, p), []string{"a", "c", "d", "e", "f", "g"}; !slices.Equal(got, want) {
		t.Errorf("ready keys at 1000: %v, want %v", got, want)
	}
	p.Now = base
	p.After = "c"
	if got, want := readyKeys(t, s, p), []string{"d", "e", "f", "g"}; !slices.Equal(got, want) {
		t.Errorf("ready keys after c: %v, want %v", got, want)
	}
	p.After = "d"
	if got, want := readyKeys(t, s, p), []string{"e", "f", "g"}; !slices.Equal(got, want) {
		t.Errorf("ready keys after d: %v, want %v", got, want)
	}
	p.After, p.Max = "", 2
	if got, want := readyKeys(t, s, p), []string{"a", "d"}; !slices.Equal(got, want) {
		t.Errorf("ready keys, at most 2: %v, want %v", got, want)
	}
	// Scan bounds the keys looked at, the keys with unleased runs, ready
	// or not: a, c, d, e (b's only run is leased).
	p.Max, p.Scan = 100, 4
	if got, want := readyKeys(t, s, p), []string{"a", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("ready keys scanning 4: %v, want %v", got, want)
	}
	p.Scan = 1
	if got, want := readyKeys(t, s, p), []string{"a"}; !slices.Equal(got, want) {
		t.Errorf("ready keys scanning 1: %v, want %v", got, want)
	}
	p.After, p.Scan = "g", 100
	if got := readyKeys(t, s, p); len(got) != 0 {
		t.Errorf("ready keys after g: %v, want none", got)
	}
	if got, want := readyKeys(t, s, store.RunReadyKeysParams{Queue: "otherq", Now: base, Max: 10, Scan: 10}), []string{"z"}; !slices.Equal(got, want) {
		t.Errorf("ready keys of otherq: %v, want %v", got, want)
	}
}

func testRunClaimKey(t *testing.T, s store.Store) {
	lo := keyRun("k-lo", "cq", "k")
	hi := keyRun("k-hi", "cq", "k")
	hi.Priority = 5
	old := keyRun("k-old", "cq", "k")
	old.RunAt = base - 100
	later := keyRun("k-later", "cq", "k")
	later.RunAt = base + 1000
	v3 := keyRun("k-v3", "cq", "k")
	v3.Workflow, v3.Priority = order3, 9 // not known to the claimer
	insert(t, s, lo, hi, old, later, v3,
		keyRun("j1", "cq", "j"), keyRun("n1", "cq", ""), keyRun("k-elsewhere", "dq", "k"))

	first := claimKey(t, s, "cq", "k", "w1", 2, base)
	if got, want := ids(first), []string{"k-hi", "k-old"}; !slices.Equal(got, want) {
		t.Fatalf("first claim of k: %v, want %v (highest priority, then oldest)", got, want)
	}
	for _, r := range first {
		if r.LeaseOwner != "w1" || r.LeaseExpiresAt != base+30_000 || r.Fence != 1 ||
			r.Status != flowtype.StatusRunning || r.StartedAt != base || r.ConcurrencyKey != "k" {
			t.Errorf("claimed %s: owner %q, expires %d, fence %d, status %s, started %d, key %q",
				r.ID, r.LeaseOwner, r.LeaseExpiresAt-base, r.Fence, r.Status, r.StartedAt-base, r.ConcurrencyKey)
		}
		if got := get(t, s, r.ID); got.LeaseOwner != "w1" || got.Fence != 1 {
			t.Errorf("stored %s: owner %q, fence %d", r.ID, got.LeaseOwner, got.Fence)
		}
	}
	// A second claim never takes a run twice: only k-lo is left ready.
	second := claimKey(t, s, "cq", "k", "w2", 10, base)
	if got, want := ids(second), []string{"k-lo"}; !slices.Equal(got, want) {
		t.Fatalf("second claim of k: %v, want %v", got, want)
	}
	if got := claimKey(t, s, "cq", "k", "w3", 10, base); len(got) != 0 {
		t.Errorf("third claim of k: %v, want none", ids(got))
	}
	for _, id := range []string{"j1", "n1", "k-elsewhere", "k-later", "k-v3"} {
		if r := get(t, s, id); r.LeaseOwner != "" {
			t.Errorf("run %s was claimed by %s", id, r.LeaseOwner)
		}
	}
	// Released, a run is claimed again with the next fence.
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunRelease(ctx, second[0].Lease(), store.RunReleaseParams{RunAt: base + 1, Now: base + 1})
	})
	again := claimKey(t, s, "cq", "k", "w4", 10, base+1)
	if len(again) != 1 || again[0].ID != "k-lo" || again[0].Fence != 2 || again[0].LeaseOwner != "w4" {
		t.Errorf("claim after release: %+v, want k-lo with fence 2", again)
	}
	// The later run is claimed when due, and v3 only by who knows it.
	if got := ids(claimKey(t, s, "cq", "k", "w5", 10, base+1000)); !slices.Equal(got, []string{"k-later"}) {
		t.Errorf("claim at 1000: %v, want k-later", got)
	}
	if got := ids(claimKey(t, s, "cq", "k", "w6", 10, base+1000, order3)); !slices.Equal(got, []string{"k-v3"}) {
		t.Errorf("claim knowing order:3: %v, want k-v3", got)
	}
}

func testRunClaimKeyUnkeyed(t *testing.T, s store.Store) {
	hi := keyRun("n-hi", "uq", "")
	hi.Priority = 2
	insert(t, s, keyRun("n-lo", "uq", ""), hi, keyRun("k1", "uq", "k"), keyRun("n-other", "vq", ""))
	got := claimKey(t, s, "uq", "", "w", 10, base)
	if want := []string{"n-hi", "n-lo"}; !slices.Equal(ids(got), want) {
		t.Errorf("claim of the runs without a key: %v, want %v", ids(got), want)
	}
	if r := get(t, s, "k1"); r.LeaseOwner != "" {
		t.Errorf("the keyed run was claimed as one without a key")
	}
	if r := get(t, s, "n-other"); r.LeaseOwner != "" {
		t.Errorf("a run of another queue was claimed")
	}
}

func testRunClaimKeyPausedAndUnknown(t *testing.T, s store.Store) {
	insert(t, s, keyRun("p1", "pq", "k"), keyRun("p2", "pq", ""))
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.QueueSetPaused(ctx, "pq", true, base)
		return err
	})
	if got := claimKey(t, s, "pq", "k", "w", 10, base); len(got) != 0 {
		t.Errorf("claim of a paused queue's key: %v", ids(got))
	}
	if got := claimKey(t, s, "pq", "", "w", 10, base); len(got) != 0 {
		t.Errorf("claim of a paused queue's runs without a key: %v", ids(got))
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.QueueSetPaused(ctx, "pq", false, base)
		return err
	})
	if got := claimKey(t, s, "pq", "k", "w", 10, base, invoice1); len(got) != 0 {
		t.Errorf("claim of an unknown workflow version: %v", ids(got))
	}
	if got := ids(claimKey(t, s, "pq", "k", "w", 10, base)); !slices.Equal(got, []string{"p1"}) {
		t.Errorf("claim after resume: %v, want p1", got)
	}
}

func testRunRequeueKeepsConcurrencyKey(t *testing.T, s store.Store) {
	p := keyRun("dead", "rq", "tenant:1")
	insert(t, s, p)
	runs := claimKey(t, s, "rq", "tenant:1", "w", 1, base)
	if len(runs) != 1 {
		t.Fatalf("claim: %v", ids(runs))
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.RunFinish(ctx, runs[0].Lease(), store.RunFinishParams{Status: flowtype.StatusFailed, Error: "boom", FinishedAt: base + 1, Now: base + 1})
	})
	if !requeue(t, s, "dead", "dead/again", base+2) {
		t.Fatal("dead letter not requeued")
	}
	if r := get(t, s, "dead/again"); r.ConcurrencyKey != "tenant:1" {
		t.Errorf("requeued run's concurrency key: %q, want tenant:1", r.ConcurrencyKey)
	}
	if got := readyKeys(t, s, store.RunReadyKeysParams{Queue: "rq", Now: base + 2, Max: 10, Scan: 10}); !slices.Equal(got, []string{"tenant:1"}) {
		t.Errorf("ready keys after requeue: %v, want tenant:1", got)
	}
	if got := ids(claimKey(t, s, "rq", "tenant:1", "w", 1, base+2)); !slices.Equal(got, []string{"dead/again"}) {
		t.Errorf("claim of the key after requeue: %v, want dead/again", got)
	}
}
