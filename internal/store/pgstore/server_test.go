package pgstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// insertAt records ready runs of queue q created at now.
func insertAt(t testing.TB, s *pgstore.Store, now int64, ids ...string) {
	t.Helper()
	ps := make([]store.RunInsertParams, len(ids))
	for i, id := range ids {
		ps[i] = store.RunInsertParams{ID: id, Workflow: flowtype.WorkflowKey{Name: "job", Version: 1},
			Queue: "q", Input: []byte("{}"), RunAt: now, Now: now}
	}
	if err := s.Write(t.Context(), func(tx store.Tx) error {
		_, err := tx.RunInsertMany(t.Context(), ps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// claimAt claims up to 10 runs of queue q at now, by owner, and returns
// their IDs, sorted.
func claimAt(t *testing.T, s *pgstore.Store, owner string, now int64) []string {
	t.Helper()
	p := claimParams(owner, 10)
	p.Now, p.LeaseExpiresAt = now, now+1_000
	claimed, err := s.ClaimAndBegin(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(claimed))
	for i, c := range claimed {
		ids[i] = c.Run.ID
	}
	slices.Sort(ids)
	return ids
}

// After another server starts answering (a promoted standby), no engine
// claims a run created before it was first seen, nor rescues one, until
// the hold has passed; runs created after are claimed at once. An engine
// opened during the hold learns it from the schema.
func TestServerChangeHoldsOlderRuns(t *testing.T) {
	t.Parallel()
	const hold = 5_000
	s := openStore(t, pgstore.Options{NoWakes: true, ServerChangeHold: hold * time.Millisecond})
	ctx := t.Context()
	if got := claimAt(t, s, "w1", base); len(got) != 0 { // records the server the schema knows
		t.Fatalf("claim of an empty queue: %v", got)
	}
	insertAt(t, s, base, "before", "leased")
	if got := claimAt(t, s, "w1", base+1); len(got) != 2 {
		t.Fatalf("claim before any change: %v, want both runs", got)
	}
	// "leased" keeps its lease (expiring at base+1,001); "before" is
	// given back, and ready again.
	if err := s.Write(ctx, func(tx store.Tx) error {
		r, err := tx.RunGet(ctx, "before")
		if err != nil {
			return err
		}
		return tx.RunRelease(ctx, r.Lease(), store.RunReleaseParams{RunAt: base + 2, WakeSeq: r.WakeSeq, Now: base + 2})
	}); err != nil {
		t.Fatal(err)
	}

	// The schema last knew another server, and so did the store.
	if _, err := pgstore.DB(s).ExecContext(ctx, fmt.Sprintf("UPDATE %s.server_epoch SET server_started = 1", s.Schema())); err != nil {
		t.Fatal(err)
	}
	pgstore.KnowServer(s, 1, true)
	const seen = base + 10 // the claim below sees the change
	if got := claimAt(t, s, "w2", seen); len(got) != 0 {
		t.Fatalf("claim just after the server changed: %v, want none of the runs created before", got)
	}
	rescue := func(s *pgstore.Store, now int64) (ids []string) {
		t.Helper()
		if err := s.Write(ctx, func(tx store.Tx) error {
			rescued, err := tx.RunRescue(ctx, now, 10)
			for _, r := range rescued {
				ids = append(ids, r.ID)
			}
			slices.Sort(ids)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := rescue(s, seen+2_000); len(got) != 0 {
		t.Errorf("rescue during the hold of a lease that expired: %v, want none", got)
	}
	insertAt(t, s, seen+2_000, "after")
	if got := claimAt(t, s, "w2", seen+2_001); !slices.Equal(got, []string{"after"}) {
		t.Errorf("claim during the hold: %v, want only the run created after the change", got)
	}

	// Another engine, opened during the hold, holds the same runs.
	late, err := pgstore.Open(ctx, needPG(t), pgstore.Options{Schema: s.Schema(), NoWakes: true, ServerChangeHold: hold * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if got := claimAt(t, late, "w3", seen+3_000); len(got) != 0 {
		t.Errorf("claim of an engine opened during the hold: %v, want none", got)
	}

	// "after"'s lease expired too.
	if got := rescue(s, seen+hold); !slices.Equal(got, []string{"after", "leased"}) {
		t.Errorf("rescue after the hold: %v, want the runs whose lease expired, the one created before the change among them", got)
	}
	if got := claimAt(t, late, "w3", seen+hold+1); !slices.Equal(got, []string{"after", "before", "leased"}) {
		t.Errorf("claim after the hold: %v, want every run, those created before the change among them", got)
	}
}

// A store that reaches a new server before it looked at which server
// answers claims nothing there, rather than claiming without the hold; its
// next look finds the server the schema knows, and it claims again.
func TestClaimOnAnUnlookedServerTakesNothing(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NoWakes: true})
	if got := claimAt(t, s, "w1", base); len(got) != 0 {
		t.Fatalf("claim of an empty queue: %v", got)
	}
	insertAt(t, s, base, "r")
	pgstore.KnowServer(s, 1, false) // believes it claims on another server, and does not look
	if got := claimAt(t, s, "w1", base+1); len(got) != 0 {
		t.Fatalf("claim on a server the store did not look at: %v, want none", got)
	}
	pgstore.KnowServer(s, 1, true)
	if got := claimAt(t, s, "w1", base+2); !slices.Equal(got, []string{"r"}) {
		t.Errorf("claim after the look: %v, want r (the schema knows this server: no hold)", got)
	}
}

// BenchmarkClaimDuringHold measures a claim of one run created after a
// server change behind a backlog of runs created before it, during the
// hold (held) and with no hold (none, the same claim of a new run at the
// head of a queue whose backlog is newer): during the hold, the claim reads
// past the held runs.
//
//	go test -run '^$' -bench ClaimDuringHold -benchtime 200x ./internal/store/pgstore
func BenchmarkClaimDuringHold(b *testing.B) {
	const backlog = 10_000
	for _, held := range []bool{false, true} {
		b.Run(map[bool]string{false: "none", true: "held"}[held]+"/backlog=10000", func(b *testing.B) {
			ctx := b.Context()
			s, err := pgstore.Open(ctx, needPG(b), pgstore.Options{Schema: freshSchema(), NoWakes: true, ServerChangeHold: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			claim := func(now int64) int {
				p := claimParams("w", 1)
				p.Now, p.LeaseExpiresAt = now, now+time.Hour.Milliseconds()
				claimed, err := s.ClaimAndBegin(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				return len(claimed)
			}
			claim(base) // records the server the schema knows
			old := make([]string, backlog)
			for i := range old {
				old[i] = fmt.Sprintf("old-%05d", i)
			}
			insertAt(b, s, base, old...)
			seen := base + 10
			if held {
				if _, err := pgstore.DB(s).ExecContext(ctx, fmt.Sprintf("UPDATE %s.server_epoch SET server_started = 1", s.Schema())); err != nil {
					b.Fatal(err)
				}
				pgstore.KnowServer(s, 1, true)
				if n := claim(seen); n != 0 {
					b.Fatalf("claim just after the change took %d runs", n)
				}
			}
			fresh := make([]string, b.N)
			for i := range fresh {
				fresh[i] = fmt.Sprintf("new-%06d", i)
			}
			// Without a hold the new runs would queue behind the backlog:
			// they go first (run_at before it), so that both cases claim
			// the run at the head of what they may take.
			at := seen + 2_000
			if !held {
				at = base - 1
			}
			insertAt(b, s, at, fresh...)
			if _, err := pgstore.DB(s).ExecContext(ctx, fmt.Sprintf("ANALYZE %s.runs", s.Schema())); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if n := claim(seen + 3_000); n != 1 {
					b.Fatalf("claim took %d runs, want 1", n)
				}
			}
		})
	}
}
