package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// feedTests are the conformance tests of store.FeedReader and
// store.FeedTx; Exercise runs them with the others.
func feedTests() []struct {
	name string
	fn   func(t *testing.T, s store.Store)
} {
	return []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"FeedInPositionOrder", testFeedInPositionOrder},
		{"FeedPositionsNeverReused", testFeedPositionsNeverReused},
		{"FeedRetentionKeepsUnreadRuns", testFeedRetentionKeepsUnreadRuns},
		{"FeedConsumers", testFeedConsumers},
		{"FeedGapFreeUnderConcurrentWriters", testFeedGapFreeUnderConcurrentWriters},
		{"FeedGapFreeUnderHeldTransactions", testFeedGapFreeUnderHeldTransactions},
	}
}

// appendEvents appends one event per kind to run in one transaction.
func appendEvents(t *testing.T, s store.Store, run string, kinds ...string) {
	t.Helper()
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, k := range kinds {
			if err := tx.EventAppend(ctx, store.Event{RunID: run, At: base, Kind: k}); err != nil {
				return err
			}
		}
		return nil
	})
}

// readFeed reads the feed after after, max events a page, through every
// event committed when it was called. An adapter may hold events back
// while transactions are in flight (other tests' too), so an empty page
// before that point means "not yet": it waits and reads again.
func readFeed(t *testing.T, s store.Store, after int64, max int) []store.Event {
	t.Helper()
	target, err := s.Reader().FeedLast(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all := []store.Event{}
	deadline := time.Now().Add(30 * time.Second)
	for after < target {
		page, err := s.Reader().EventFeed(t.Context(), after, max)
		if err != nil {
			t.Fatalf("EventFeed(%d, %d): %v", after, max, err)
		}
		if len(page) > max {
			t.Fatalf("EventFeed(%d, %d) returned %d events", after, max, len(page))
		}
		if len(page) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the feed stays at position %d, %d was committed", after, target)
			}
			time.Sleep(2 * time.Millisecond)
			continue
		}
		all = append(all, page...)
		after = page[len(page)-1].ID
	}
	return all
}

func kinds(events []store.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.RunID + ":" + e.Kind
	}
	return out
}

func testFeedInPositionOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	if got := readFeed(t, s, 0, 10); len(got) != 0 {
		t.Fatalf("feed of an empty store: %v", kinds(got))
	}
	if last, err := s.Reader().FeedLast(ctx); err != nil || last != 0 {
		t.Fatalf("FeedLast of an empty store = %d, %v; want 0", last, err)
	}
	insert(t, s, newRun("a"), newRun("b"))
	appendEvents(t, s, "a", "one", "two")
	appendEvents(t, s, "b", "three")
	appendEvents(t, s, "a", "four", "five")
	want := []string{"a:one", "a:two", "b:three", "a:four", "a:five"}
	for _, max := range []int{1, 2, 100} {
		got := readFeed(t, s, 0, max)
		if !slices.Equal(kinds(got), want) {
			t.Errorf("feed read %d at a time: %v, want %v", max, kinds(got), want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].ID <= got[i-1].ID {
				t.Errorf("positions not increasing: %d then %d", got[i-1].ID, got[i].ID)
			}
		}
	}
	all := readFeed(t, s, 0, 100)
	if got := readFeed(t, s, all[2].ID, 100); !slices.Equal(kinds(got), want[3:]) {
		t.Errorf("feed after position %d: %v, want %v", all[2].ID, kinds(got), want[3:])
	}
	last, err := s.Reader().FeedLast(ctx)
	if err != nil || last != all[len(all)-1].ID {
		t.Errorf("FeedLast = %d, %v; want %d", last, err, all[len(all)-1].ID)
	}
}

// testFeedPositionsNeverReused deletes the runs holding the newest events
// (SQLite would hand their rowids out again) and checks that new events
// still get positions above every position handed out before, and that the
// highest deleted position is recorded.
func testFeedPositionsNeverReused(t *testing.T, s store.Store) {
	ctx := t.Context()
	insert(t, s, newRun("kept"))
	appendEvents(t, s, "kept", "first")
	finishedRun(t, s, newRun("gone"), flowtype.StatusCompleted, base+1)
	appendEvents(t, s, "gone", "last", "very-last")
	before := readFeed(t, s, 0, 100)
	newest := before[len(before)-1].ID
	if purged, err := s.Reader().FeedPurgedThrough(ctx); err != nil || purged != 0 {
		t.Fatalf("FeedPurgedThrough before any delete = %d, %v; want 0", purged, err)
	}
	if n := deleteFinished(t, s, store.RunDeleteFinishedParams{Status: flowtype.StatusCompleted, FinishedBefore: base + 2, Max: 10}); n != 1 {
		t.Fatalf("deleted %d runs, want 1", n)
	}
	purged, err := s.Reader().FeedPurgedThrough(ctx)
	if err != nil || purged != newest {
		t.Fatalf("FeedPurgedThrough after deleting the newest events = %d, %v; want %d", purged, err, newest)
	}
	appendEvents(t, s, "kept", "after-delete")
	after := readFeed(t, s, 0, 100)
	if e := after[len(after)-1]; e.Kind != "after-delete" || e.ID <= newest {
		t.Fatalf("event appended after the delete: %s at position %d, want a position above %d", e.Kind, e.ID, newest)
	}
	if got := readFeed(t, s, newest, 100); !slices.Equal(kinds(got), []string{"kept:after-delete"}) {
		t.Errorf("a reader at position %d sees %v, want the new event", newest, kinds(got))
	}

	// The batched append keeps the rule too: delete the newest run again
	// and append a batch.
	finishedRun(t, s, newRun("gone-again"), flowtype.StatusCompleted, base+1)
	all := readFeed(t, s, 0, 100)
	newest = all[len(all)-1].ID
	if n := deleteFinished(t, s, store.RunDeleteFinishedParams{Status: flowtype.StatusCompleted, FinishedBefore: base + 2, Max: 10}); n != 1 {
		t.Fatalf("deleted %d runs, want 1", n)
	}
	do(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.EventAppendMany(ctx, []store.Event{{RunID: "kept", At: base, Kind: "batch-1"}, {RunID: "kept", At: base, Kind: "batch-2"}})
	})
	got := readFeed(t, s, newest, 100)
	if !slices.Equal(kinds(got), []string{"kept:batch-1", "kept:batch-2"}) || got[0].ID <= newest {
		t.Errorf("batch appended after deleting the newest events: %v at %v, want positions above %d", kinds(got), got, newest)
	}
}

// testFeedRetentionKeepsUnreadRuns checks RunDeleteFinished's KeepAfter: a
// finished run with an event the consumers have not acknowledged stays.
func testFeedRetentionKeepsUnreadRuns(t *testing.T, s store.Store) {
	finishedRun(t, s, newRun("read"), flowtype.StatusCompleted, base+1)
	read := readFeed(t, s, 0, 100)
	finishedRun(t, s, newRun("unread"), flowtype.StatusCompleted, base+1)
	keepAfter := read[len(read)-1].ID
	p := store.RunDeleteFinishedParams{Status: flowtype.StatusCompleted, FinishedBefore: base + 2, Max: 10, WaitForFeed: true, KeepAfter: keepAfter}
	if n := deleteFinished(t, s, p); n != 1 {
		t.Fatalf("deleted %d runs, want 1 (the read one)", n)
	}
	if exists(t, s, "read") || !exists(t, s, "unread") {
		t.Fatalf("read run exists: %v, unread run exists: %v; want false, true", exists(t, s, "read"), exists(t, s, "unread"))
	}
	p.WaitForFeed = false
	if n := deleteFinished(t, s, p); n != 1 || exists(t, s, "unread") {
		t.Fatalf("delete regardless of consumers deleted %d runs, want 1", n)
	}
}

func testFeedConsumers(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := s.Reader()
	if _, err := r.FeedConsumerGet(ctx, "audit"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Fatalf("FeedConsumerGet of an unknown consumer: %v, want ErrRunNotFound", err)
	}
	if min, err := r.FeedConsumerMinPosition(ctx); err != nil || min != store.NoFeedConsumer {
		t.Fatalf("FeedConsumerMinPosition without consumers = %d, %v; want NoFeedConsumer", min, err)
	}
	ack := func(name string, pos, now int64) {
		t.Helper()
		do(t, s, func(ctx context.Context, tx store.Tx) error { return tx.FeedConsumerAck(ctx, name, pos, now) })
	}
	ack("audit", 5, base)
	ack("billing", 3, base+1)
	ack("audit", 9, base+2)
	ack("audit", 7, base+3) // stale: the position stays
	got, err := r.FeedConsumerGet(ctx, "audit")
	want := store.FeedConsumer{Name: "audit", Position: 9, CreatedAt: base, AckedAt: base + 3}
	if err != nil || got != want {
		t.Fatalf("FeedConsumerGet(audit) = %+v, %v; want %+v", got, err, want)
	}
	list, err := r.FeedConsumerList(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "audit" || list[1].Name != "billing" {
		t.Fatalf("FeedConsumerList = %+v, %v", list, err)
	}
	if min, err := r.FeedConsumerMinPosition(ctx); err != nil || min != 3 {
		t.Fatalf("FeedConsumerMinPosition = %d, %v; want 3", min, err)
	}
	var deleted bool
	do(t, s, func(ctx context.Context, tx store.Tx) (err error) {
		deleted, err = tx.FeedConsumerDelete(ctx, "billing")
		return err
	})
	if !deleted {
		t.Error("FeedConsumerDelete(billing) reported no consumer")
	}
	if min, err := r.FeedConsumerMinPosition(ctx); err != nil || min != 9 {
		t.Fatalf("FeedConsumerMinPosition after a delete = %d, %v; want 9", min, err)
	}
	err = s.Write(ctx, func(tx store.Tx) error { return tx.FeedConsumerAck(ctx, "", 1, base) })
	if err == nil {
		t.Error("FeedConsumerAck with an empty name succeeded")
	}
}

// testFeedGapFreeUnderConcurrentWriters has many writers append events
// while a follower reads the feed, resuming after the last position it got
// each time, as a consumer does. The follower must get every event exactly
// once, in increasing positions, and each writer's events in the order the
// writer committed them, however the writers' transactions interleave.
func testFeedGapFreeUnderConcurrentWriters(t *testing.T, s store.Store) {
	const writers, writes, perWrite = 8, 25, 3
	for w := range writers {
		insert(t, s, newRun(fmt.Sprintf("w%d", w)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := fmt.Sprintf("w%d", w)
			for i := range writes {
				err := s.Write(t.Context(), func(tx store.Tx) error {
					for j := range perWrite {
						e := store.Event{RunID: run, At: base, Kind: "e", Occurrence: i*perWrite + j}
						if err := tx.EventAppend(t.Context(), e); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(errs) }()

	total := writers * writes * perWrite
	next := map[string]int{}
	var after int64
	seen := 0
	deadline := time.Now().Add(time.Minute)
	for seen < total {
		if time.Now().After(deadline) {
			t.Fatalf("follower got %d of %d events in a minute", seen, total)
		}
		page, err := s.Reader().EventFeed(t.Context(), after, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.ID <= after {
				t.Fatalf("position %d delivered after position %d", e.ID, after)
			}
			after = e.ID
			if e.Occurrence != next[e.RunID] {
				t.Fatalf("run %s: event %d delivered, want %d: an event was skipped or repeated", e.RunID, e.Occurrence, next[e.RunID])
			}
			next[e.RunID]++
			seen++
		}
		if len(page) == 0 {
			// An adapter may hold back events of transactions in flight.
			time.Sleep(time.Millisecond)
		}
	}
	for err := range errs {
		t.Fatal(err)
	}
	if more := readFeed(t, s, after, 10); len(more) != 0 {
		t.Fatalf("%d events beyond the %d written", len(more), total)
	}
}

// testFeedGapFreeUnderHeldTransactions has writers whose transactions
// overlap at random: each may take its transaction's first write (a run
// inserted) and wait, then append events, make them visible to its own
// reads (EventList, which on PostgreSQL inserts them: they draw their
// positions then), and wait again before it commits. So transactions draw
// positions in one order, commit in another, and a transaction that drew
// a lower position may be newer than every committed one. A follower
// reads all the while, a random number of events a page; its delivery
// must be in position order, without a repeat, and, once the writers are
// done, exactly the runs' histories as EventList reads them.
func testFeedGapFreeUnderHeldTransactions(t *testing.T, s store.Store) {
	const writers, writes = 3, 40
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var mu sync.Mutex
	pause := func() {
		mu.Lock()
		d := time.Duration(rng.IntN(3000)) * time.Microsecond
		mu.Unlock()
		time.Sleep(d)
	}
	insert(t, s, newRun("held"))
	runs := []string{"held"}
	for w := range writers {
		for i := 0; i < writes; i += 2 {
			runs = append(runs, fmt.Sprintf("held-%d-%d", w, i))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				err := s.Write(t.Context(), func(tx store.Tx) error {
					ctx := t.Context()
					run := "held"
					if i%2 == 0 {
						run = fmt.Sprintf("held-%d-%d", w, i)
						if _, err := tx.RunInsert(ctx, newRun(run)); err != nil {
							return err
						}
						pause()
					}
					for j := range 1 + i%3 {
						e := store.Event{RunID: run, At: base, Kind: fmt.Sprintf("w%d.%d.%d", w, i, j)}
						if err := tx.EventAppend(ctx, e); err != nil {
							return err
						}
					}
					if _, err := tx.EventList(ctx, run); err != nil {
						return err
					}
					pause()
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(errs); close(done) }()

	var delivered []store.Event
	var after int64
	follow := func() {
		mu.Lock()
		n := 1 + rng.IntN(10)
		mu.Unlock()
		page, err := s.Reader().EventFeed(t.Context(), after, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.ID <= after {
				t.Fatalf("position %d delivered after position %d", e.ID, after)
			}
			after = e.ID
		}
		delivered = append(delivered, page...)
		if len(page) == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	for writing := true; writing; {
		select {
		case <-done:
			writing = false
		default:
			follow()
		}
	}
	for err := range errs {
		t.Fatal(err)
	}
	delivered = append(delivered, readFeed(t, s, after, 10)...)
	var history []store.Event
	for _, run := range runs {
		events, err := s.Reader().EventList(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		history = append(history, events...)
	}
	slices.SortFunc(history, func(a, b store.Event) int { return cmp.Compare(a.ID, b.ID) })
	got, want := positions(delivered), positions(history)
	if !slices.Equal(got, want) {
		missing := []int64{}
		for _, p := range want {
			if !slices.Contains(got, p) {
				missing = append(missing, p)
			}
		}
		t.Fatalf("the follower delivered %d events, the history holds %d; positions missing from the delivery: %v", len(got), len(want), missing)
	}
}

func positions(events []store.Event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}
