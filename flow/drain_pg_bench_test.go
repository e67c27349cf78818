package flow_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// BenchmarkDrainJobsPG records b.N no-op jobs on PostgreSQL (FLOWLITE_PG_DSN,
// by default the local server) with EnqueueManyTx, 1,000 per transaction,
// then starts one engine (concurrency 64, the default pool) and reports how
// fast it drains them: jobs/s overall, and of the first and last tenth of
// the drain, which are equal when a claim's cost does not depend on the
// backlog. The schema is fresh and never analyzed, as after a bulk insert.
//
//	go test -run '^$' -bench DrainJobsPG -benchtime 10000x ./flow/
func BenchmarkDrainJobsPG(b *testing.B) {
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
	}
	e, err := flowpg.Open(ctx, dsn, cfg, &flowpg.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, noopJob)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for lo := 0; lo < b.N; lo += 1000 {
		items := make([]flow.EnqueueItem[int], 0, 1000)
		for i := lo; i < min(lo+1000, b.N); i++ {
			items = append(items, flow.EnqueueItem[int]{Args: i})
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := flow.EnqueueManyTx(ctx, e, tx, noopJob, items); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	count := fmt.Sprintf("SELECT count(*) FROM %s.runs WHERE status = 'completed'", schema)
	b.ResetTimer()
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	tenth := max(int64(b.N)/10, 1)
	var firstTenth, lastTenthFrom time.Time
	for {
		var done int64
		if err := db.QueryRowContext(ctx, count).Scan(&done); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		if firstTenth.IsZero() && done >= tenth {
			firstTenth = now
		}
		if lastTenthFrom.IsZero() && done >= int64(b.N)-tenth {
			lastTenthFrom = now
		}
		if done >= int64(b.N) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	end := time.Now()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/end.Sub(start).Seconds(), "jobs/s")
	b.ReportMetric(float64(tenth)/firstTenth.Sub(start).Seconds(), "first-tenth-jobs/s")
	b.ReportMetric(float64(tenth)/end.Sub(lastTenthFrom).Seconds(), "last-tenth-jobs/s")
	if err := e.Stop(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEnqueueConcurrentPG is BenchmarkEnqueueConcurrent on
// PostgreSQL: b.N no-op jobs enqueued by 16 goroutines at once on an
// engine that works no queue, each start its own transaction (one
// statement, RunStartAlone). Run it with:
//
//	FLOWLITE_PG_TEST=1 go test -run '^$' -bench EnqueueConcurrentPG -benchtime 20000x ./flow/
func BenchmarkEnqueueConcurrentPG(b *testing.B) {
	if err := pgtest.Reachable(); err != nil {
		b.Skipf("no PostgreSQL server: %v", err)
	}
	dsn, schema := pgtest.Schema(b)
	e, err := flowpg.Open(context.Background(), dsn, &flow.Config{
		PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	}, &flowpg.Options{Schema: schema, MaxConns: producers})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	enqueueConcurrently(b, e)
}
