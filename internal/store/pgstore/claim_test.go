package pgstore_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// claimParams is a claim of up to max runs of queue q at base+10 by owner,
// for versions 1 of job (whose first step is "work") and plain (none).
func claimParams(owner string, max int) store.ClaimAndBeginParams {
	return store.ClaimAndBeginParams{
		RunClaimParams: store.RunClaimParams{
			Queue: "q", Known: []flowtype.WorkflowKey{{Name: "job", Version: 1}, {Name: "plain", Version: 1}},
			Owner: owner, Max: max, Now: base + 10, LeaseExpiresAt: base + 30_000,
		},
		FirstSteps: []store.FirstStep{{Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, Name: "work", Input: []byte(`"in"`)}},
	}
}

// insertQueued records runs of queue q at base.
func insertQueued(t *testing.T, s *pgstore.Store, ps ...store.RunInsertParams) {
	t.Helper()
	for i := range ps {
		ps[i].Queue, ps[i].Input, ps[i].Now = "q", []byte("{}"), base
	}
	if err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.RunInsertMany(t.Context(), ps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// eventsInOrder returns the events of runs, in the order they were
// appended, as "kind run step attempt detail".
func eventsInOrder(t *testing.T, s *pgstore.Store, runs ...string) []string {
	t.Helper()
	var all []store.Event
	for _, id := range runs {
		events, err := s.Reader().EventList(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, events...)
	}
	slices.SortFunc(all, func(a, b store.Event) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]string, len(all))
	for i, e := range all {
		out[i] = fmt.Sprintf("%s %s %s %d %s", e.Kind, e.RunID, e.Step, e.Attempt, e.Detail)
		if e.At != base+10 {
			t.Errorf("%s: at %d, want the claim's now %d", out[i], e.At, base+10)
		}
	}
	return out
}

// TestClaimAndBegin checks the one-statement claim against what a claim in
// Write does (RunClaim, then the engine's first attempts and events): runs
// of the highest priority first, oldest first within one, only due runs
// of known versions, at most Max; the first attempt of the first step
// begun for the fresh runs of a workflow that declares one, unless past
// their deadline, and not for a run claimed before; run_claimed events
// and then step_started ones, in claim order.
func TestClaimAndBegin(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NoWakes: true})
	ctx := t.Context()
	job := flowtype.WorkflowKey{Name: "job", Version: 1}

	// "again" is claimed and given back first: its next claim is not its
	// first, and its execution reads its steps instead.
	insertQueued(t, s, store.RunInsertParams{ID: "again", Workflow: job, Priority: 1, RunAt: base + 3})
	if err := s.Write(ctx, func(tx store.Tx) error {
		runs, err := tx.RunClaim(ctx, claimParams("w0", 1).RunClaimParams)
		if err != nil || len(runs) != 1 {
			return fmt.Errorf("claim %v: %w", runs, err)
		}
		return tx.RunRelease(ctx, runs[0].Lease(), store.RunReleaseParams{RunAt: base + 3, WakeSeq: runs[0].WakeSeq, Now: base + 5})
	}); err != nil {
		t.Fatal(err)
	}
	insertQueued(t, s,
		store.RunInsertParams{ID: "low", Workflow: job, Priority: 0, RunAt: base},
		store.RunInsertParams{ID: "high-old", Workflow: job, Priority: 5, RunAt: base},
		store.RunInsertParams{ID: "high-new", Workflow: job, Priority: 5, RunAt: base + 1},
		store.RunInsertParams{ID: "plain", Workflow: flowtype.WorkflowKey{Name: "plain", Version: 1}, Priority: 5, RunAt: base + 2},
		store.RunInsertParams{ID: "late", Workflow: job, Priority: 9, RunAt: base + 60_000},
		store.RunInsertParams{ID: "other-version", Workflow: flowtype.WorkflowKey{Name: "job", Version: 2}, Priority: 9, RunAt: base},
		store.RunInsertParams{ID: "past-deadline", Workflow: job, Priority: 1, RunAt: base, Deadline: base},
		store.RunInsertParams{ID: "last", Workflow: job, Priority: 0, RunAt: base + 4},
	)

	claim := func(max int) []string {
		t.Helper()
		claimed, err := s.ClaimAndBegin(ctx, claimParams("w1", max))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range claimed {
			got = append(got, c.ID+":"+c.Begun)
			wantFence := int64(1)
			if c.ID == "again" {
				wantFence = 2
			}
			if c.Status != flowtype.StatusRunning || c.LeaseOwner != "w1" || c.Fence != wantFence || c.LeaseExpiresAt != base+30_000 {
				t.Errorf("run %s claimed as %s by %q, fence %d, lease until %d", c.ID, c.Status, c.LeaseOwner, c.Fence, c.LeaseExpiresAt)
			}
		}
		return got
	}
	if got, want := claim(4), []string{"high-old:work", "high-new:work", "plain:", "past-deadline:"}; !slices.Equal(got, want) {
		t.Errorf("first claim %v, want %v", got, want)
	}
	if got, want := claim(10), []string{"again:", "low:work", "last:work"}; !slices.Equal(got, want) {
		t.Errorf("second claim %v, want %v", got, want)
	}
	if got := claim(10); len(got) != 0 {
		t.Errorf("a third claim took %v; only a run not due and one of an unknown version are left", got)
	}

	got := eventsInOrder(t, s, "high-old", "high-new", "plain", "past-deadline", "again", "low", "last")
	want := []string{
		"run_claimed high-old  0 fence 1, w1",
		"run_claimed high-new  0 fence 1, w1",
		"run_claimed plain  0 fence 1, w1",
		"run_claimed past-deadline  0 fence 1, w1",
		"step_started high-old work 1 ",
		"step_started high-new work 1 ",
		"run_claimed again  0 fence 2, w1",
		"run_claimed low  0 fence 1, w1",
		"run_claimed last  0 fence 1, w1",
		"step_started low work 1 ",
		"step_started last work 1 ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%q\nwant:\n%q", got, want)
	}

	for _, id := range []string{"high-old", "high-new", "plain", "past-deadline", "again", "low", "last"} {
		steps, err := s.Reader().StepList(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		begun := slices.Contains([]string{"high-old", "high-new", "low", "last"}, id)
		switch {
		case !begun && len(steps) != 0:
			t.Errorf("run %s: steps %+v, want none", id, steps)
		case begun && (len(steps) != 1 || steps[0].Name != "work" || steps[0].Occurrence != 0 ||
			steps[0].Status != store.StepRunning || steps[0].Attempts != 1 || string(steps[0].Input) != `"in"`):
			t.Errorf("run %s: steps %+v, want the first attempt of work with input \"in\"", id, steps)
		}
	}
}

// TestClaimAndBeginPausedQueue checks that a paused queue gives nothing
// and a resumed one its runs.
func TestClaimAndBeginPausedQueue(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NoWakes: true})
	ctx := t.Context()
	insertQueued(t, s, store.RunInsertParams{ID: "r", Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, RunAt: base})
	pause := func(paused bool) {
		t.Helper()
		if err := s.Write(ctx, func(tx store.Tx) error {
			_, err := tx.QueueSetPaused(ctx, "q", paused, base)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	pause(true)
	if claimed, err := s.ClaimAndBegin(ctx, claimParams("w", 10)); err != nil || len(claimed) != 0 {
		t.Fatalf("claim of a paused queue: %v, %v; want nothing", claimed, err)
	}
	if events, err := s.Reader().EventList(ctx, "r"); err != nil || len(events) != 0 {
		t.Fatalf("events after a claim of a paused queue: %v, %v; want none", events, err)
	}
	pause(false)
	if claimed, err := s.ClaimAndBegin(ctx, claimParams("w", 10)); err != nil || len(claimed) != 1 {
		t.Fatalf("claim of the resumed queue: %v, %v; want run r", claimed, err)
	}
}

// TestClaimAndBeginConcurrently has four claimers drain 300 runs: each run
// is claimed once, with one run_claimed and one step_started event and one
// step attempt, whichever claimer took it.
func TestClaimAndBeginConcurrently(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NoWakes: true})
	ctx := t.Context()
	const n = 300
	ps := make([]store.RunInsertParams, n)
	for i := range ps {
		ps[i] = store.RunInsertParams{ID: fmt.Sprintf("r%03d", i), Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, Priority: i % 3, RunAt: base}
	}
	insertQueued(t, s, ps...)
	owner := drainWithClaimers(t, s, 4, 7)
	if len(owner) != n {
		t.Fatalf("%d runs claimed, want %d", len(owner), n)
	}
	for _, p := range ps {
		events, err := s.Reader().EventList(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := s.Reader().StepList(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 2 || events[0].Kind != "run_claimed" || events[0].Detail != "fence 1, "+owner[p.ID] ||
			events[1].Kind != "step_started" || len(steps) != 1 || steps[0].Attempts != 1 {
			t.Fatalf("run %s: events %+v, steps %+v", p.ID, events, steps)
		}
	}
}

// drainWithClaimers has claimers goroutines claim up to max runs at a time
// with ClaimAndBegin until the queue is empty, and returns which claimer
// took each run; a claim's error, or a run taken twice, fails t.
func drainWithClaimers(t *testing.T, s *pgstore.Store, claimers, max int) map[string]string {
	t.Helper()
	var mu sync.Mutex
	owner := map[string]string{}
	var wg sync.WaitGroup
	for w := range claimers {
		name := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				claimed, err := s.ClaimAndBegin(t.Context(), claimParams(name, max))
				if err != nil {
					t.Errorf("claimer %s: %v", name, err)
					return
				}
				if len(claimed) == 0 {
					return
				}
				mu.Lock()
				for _, c := range claimed {
					if prev, dup := owner[c.ID]; dup {
						t.Errorf("run %s claimed by %s and by %s", c.ID, prev, name)
					}
					owner[c.ID] = name
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return owner
}

// TestClaimAndBeginClosed checks that a closed store claims nothing and
// says why.
func TestClaimAndBeginClosed(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NoWakes: true})
	s.Close()
	if _, err := s.ClaimAndBegin(t.Context(), claimParams("w", 1)); !errors.Is(err, flowtype.ErrClosed) {
		t.Fatalf("claim on a closed store: %v, want ErrClosed", err)
	}
}

// TestClaimAndBeginReadsOnlyWhatItClaims is TestClaimReadsOnlyWhatItClaims
// for the one-statement claim: with 3,000 ready runs in a table never
// analyzed, and with the generic plan of the prepared statement, a claim
// of 4 reads about 4 runs, never scans a whole table, and sorts only what
// it claimed.
func TestClaimAndBeginReadsOnlyWhatItClaims(t *testing.T) {
	t.Parallel()
	rec := &statementRecorder{prefix: "-- name: RunClaimAndBegin "}
	db, s, schema := openTraced(t, rec)
	ctx := t.Context()
	const ready, claim = 3000, 4
	ps := make([]store.RunInsertParams, ready)
	for i := range ps {
		ps[i] = store.RunInsertParams{ID: fmt.Sprintf("run%05d", i), Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, RunAt: base}
	}
	insertQueued(t, s, ps...)
	claimed, err := s.ClaimAndBegin(ctx, claimParams("w", claim))
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != claim || claimed[0].ID != "run00000" || claimed[0].Begun != "work" {
		t.Fatalf("claimed %+v; want %d from run00000, their first step begun", claimed, claim)
	}
	query, args := rec.last(t)
	for _, mode := range []string{"custom", "generic"} {
		t.Run(mode, func(t *testing.T) {
			plan := explainAnalyze(t, db, schema, mode, query, args)
			// 1 run read by the priorities' loose scan, 4 read and locked
			// through runs_ready (past the dead entries of the 4 claimed
			// above), 4 updated through the primary key: 9.
			if read := plan.tableRowsRead("runs"); read > 3*claim+2 {
				t.Errorf("the claim read %.0f rows of runs to claim %d of %d ready ones", read, claim, ready-claim)
			}
			plan.walk(func(n planNode) {
				if n.NodeType == "Seq Scan" {
					t.Errorf("the claim's plan scans all of %s", n.Relation)
				}
				if n.sortsTable("runs") {
					t.Errorf("the claim's plan sorts runs read from the table")
				}
			})
			if t.Failed() {
				b, _ := json.MarshalIndent(plan, "", "  ")
				t.Logf("plan:\n%s", b)
			}
		})
	}
}

// TestClaimAndBeginOutlivesItsCaller checks the claim's grace: a claim
// whose caller's context ends while the statement waits goes on, and
// reports the runs it leased, if the server answers within the grace; if
// not, it is cancelled, and nothing of it stays. The statement waits for
// a lock on the events table that the test holds: released shortly after
// the caller's end within a grace of a minute, and only after the claim
// returned within a grace of 50 ms, so that neither outcome depends on
// how fast the machine is.
func TestClaimAndBeginOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		grace  time.Duration
		claims bool
	}{
		{"server answers within the grace", time.Minute, true},
		{"server does not answer", 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			schema := freshSchema()
			s := openStore(t, pgstore.Options{Schema: schema, NoWakes: true})
			pgstore.SetClaimGrace(s, tc.grace)
			insertQueued(t, s, store.RunInsertParams{ID: "r", Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, RunAt: base})
			lock, err := pgstore.DB(s).BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Rollback()
			if _, err := lock.ExecContext(t.Context(), "LOCK TABLE "+schema+".events IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			go func() {
				time.Sleep(100 * time.Millisecond)
				cancel() // the engine stops
				if tc.claims {
					time.Sleep(100 * time.Millisecond)
					lock.Rollback()
				}
			}()
			claimed, err := s.ClaimAndBegin(ctx, claimParams("w", 1))
			lock.Rollback()
			if tc.claims {
				if err != nil || len(claimed) != 1 {
					t.Fatalf("claim cancelled by its caller but answered within the grace: %v, %v; want run r", claimed, err)
				}
			} else if err == nil {
				t.Fatalf("claim with no answer within the grace: %v; want an error", claimed)
			}
			run, err := s.Reader().RunGet(t.Context(), "r")
			if err != nil {
				t.Fatal(err)
			}
			events, err := s.Reader().EventList(t.Context(), "r")
			if err != nil {
				t.Fatal(err)
			}
			leased := run.LeaseOwner == "w" && run.Fence == 1 && len(events) == 2
			free := run.LeaseOwner == "" && run.Fence == 0 && run.Status == flowtype.StatusPending && len(events) == 0
			if tc.claims && !leased || !tc.claims && !free {
				t.Errorf("run %s, lease %q, fence %d, %d events", run.Status, run.LeaseOwner, run.Fence, len(events))
			}
		})
	}
}

// TestClaimAndBeginLean checks both one-statement claims with a first step
// whose workflow keeps a lean record: its runs are begun as any, but their
// run_claimed and step_started events are left out (reads derive them);
// the runs of another workflow in the same claim keep theirs.
func TestClaimAndBeginLean(t *testing.T) {
	t.Parallel()
	for _, limited := range []bool{false, true} {
		t.Run(fmt.Sprintf("limited=%t", limited), func(t *testing.T) {
			t.Parallel()
			s := openStore(t, pgstore.Options{NoWakes: true})
			ctx := t.Context()
			job, full := flowtype.WorkflowKey{Name: "job", Version: 1}, flowtype.WorkflowKey{Name: "full", Version: 1}
			insertQueued(t, s,
				store.RunInsertParams{ID: "lean-1", Workflow: job, RunAt: base},
				store.RunInsertParams{ID: "full-1", Workflow: full, RunAt: base + 1},
				store.RunInsertParams{ID: "lean-late", Workflow: job, RunAt: base + 2, Deadline: base},
			)
			if limited {
				if err := s.Write(ctx, func(tx store.Tx) error {
					return tx.QueueLimitsSet(ctx, "q", flowtype.QueueLimits{Concurrency: 10}, base)
				}); err != nil {
					t.Fatal(err)
				}
			}
			p := claimParams("w1", 10)
			p.Known = append(p.Known, full)
			p.FirstSteps = []store.FirstStep{
				{Workflow: job, Name: "work", Input: []byte(`"in"`), Lean: true},
				{Workflow: full, Name: "work", Input: []byte(`"in"`)},
			}
			claimAndBegin := s.ClaimAndBegin
			if limited {
				claimAndBegin = s.ClaimAndBeginLimited
			}
			claimed, err := claimAndBegin(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range claimed {
				got = append(got, c.ID+":"+c.Begun)
			}
			if want := []string{"lean-1:work", "full-1:work", "lean-late:"}; !slices.Equal(got, want) {
				t.Errorf("claimed %v, want %v", got, want)
			}
			// The lean run past its deadline was not begun: its claim is
			// stored, as every claim that begins nothing.
			events := eventsInOrder(t, s, "lean-1", "full-1", "lean-late")
			want := []string{
				"run_claimed full-1  0 fence 1, w1",
				"run_claimed lean-late  0 fence 1, w1",
				"step_started full-1 work 1 ",
			}
			if !slices.Equal(events, want) {
				t.Errorf("events:\n%q\nwant:\n%q", events, want)
			}
			steps, err := s.Reader().StepList(ctx, "lean-1")
			if err != nil || len(steps) != 1 || steps[0].Status != store.StepRunning || steps[0].Attempts != 1 {
				t.Errorf("lean run's steps %+v, %v; want its first attempt begun", steps, err)
			}
		})
	}
}

// TestClaimAndBeginDatesNoEarlierThanTheRun checks that a claim whose Now
// was read before another engine's rescue dated the run later (the claim
// waited for a connection, or looked at the server, meanwhile) dates its
// update, its events and its first attempt no earlier than the run: a
// run's history never reads claimed before rescued. Both single-statement
// claims are checked.
func TestClaimAndBeginDatesNoEarlierThanTheRun(t *testing.T) {
	t.Parallel()
	for _, limited := range []bool{false, true} {
		t.Run(fmt.Sprintf("limited=%v", limited), func(t *testing.T) {
			t.Parallel()
			schema := freshSchema()
			s := openStore(t, pgstore.Options{Schema: schema, NoWakes: true})
			insertQueued(t, s, store.RunInsertParams{ID: "r", Workflow: flowtype.WorkflowKey{Name: "job", Version: 1}, RunAt: base})
			later := base + 5_000 // the rescue's Now, on another engine's clock
			write(t, s, func(ctx context.Context, tx store.Tx) error {
				if limited {
					if err := tx.QueueLimitsSet(ctx, "q", flowtype.QueueLimits{Concurrency: 5}, base); err != nil {
						return err
					}
				}
				_, err := tx.SQL().ExecContext(ctx, fmt.Sprintf("UPDATE %s.runs SET updated_at = $1 WHERE id = 'r'", schema), later)
				return err
			})
			var claimed []store.ClaimedRun
			var err error
			if limited {
				claimed, err = s.ClaimAndBeginLimited(t.Context(), claimParams("w", 1))
			} else {
				claimed, err = s.ClaimAndBegin(t.Context(), claimParams("w", 1))
			}
			if err != nil || len(claimed) != 1 || claimed[0].Begun != "work" {
				t.Fatalf("claim: %+v, %v; want r begun", claimed, err)
			}
			if claimed[0].Run.UpdatedAt != later {
				t.Errorf("claimed run updated at %d, want %d", claimed[0].Run.UpdatedAt, later)
			}
			events, err := s.Reader().EventList(t.Context(), "r")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events {
				if e.At < later {
					t.Errorf("%s dated %d, before the run's %d", e.Kind, e.At, later)
				}
			}
			if len(events) != 2 {
				t.Errorf("events %+v: want run_claimed and step_started", events)
			}
		})
	}
}
