package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// history is a test's view of one schema with partitioned history.
type history struct {
	t      *testing.T
	s      *pgstore.Store
	schema string
}

// event appends an event of kind to run id at the time given.
func (h history) event(id, kind string, at int64) {
	h.t.Helper()
	write(h.t, h.s, func(ctx context.Context, tx store.Tx) error {
		return tx.EventAppend(ctx, store.Event{RunID: id, At: at, Kind: kind})
	})
}

// finish sets run id completed at the time given, behind the API's back:
// the test needs a finish time of its choosing.
func (h history) finish(id string, at int64) {
	h.t.Helper()
	write(h.t, h.s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.SQL().ExecContext(ctx, fmt.Sprintf(
			"UPDATE %s.runs SET status = 'completed', finished_at = $1, lease_owner = NULL WHERE id = $2", h.schema), at, id)
		return err
	})
}

// exists reports whether run id is still there.
func (h history) exists(id string) bool {
	h.t.Helper()
	_, err := h.s.Reader().RunGet(h.t.Context(), id)
	if err != nil && !errors.Is(err, flowtype.ErrRunNotFound) {
		h.t.Fatal(err)
	}
	return err == nil
}

// kinds returns the kinds of run id's events, oldest first.
func (h history) kinds(id string) []string {
	h.t.Helper()
	events, err := h.s.Reader().EventList(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// partitions returns the names of the history's partitions, oldest first.
func (h history) partitions() []store.HistoryPartition {
	h.t.Helper()
	parts, err := h.s.HistoryPartitions(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	return parts
}

// drop drops what the horizon before lets go, every state alike.
func (h history) drop(before int64, waitForFeed bool) store.HistoryDropResult {
	h.t.Helper()
	res, err := h.s.DropHistoryPartitions(h.t.Context(), store.HistoryDropParams{
		Until: time.Now().UnixMilli(), CompletedBefore: before, FailedBefore: before, CancelledBefore: before,
		WaitForFeed: waitForFeed, Max: 10,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

func historySpan(t *testing.T, s *pgstore.Store) time.Duration {
	t.Helper()
	span, err := s.HistorySpan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return span
}

// TestHistoryPartitions turns partitioned history on over a schema that
// has history already, then drops partitions: a partition goes whole, with
// the runs whose history it holds, only when every one of them can go; a
// run still kept (unfinished, or a finished child of an unfinished parent,
// or unread by a feed consumer) keeps its partition and the runs beside it.
func TestHistoryPartitions(t *testing.T) {
	t.Parallel()
	schema := freshSchema()
	plain := history{t: t, s: openStore(t, pgstore.Options{Schema: schema, MaxConns: 4}), schema: schema}
	if span := historySpan(t, plain.s); span != 0 {
		t.Fatalf("span %v before the option", span)
	}
	insertRuns(t, plain.s, "q", "old-done", "old-live")
	plain.event("old-done", "run_started", base)
	plain.event("old-done", "run_completed", base+1)
	plain.event("old-live", "run_started", base+2)
	plain.finish("old-done", base+1)
	before, err := plain.s.Reader().EventList(t.Context(), "old-done")
	if err != nil {
		t.Fatal(err)
	}
	plain.s.Close()
	early := openStore(t, pgstore.Options{Schema: schema, MaxConns: 2}) // open while the option is turned on

	const span = time.Second
	h := history{t: t, s: openStore(t, pgstore.Options{Schema: schema, MaxConns: 4, HistoryPartitions: span}), schema: schema}
	if got := historySpan(t, h.s); got != span {
		t.Fatalf("span %v, want %v", got, span)
	}
	// The history from before is kept, IDs included, in events_before.
	after, err := h.s.Reader().EventList(t.Context(), "old-done")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Fatalf("history changed by partitioning:\n before %v\n after  %v", before, after)
	}
	parts := h.partitions()
	if len(parts) < 4 || parts[0].Name != "events_before" || parts[0].From != math.MinInt64 {
		t.Fatalf("partitions %+v: want events_before and three spans ahead", parts)
	}
	for i := 1; i < len(parts); i++ {
		if parts[i].From != parts[i-1].To || parts[i].To-parts[i].From > span.Milliseconds() {
			t.Fatalf("partitions %+v: not contiguous spans of %v", parts, span)
		}
	}
	p1, p2 := parts[1], parts[2]
	if got := historySpan(t, early); got != span {
		t.Fatalf("a store opened before the option sees span %v, want %v", got, span)
	}
	// A second open, with the option or without it, keeps what is there.
	again := openStore(t, pgstore.Options{Schema: schema, MaxConns: 2})
	if got := historySpan(t, again); got != span {
		t.Fatalf("a store opened without the option sees span %v, want %v", got, span)
	}

	insertRuns(t, h.s, "q", "new-done", "new-child", "new-parent", "unread")
	h.event("new-done", "run_started", p1.From+1)
	h.event("new-done", "run_completed", p1.From+2)
	h.finish("new-done", p1.From+2)
	write(t, h.s, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.SQL().ExecContext(ctx, fmt.Sprintf("UPDATE %s.runs SET parent_id = 'new-parent' WHERE id = 'new-child'", schema))
		return err
	})
	h.event("new-child", "run_started", p2.From+1)
	h.finish("new-child", p2.From+2)
	h.event("new-parent", "run_started", p2.To+1) // the next partition
	// A run whose last event is in a later partition than the one dropped:
	// that event goes by the row delete.
	h.event("new-done", "late", p2.From+3)
	purgedBefore, err := h.s.Reader().FeedPurgedThrough(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// events_before holds old-live, unfinished: kept, old-done with it.
	// p1 holds new-done only: dropped with it, and its late event in p2 goes
	// too. p2 holds new-child, finished, whose parent is not: kept.
	res := h.drop(p2.To, false)
	if res.Dropped != 1 || res.Runs != 1 {
		t.Fatalf("dropped %+v, want p1 with new-done", res)
	}
	if h.exists("new-done") || !h.exists("old-done") || !h.exists("old-live") || !h.exists("new-child") {
		t.Fatal("wrong runs deleted")
	}
	if k := h.kinds("new-done"); len(k) != 0 {
		t.Fatalf("new-done's history outlived it: %v", k)
	}
	var names []string
	for _, p := range h.partitions() {
		names = append(names, p.Name)
	}
	if slices.Contains(names, p1.Name) || !slices.Contains(names, "events_before") || !slices.Contains(names, p2.Name) {
		t.Fatalf("partitions left: %v", names)
	}
	purged, err := h.s.Reader().FeedPurgedThrough(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if purged <= purgedBefore {
		t.Fatalf("purged through %d after the drop, %d before: the feed was not told", purged, purgedBefore)
	}

	// A feed consumer that has not read old-done's and old-live's events
	// keeps events_before, once old-live finished, until it has.
	h.finish("old-live", base+3)
	write(t, h.s, func(ctx context.Context, tx store.Tx) error {
		return tx.FeedConsumerAck(ctx, "slow", 0, base)
	})
	if res := h.drop(p1.To, true); res.Dropped != 0 {
		t.Fatalf("dropped %+v under an unread consumer", res)
	}
	if res := h.drop(p1.To, false); res.Dropped != 1 || res.Runs != 2 {
		t.Fatalf("dropped %+v, want events_before with old-done and old-live", res)
	}
	if h.exists("old-done") || h.exists("old-live") {
		t.Fatal("events_before's runs outlived it")
	}

	// A run started again under an ID whose partition went has none of
	// the old history.
	insertRuns(t, h.s, "q", "new-done")
	h.event("new-done", "again", time.Now().UnixMilli())
	if k := h.kinds("new-done"); !slices.Equal(k, []string{"again"}) {
		t.Fatalf("history of the new new-done: %v", k)
	}

	// Once the parent finished, p2 goes with the child.
	h.finish("new-parent", p2.To+2)
	if res := h.drop(p2.To, false); res.Dropped != 1 || res.Runs != 1 || h.exists("new-child") {
		t.Fatalf("dropped %+v, want p2 with new-child", res)
	}
}

// TestHistoryPartitionsRejectBadInput checks the errors of the option and
// of a drop that cannot be.
func TestHistoryPartitionsRejectBadInput(t *testing.T) {
	t.Parallel()
	dsn := needPG(t)
	for _, span := range []time.Duration{-time.Hour, time.Millisecond} {
		s, err := pgstore.Open(t.Context(), dsn, pgstore.Options{Schema: freshSchema(), HistoryPartitions: span})
		if err == nil {
			s.Close()
			t.Fatalf("span %v accepted", span)
		}
		if !strings.Contains(err.Error(), "history partitions of "+span.String()) {
			t.Fatalf("span %v: %v", span, err)
		}
	}
	s := openStore(t, pgstore.Options{})
	_, err := s.DropHistoryPartitions(t.Context(), store.HistoryDropParams{Max: 1})
	if err == nil || !strings.Contains(err.Error(), "not partitioned") {
		t.Fatalf("drop on a plain history: %v", err)
	}
	p := openStore(t, pgstore.Options{HistoryPartitions: time.Hour})
	if _, err := p.DropHistoryPartitions(t.Context(), store.HistoryDropParams{}); err == nil || !strings.Contains(err.Error(), "max must be positive") {
		t.Fatalf("drop of 0 partitions: %v", err)
	}
}

// TestHistoryPartitionsMigrateDown migrates a schema with partitioned
// history down past migration 14 and up again: the events, their IDs and
// the sequence's position are kept, and the table is one table again.
func TestHistoryPartitionsMigrateDown(t *testing.T) {
	t.Parallel()
	schema := freshSchema()
	h := history{t: t, s: openStore(t, pgstore.Options{Schema: schema, HistoryPartitions: time.Hour}), schema: schema}
	insertRuns(t, h.s, "q", "r1")
	h.event("r1", "run_started", base)
	h.event("r1", "later", time.Now().UnixMilli())
	before, err := h.s.Reader().EventList(t.Context(), "r1")
	if err != nil || len(before) != 2 {
		t.Fatalf("history %v, %v", before, err)
	}
	h.s.Close()

	fsys, err := pgstore.Migrations(schema)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(schema+"."+pgstore.VersionTable))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(t.Context(), 13); err != nil {
		t.Fatalf("migrate down to 13: %v", err)
	}
	var kind string
	if err := db.QueryRowContext(t.Context(), "SELECT relkind::text FROM pg_class WHERE oid = $1::regclass", schema+".events").Scan(&kind); err != nil || kind != "r" {
		t.Fatalf("events after migrating down: relkind %q, %v; want an ordinary table", kind, err)
	}
	s := openStore(t, pgstore.Options{Schema: schema})
	if span := historySpan(t, s); span != 0 {
		t.Fatalf("span %v after migrating down and up without the option", span)
	}
	after, err := s.Reader().EventList(t.Context(), "r1")
	if err != nil || !slices.Equal(before, after) {
		t.Fatalf("history after migrating down and up: %v, %v; want %v", after, err, before)
	}
	write(t, s, func(ctx context.Context, tx store.Tx) error {
		return tx.EventAppend(ctx, store.Event{RunID: "r1", At: time.Now().UnixMilli(), Kind: "next"})
	})
	all, err := s.Reader().EventList(t.Context(), "r1")
	if err != nil || len(all) != 3 || all[2].ID <= before[1].ID {
		t.Fatalf("a new event after migrating down: %v, %v", all, err)
	}
}

// TestHistoryPartitionsWaitForTheFeed: a partition holding nothing but an
// event of no run (appended after its run's delete) is kept while a feed
// consumer the cleaner waits for has not read it, and dropped once it has,
// with the feed's purge mark moved past it.
func TestHistoryPartitionsWaitForTheFeed(t *testing.T) {
	t.Parallel()
	schema := freshSchema()
	h := history{t: t, s: openStore(t, pgstore.Options{Schema: schema, HistoryPartitions: time.Second}), schema: schema}
	p1 := h.partitions()[1]
	// Behind the API's back: EventAppend refuses a run that is gone.
	var id int64
	write(t, h.s, func(ctx context.Context, tx store.Tx) error {
		return tx.SQL().QueryRowContext(ctx, fmt.Sprintf(
			"INSERT INTO %s.events (run_id, at, kind) VALUES ('gone', $1, 'late') RETURNING id", schema), p1.From+1).Scan(&id)
	})
	write(t, h.s, func(ctx context.Context, tx store.Tx) error {
		return tx.FeedConsumerAck(ctx, "slow", id-1, base)
	})
	if res := h.drop(p1.To, true); res.Dropped != 1 { // events_before only
		t.Fatalf("dropped %+v, want events_before alone", res)
	}
	if parts := h.partitions(); parts[0].Name != p1.Name {
		t.Fatalf("partitions %+v: %s dropped before the consumer read it", parts, p1.Name)
	}
	write(t, h.s, func(ctx context.Context, tx store.Tx) error {
		return tx.FeedConsumerAck(ctx, "slow", id, base)
	})
	if res := h.drop(p1.To, true); res.Dropped != 1 || res.Runs != 0 {
		t.Fatalf("dropped %+v once the consumer read it, want %s", res, p1.Name)
	}
	if purged, err := h.s.Reader().FeedPurgedThrough(t.Context()); err != nil || purged != id {
		t.Fatalf("purged through %d, %v; want %d", purged, err, id)
	}
}
