package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgSystem is one system's side of the PostgreSQL scenarios, which run
// the same way for every system: a fresh database, an untimed load, then
// worker processes that are told to start at once, timed until the
// database shows everything finished.
type pgSystem struct {
	name string
	// load creates the system's schema in the database dsn and, for the
	// throughput scenarios, records n jobs or workflows there (untimed).
	load func(ctx context.Context, dsn, scenario string, n int) error
	// doneQuery counts the finished jobs (pg-drain, pg-latency) or
	// workflows (pg-workflows); finishedQuery overrides it per scenario.
	doneQuery     string
	finishedQuery map[string]string
	// pendingQuery counts the jobs waiting to be worked (pg-bulk).
	pendingQuery string
	// produce starts n one-step jobs at latencyRate per second, each
	// carrying the time of its start call (pg-latency).
	produce func(ctx context.Context, dsn string, n int) error
	// worker is one worker process.
	worker workerFunc
	// bulk records n no-op jobs in batches of bulkTxSize through the
	// system's fastest bulk insert, in the database dsn whose schema load
	// created (pg-bulk, timed).
	bulk func(ctx context.Context, dsn string, n int) error
}

// pgPoll is how often the coordinator counts finished work: often enough
// to end a 2 s drain within 1%, rarely enough to cost the server little.
const pgPoll = 20 * time.Millisecond

// throughput is pg-drain and pg-workflows: N jobs or workflows recorded,
// then p.Procs worker processes drain them.
func (s pgSystem) throughput(ctx context.Context, p params) (result, error) {
	dsn, drop, err := freshDatabase(ctx, p.PGDSN, s.name)
	if err != nil {
		return result{}, err
	}
	defer drop()
	if err := s.load(ctx, dsn, p.Scenario, p.N); err != nil {
		return result{}, fmt.Errorf("load: %w", err)
	}
	count, closeCount, err := pgCounter(ctx, dsn, s.query(p.Scenario))
	if err != nil {
		return result{}, err
	}
	defer closeCount()
	w, err := startWorkers(ctx, p, dsn, p.Procs)
	if err != nil {
		return result{}, err
	}
	before, err := dbStats(ctx, p.PGDSN, dsn)
	if err != nil {
		w.kill()
		return result{}, err
	}
	serverBefore, serverLocal := serverCPU()
	start, err := w.goAll()
	if err != nil {
		w.kill()
		return result{}, err
	}
	polls := 0
	end, err := waitFor(ctx, pgPoll, func() (bool, error) {
		polls++
		return atLeast(count, p.N)()
	})
	if err != nil {
		w.kill()
		return result{}, err
	}
	workers, err := w.stop()
	if err != nil {
		return result{}, err
	}
	n, err := count()
	if err != nil {
		return result{}, err
	}
	// The workers have exited, so their statistics are flushed; the
	// counter's own transactions (one per poll, and the last count) are
	// taken off.
	closeCount()
	after, err := dbStats(ctx, p.PGDSN, dsn)
	if err != nil {
		return result{}, err
	}
	r := result{
		Value: float64(p.N) / end.Sub(start).Seconds(), Done: n, RSSKB: selfRSSKB() + workers.rssKB,
		CommitsPer:   float64(after.commits-before.commits-int64(polls)-1) / float64(p.N),
		RowsPer:      float64(after.rows-before.rows) / float64(p.N),
		WorkerCPUPer: perJob(workers.cpu, p.N),
	}
	// The server's share includes the counter's polls and the statistics
	// reads, a few percent of it: the same for every system.
	if serverAfter, ok := serverCPU(); ok && serverLocal {
		r.ServerCPUPer = perJob(serverAfter-serverBefore, p.N)
	}
	return r, nil
}

// bulkInsert is pg-bulk: N no-op jobs recorded in batches of bulkTxSize
// by this process, timed, with no worker running. It reports the rows the
// database wrote per job, as the drains do.
func (s pgSystem) bulkInsert(ctx context.Context, p params) (result, error) {
	dsn, drop, err := freshDatabase(ctx, p.PGDSN, s.name)
	if err != nil {
		return result{}, err
	}
	defer drop()
	if err := s.load(ctx, dsn, p.Scenario, 0); err != nil {
		return result{}, fmt.Errorf("load: %w", err)
	}
	before, err := dbStats(ctx, p.PGDSN, dsn)
	if err != nil {
		return result{}, err
	}
	serverBefore, serverLocal := serverCPU()
	start := time.Now()
	if err := s.bulk(ctx, dsn, p.N); err != nil {
		return result{}, fmt.Errorf("bulk insert: %w", err)
	}
	elapsed := time.Since(start)
	serverAfter, _ := serverCPU()
	after, err := dbStats(ctx, p.PGDSN, dsn)
	if err != nil {
		return result{}, err
	}
	count, closeCount, err := pgCounter(ctx, dsn, s.pendingQuery)
	if err != nil {
		return result{}, err
	}
	defer closeCount()
	n, err := count()
	if err != nil {
		return result{}, err
	}
	r := result{
		Value: float64(p.N) / elapsed.Seconds(), Done: n, RSSKB: selfRSSKB(),
		CommitsPer: float64(after.commits-before.commits) / float64(p.N),
		RowsPer:    float64(after.rows-before.rows) / float64(p.N),
	}
	if serverLocal {
		r.ServerCPUPer = perJob(serverAfter-serverBefore, p.N)
	}
	return r, nil
}

// perJob is d per job of n, in microseconds.
func perJob(d time.Duration, n int) float64 {
	return float64(d.Microseconds()) / float64(n)
}

// pgStats are a database's cumulative counters in pg_stat_database.
type pgStats struct {
	commits int64 // transactions committed
	rows    int64 // rows inserted, updated and deleted
}

// dbStats reads the counters of the database dsn names, over a connection
// to the maintenance database maint, after a pause that lets backends that
// just exited flush theirs.
func dbStats(ctx context.Context, maint, dsn string) (pgStats, error) {
	time.Sleep(300 * time.Millisecond)
	u, err := url.Parse(dsn)
	if err != nil {
		return pgStats{}, fmt.Errorf("parse %s: %w", dsn, err)
	}
	conn, err := pgx.Connect(ctx, maint)
	if err != nil {
		return pgStats{}, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	var st pgStats
	err = conn.QueryRow(ctx, `SELECT xact_commit, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = $1`, strings.TrimPrefix(u.Path, "/")).Scan(&st.commits, &st.rows)
	if err != nil {
		return pgStats{}, fmt.Errorf("read pg_stat_database: %w", err)
	}
	return st, nil
}

// latency is pg-latency: one worker process, and this process starting
// jobs at latencyRate per second; each job's worker measures start→handler,
// so the wake crosses processes through LISTEN/NOTIFY.
func (s pgSystem) latency(ctx context.Context, p params) (result, error) {
	dsn, drop, err := freshDatabase(ctx, p.PGDSN, s.name)
	if err != nil {
		return result{}, err
	}
	defer drop()
	if err := s.load(ctx, dsn, p.Scenario, 0); err != nil {
		return result{}, fmt.Errorf("load: %w", err)
	}
	count, closeCount, err := pgCounter(ctx, dsn, s.query(p.Scenario))
	if err != nil {
		return result{}, err
	}
	defer closeCount()
	w, err := startWorkers(ctx, p, dsn, 1)
	if err != nil {
		return result{}, err
	}
	if _, err := w.goAll(); err != nil {
		w.kill()
		return result{}, err
	}
	// Let the worker finish starting (LISTEN included) before the first
	// job, so the figure is about steady state, not start-up.
	time.Sleep(500 * time.Millisecond)
	if err := s.produce(ctx, dsn, p.N); err != nil {
		w.kill()
		return result{}, fmt.Errorf("produce: %w", err)
	}
	if _, err := waitFor(ctx, pgPoll, atLeast(count, p.N)); err != nil {
		w.kill()
		return result{}, err
	}
	workers, err := w.stop()
	if err != nil {
		return result{}, err
	}
	r := latencyResult(workers.samples)
	r.RSSKB = selfRSSKB() + workers.rssKB
	return r, nil
}

func (s pgSystem) query(scenario string) string {
	if q, ok := s.finishedQuery[scenario]; ok {
		return q
	}
	return s.doneQuery
}
