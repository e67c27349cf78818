package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// collectChanges reads the feed of e without following until it holds
// every change of the runs, and returns them.
func collectChanges(t *testing.T, ctx context.Context, e *flow.Engine, opts *flow.ChangesOptions, until func([]flow.Change) bool) []flow.Change {
	t.Helper()
	var got []flow.Change
	o := *opts
	o.Follow = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for c, err := range e.Changes(ctx, &o) {
		if err != nil {
			t.Fatalf("changes after %d received: %v", len(got), err)
		}
		got = append(got, c)
		if until(got) {
			break
		}
	}
	return got
}

func finishedRuns(cs []flow.Change) int {
	n := 0
	for _, c := range cs {
		if c.Kind == flow.EventRunCompleted {
			n++
		}
	}
	return n
}

// checkFeedMatchesHistories checks that changes hold every event of the
// runs, once each, in increasing positions, each run's in its history's
// order.
func checkFeedMatchesHistories(t *testing.T, ctx context.Context, e *flow.Engine, changes []flow.Change, runs []string) {
	t.Helper()
	byRun := map[string][]flow.Change{}
	for i, c := range changes {
		if i > 0 && c.Position <= changes[i-1].Position {
			t.Fatalf("position %d follows position %d", c.Position, changes[i-1].Position)
		}
		byRun[c.RunID] = append(byRun[c.RunID], c)
	}
	for _, id := range runs {
		hist, err := e.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got := byRun[id]
		if len(got) != len(hist) {
			t.Fatalf("run %s: %d changes in the feed, %d events in its history", id, len(got), len(hist))
		}
		for i, ev := range hist {
			if got[i].Position != ev.ID || got[i].Kind != ev.Kind {
				t.Fatalf("run %s, change %d: %s at %d, history has %s at %d", id, i, got[i].Kind, got[i].Position, ev.Kind, ev.ID)
			}
		}
	}
}

func TestChangesCarryEveryRunEventInOrder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	var runs []string
	for i := range 5 {
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID())
	}
	changes := collectChanges(t, ctx, e, &flow.ChangesOptions{}, func(cs []flow.Change) bool { return finishedRuns(cs) == len(runs) })
	checkFeedMatchesHistories(t, ctx, e, changes, runs)
	kinds := map[string]bool{}
	for _, c := range changes {
		kinds[c.Kind] = true
	}
	for _, k := range []string{flow.EventRunStarted, flow.EventRunClaimed, flow.EventStepStarted, flow.EventStepCompleted, flow.EventRunCompleted} {
		if !kinds[k] {
			t.Errorf("no %s change in the feed", k)
		}
	}
	// A read that does not follow stops at the newest change.
	n := 0
	for _, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != len(changes) {
		t.Errorf("a read without Follow got %d changes, want %d", n, len(changes))
	}
}

// TestChangesGapFreeWithTwoEngines runs two engines on one database, with
// many goroutines starting runs, while a consumer follows the feed: it
// must receive every event of every run exactly once, in order. On
// PostgreSQL the engines' transactions commit out of ID order all the
// time, which the feed must hold back.
func TestChangesGapFreeWithTwoEngines(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	engines := []*flow.Engine{openEngine(t, path, nil), openEngine(t, path, nil)}
	wf := doubler("doubler", 1)
	for _, e := range engines {
		flow.Register(e, wf)
		startEngine(t, e)
	}
	const starters, perStarter = 8, 10
	var mu sync.Mutex
	var runs []string
	var wg sync.WaitGroup
	for g := range starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perStarter {
				r, err := flow.Start(ctx, engines[(g+i)%2], wf, i, &flow.StartOptions{RunID: fmt.Sprintf("g%d-%d", g, i)})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				runs = append(runs, r.ID())
				mu.Unlock()
			}
		}()
	}
	changes := collectChanges(t, ctx, engines[0], &flow.ChangesOptions{Consumer: "audit"}, func(cs []flow.Change) bool {
		return finishedRuns(cs) == starters*perStarter
	})
	wg.Wait()
	checkFeedMatchesHistories(t, ctx, engines[0], changes, runs)
}

// TestChangesConsumerResumes checks that a named consumer resumes after
// the changes its earlier reads handled, and gets again the one its loop
// broke on (at least once).
func TestChangesConsumerResumes(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	for i := range 3 {
		if _, err := runToEndID(ctx, e, wf, i); err != nil {
			t.Fatal(err)
		}
	}
	var all []flow.Change
	for c, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, c)
	}
	opts := &flow.ChangesOptions{Consumer: "mailer"}
	var first []flow.Change
	for c, err := range e.Changes(ctx, opts) {
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, c)
		if len(first) == 4 {
			break // the 4th is not acknowledged
		}
	}
	var rest []flow.Change
	for c, err := range e.Changes(ctx, opts) {
		if err != nil {
			t.Fatal(err)
		}
		rest = append(rest, c)
	}
	if len(rest) != len(all)-3 || rest[0].Position != all[3].Position {
		t.Fatalf("second read got %d changes from position %d, want %d from %d", len(rest), rest[0].Position, len(all)-3, all[3].Position)
	}
	cs, err := e.ChangeConsumers(ctx)
	if err != nil || len(cs) != 1 || cs[0].Name != "mailer" || cs[0].Position != all[len(all)-1].Position {
		t.Fatalf("ChangeConsumers = %+v, %v; want mailer at %d", cs, err, all[len(all)-1].Position)
	}
}

func runToEndID(ctx context.Context, e *flow.Engine, wf flow.Workflow[int, int], n int) (string, error) {
	r, err := flow.Start(ctx, e, wf, n, nil)
	if err != nil {
		return "", err
	}
	_, err = r.Result(ctx)
	return r.ID(), err
}

// TestChangesConsumerBehindRetention lets retention delete runs a consumer
// has not read: its next read fails with a FeedBehindError naming it, its
// position and the oldest complete position. With
// RetentionWaitsForConsumers, retention keeps them until it read them.
func TestChangesConsumerBehindRetention(t *testing.T) {
	t.Parallel()
	for _, wait := range []bool{false, true} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			t.Parallel()
			ctx := waitCtx(t)
			cfg := testConfig()
			cfg.Retention = flow.Retention{Completed: time.Millisecond}
			cfg.CleanInterval = -1
			cfg.RetentionWaitsForConsumers = wait
			e := openEngine(t, dbPath(t), cfg)
			wf := doubler("doubler", 1)
			flow.Register(e, wf)
			startEngine(t, e)
			// Register the consumer before any change.
			for _, err := range e.Changes(ctx, &flow.ChangesOptions{Consumer: "slow"}) {
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := runToEndID(ctx, e, wf, 1); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
			n, err := e.Clean(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []flow.Change
			var readErr error
			for c, err := range e.Changes(ctx, &flow.ChangesOptions{Consumer: "slow"}) {
				if err != nil {
					readErr = err
					break
				}
				got = append(got, c)
			}
			if wait {
				if n != 0 || readErr != nil || len(got) == 0 || got[len(got)-1].Kind != flow.EventRunCompleted {
					t.Fatalf("retention deleted %d runs, the consumer read %d changes, err %v; want 0 deleted and the whole run", n, len(got), readErr)
				}
				// Acknowledged now: retention may go on.
				if n, err := e.Clean(ctx); err != nil || n != 1 {
					t.Fatalf("clean after the consumer read the run: %d, %v; want 1", n, err)
				}
				return
			}
			var behind *flow.FeedBehindError
			if n != 1 || !errors.As(readErr, &behind) || !errors.Is(readErr, flow.ErrFeedBehind) {
				t.Fatalf("retention deleted %d runs, read error %v; want 1 and a FeedBehindError", n, readErr)
			}
			if behind.Consumer != "slow" || behind.Position != 0 || behind.OldestComplete() <= 1 {
				t.Fatalf("FeedBehindError = %+v", behind)
			}
			for _, want := range []string{`"slow"`, "position 0", fmt.Sprintf("oldest position still complete is %d", behind.OldestComplete())} {
				if !strings.Contains(readErr.Error(), want) {
					t.Errorf("error %q does not say %s", readErr, want)
				}
			}
		})
	}
}

// TestChangeConsumerWaitsOutALockedDatabase is issue 19's third item: a
// consumer's acknowledgement was a single write, so a read of the change
// feed ended with "acknowledge change feed position …: database is
// locked" when other processes kept the lock for its busy timeout. Here a
// third connection holds the write lock for several busy timeouts, three
// times: while a new consumer registers and reads, while it reads again
// after new changes, and while it is deleted. Each write waits the lock
// out, as the engine's own writes do, and succeeds.
func TestChangeConsumerWaitsOutALockedDatabase(t *testing.T) {
	skipOnPostgres(t, "the busy timeout of SQLite's single write lock")
	t.Parallel()
	ctx := waitCtx(t)
	const busy = 50 * time.Millisecond
	path := dbPath(t)
	e := openSQLiteEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowsqlite.Options{BusyTimeout: busy})
	wf := flow.Workflow[int, int]{Name: "id", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)
	start := func(n int) {
		t.Helper()
		if _, err := flow.Start(ctx, e, wf, n, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Fault injection: another process holding SQLite's write lock, which
	// only a connection of its own can take.
	locker := rawDB(t, path)
	// lock takes the write lock on a connection of its own, as another
	// process would, and gives it back after eight busy timeouts.
	lock := func() {
		t.Helper()
		conn, err := locker.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(8*busy, func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
		})
	}
	// read reads the feed to its end as consumer "audit" and returns the
	// last position it saw.
	read := func(what string) int64 {
		t.Helper()
		var last int64
		for c, err := range e.Changes(ctx, &flow.ChangesOptions{Consumer: "audit"}) {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			last = c.Position
		}
		return last
	}
	acked := func() int64 {
		t.Helper()
		cs, err := e.ChangeConsumers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 {
			t.Fatalf("consumers %+v, want audit alone", cs)
		}
		return cs[0].Position
	}

	start(1)
	start(2)
	lock()
	first := read("a new consumer's read under a lock")
	if first == 0 {
		t.Fatal("the read delivered nothing")
	}
	if got := acked(); got != first {
		t.Errorf("audit acknowledged %d, want %d", got, first)
	}

	start(3)
	lock()
	if second := read("a consumer's read under a lock"); second <= first {
		t.Errorf("the second read ended at %d, want past %d", second, first)
	} else if got := acked(); got != second {
		t.Errorf("audit acknowledged %d, want %d", got, second)
	}

	lock()
	if deleted, err := e.DeleteChangeConsumer(ctx, "audit"); err != nil || !deleted {
		t.Fatalf("delete a consumer under a lock: %v, %v", deleted, err)
	}
}
