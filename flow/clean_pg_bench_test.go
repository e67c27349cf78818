package flow_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// BenchmarkCleanPG measures the cleaner on PostgreSQL under a steady load:
// each of 5 rounds records b.N no-op jobs (EnqueueMany), drains them with
// one engine of concurrency 64, and then deletes them all with Clean, as
// the cleaner does once they are past their retention (batches of
// CleanBatch runs, each with its steps and history). It reports the
// cleaner's time per deleted run (median of the rounds) and the size of
// the runs, steps and events tables with their indexes at the end, before
// and after a plain VACUUM, against their size after the first round: the
// space deleting row by row leaves behind (docs/postgresql-production.md,
// "Retention at scale").
//
//	FLOWLITE_PG_TEST=1 go test -run '^$' -bench CleanPG -benchtime 20000x ./flow/
func BenchmarkCleanPG(b *testing.B) {
	if err := pgtest.Reachable(); err != nil {
		b.Skipf("no PostgreSQL server: %v", err)
	}
	ctx := context.Background()
	dsn, schema := pgtest.Schema(b)
	cfg := &flow.Config{
		Queues:         map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 64}},
		PollInterval:   50 * time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
		ReportInterval: time.Minute,
		CleanInterval:  -1, // Clean below is the cleaner
		Retention:      flow.Retention{Completed: time.Millisecond},
	}
	e, err := flowpg.Open(ctx, dsn, cfg, &flowpg.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer e.Stop(ctx)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	size := func() float64 {
		var bytes int64
		q := fmt.Sprintf("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '%s' AND c.relname IN ('runs', 'steps', 'events')", schema)
		if err := db.QueryRowContext(ctx, q).Scan(&bytes); err != nil {
			b.Fatal(err)
		}
		return float64(bytes) / (1 << 20)
	}
	const rounds = 5
	var perRun []float64
	var afterFirst float64
	b.ResetTimer()
	for round := range rounds {
		items := make([]flow.EnqueueItem[int], 0, 1000)
		for lo := 0; lo < b.N; lo += 1000 {
			items = items[:0]
			for i := lo; i < min(lo+1000, b.N); i++ {
				items = append(items, flow.EnqueueItem[int]{Args: i})
			}
			if _, err := flow.EnqueueMany(ctx, e, noopJob, items); err != nil {
				b.Fatal(err)
			}
		}
		for {
			counts, err := e.CountRuns(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if counts[flow.StatusCompleted] >= int64(b.N) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * time.Millisecond) // past the retention
		start := time.Now()
		n, err := e.Clean(ctx)
		took := time.Since(start)
		if err != nil || n != b.N {
			b.Fatalf("round %d: clean deleted %d runs, %v; want %d", round, n, err, b.N)
		}
		perRun = append(perRun, float64(took.Microseconds())/float64(n))
		if round == 0 {
			afterFirst = size()
		}
	}
	b.StopTimer()
	end := size()
	if _, err := db.ExecContext(ctx, fmt.Sprintf("VACUUM %[1]s.runs, %[1]s.steps, %[1]s.events", schema)); err != nil {
		b.Fatal(err)
	}
	vacuumed := size()
	slices.Sort(perRun)
	b.ReportMetric(perRun[len(perRun)/2], "µs/deleted-run")
	b.ReportMetric(afterFirst, "MiB-after-round-1")
	b.ReportMetric(end, "MiB-after-round-5")
	b.ReportMetric(vacuumed, "MiB-vacuumed")
}
