package flow_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// soakEnv runs TestRetentionSoakPG for the duration it names (each of its
// two set-ups): FLOWLITE_PG_SOAK=20s in CI, minutes by hand.
const soakEnv = "FLOWLITE_PG_SOAK"

// TestRetentionSoakPG starts no-op jobs at a steady rate (EnqueueMany every
// 100 ms) and works them, while a cleaner deletes the runs past a
// retention of a few seconds, once with the history in one table
// (deleted row by row) and once partitioned (dropped a partition at a
// time), for the same duration each. Partitions span a sixth of it (at
// least a second) and retention is two spans, so the soak fills and drops
// several. Both set-ups must keep up: at the end no run finished longer ago
// than its retention, the partitions' grace and two cleaner passes is
// still there, and with partitions, their number stays bounded. It logs,
// for each, the runs deleted, the cleaner's time per deleted run, the size
// of runs, steps and events with their indexes, and their dead rows.
//
//	FLOWLITE_PG_TEST=1 FLOWLITE_PG_SOAK=2m go test -run TestRetentionSoakPG -v ./flow/
func TestRetentionSoakPG(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(soakEnv))
	if err != nil {
		t.Skipf("%s (a duration) runs the retention soak: %v", soakEnv, err)
	}
	if err := pgtest.Reachable(); err != nil {
		t.Fatalf("no PostgreSQL server: %v", err)
	}
	span := max(d/6, time.Second).Truncate(time.Second)
	var results []soakResult
	for _, partitions := range []time.Duration{0, span} {
		results = append(results, retentionSoak(t, d, span, partitions))
	}
	t.Logf("retention soak, %v each, %d jobs/s, retention %v, partitions of %v:", d, soakRate, 2*span, span)
	t.Logf("%-12s %9s %9s %14s %10s %10s %10s %10s", "history", "started", "deleted", "cleaner µs/run", "runs MiB", "steps MiB", "events MiB", "dead rows")
	for _, r := range results {
		t.Logf("%-12s %9d %9d %14.1f %10.1f %10.1f %10.1f %10d", r.name, r.started, r.deleted, r.perRun(), r.mib["runs"], r.mib["steps"], r.mib["events"], r.dead)
	}
	if len(results) == 2 && results[1].perRun() > 0 {
		t.Logf("cleaner time per deleted run, rows ÷ partitions: %.1f×", results[0].perRun()/results[1].perRun())
	}
}

// soakRate is the jobs started per second in the soak.
const soakRate = 1000

type soakResult struct {
	name             string
	started, deleted int
	cleaning         time.Duration
	mib              map[string]float64
	dead             int64
}

func (r soakResult) perRun() float64 {
	if r.deleted == 0 {
		return 0
	}
	return float64(r.cleaning.Microseconds()) / float64(r.deleted)
}

// retentionSoak runs one set-up of TestRetentionSoakPG: history
// partitioned by partitions (0: one table).
func retentionSoak(t *testing.T, d, span, partitions time.Duration) soakResult {
	t.Helper()
	ctx := t.Context()
	dsn, schema := pgtest.Schema(t)
	retention, interval := 2*span, span/4
	cfg := &flow.Config{
		Queues:         map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 64}},
		PollInterval:   50 * time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
		ReportInterval: time.Minute,
		CleanInterval:  -1, // the loop below is the cleaner, timed
		Retention:      flow.Retention{Completed: retention},
	}
	e, err := flowpg.Open(ctx, dsn, cfg, &flowpg.Options{Schema: schema, HistoryPartitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res := soakResult{name: "one table", mib: map[string]float64{}}
	if partitions > 0 {
		res.name = "partitioned"
	}

	soakCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	var cleanErr error
	wg.Add(1)
	go func() { // the cleaner
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-soakCtx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			n, err := e.Clean(ctx)
			if err != nil {
				cleanErr = err
				return
			}
			res.deleted += n
			res.cleaning += time.Since(start)
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	items := make([]flow.EnqueueItem[int], soakRate/10)
	for soakCtx.Err() == nil {
		select {
		case <-soakCtx.Done():
		case <-tick.C:
			for i := range items {
				items[i] = flow.EnqueueItem[int]{Args: res.started + i}
			}
			if _, err := flow.EnqueueMany(ctx, e, noopJob, items); err != nil {
				t.Fatal(err)
			}
			res.started += len(items)
		}
	}
	tick.Stop()
	wg.Wait()
	if cleanErr != nil {
		t.Fatalf("%s: clean: %v", res.name, cleanErr)
	}

	// Keeping up: nothing finished before the retention, the partitions'
	// grace (two spans) and two passes is left, with a second of slack for
	// the machine.
	grace := time.Duration(0)
	if partitions > 0 {
		grace = 2 * partitions
	}
	oldest := time.Now().Add(-(retention + grace + 2*interval + time.Second)).UnixMilli()
	var stale int
	q := fmt.Sprintf("SELECT count(*) FROM %s.runs WHERE status = 'completed' AND finished_at < $1", schema)
	if err := db.QueryRowContext(ctx, q, oldest).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale > 0 {
		t.Errorf("%s: the cleaner fell behind: %d runs finished more than %v ago are left", res.name, stale, retention+grace+2*interval+time.Second)
	}
	if res.deleted == 0 {
		t.Errorf("%s: nothing deleted in %v", res.name, d)
	}
	for _, table := range []string{"runs", "steps", "events"} {
		var bytes int64
		// The sum over the partitions of a partitioned table; an ordinary
		// table is no partition tree.
		q := "SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass)), pg_total_relation_size($1::regclass))"
		if err := db.QueryRowContext(ctx, q, schema+"."+table).Scan(&bytes); err != nil {
			t.Fatal(err)
		}
		res.mib[table] = float64(bytes) / (1 << 20)
	}
	q = "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = $1"
	if err := db.QueryRowContext(ctx, q, schema).Scan(&res.dead); err != nil {
		t.Fatal(err)
	}
	if partitions > 0 {
		var names []string
		rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT name FROM %s.history_partitions ORDER BY hi", schema))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		// Kept: the spans of retention and grace, the current one, the
		// three made ahead and the two passes' worth, and one of slack.
		most := int((retention+grace)/partitions) + 1 + 3 + 2 + 1
		if len(names) > most || slices.Contains(names, "events_before") {
			t.Errorf("%s: %d partitions left (%s), want at most %d and events_before dropped", res.name, len(names), strings.Join(names, " "), most)
		}
	}
	return res
}
