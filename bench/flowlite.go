package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	_ "modernc.org/sqlite" // database/sql driver "sqlite" for the caller's transactions

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// flowlite's settings. Concurrency is per engine (per process); 64 keeps
// both cores busy on no-op work without a long queue of goroutines waiting
// for the single SQLite writer. On PostgreSQL the runs that end together
// share one outcome write and the runs claimed together one claim, so more
// of them at once means fewer round trips and commits a job: 256 drained
// 2.9x as fast as 64 with one process (7,156 vs 2,494 jobs/s, one sitting);
// River gets MaxWorkers 2000 for the same reason.
const (
	flowliteConcurrency   = 64
	flowlitePGConcurrency = 256
	// flowlitePoll is how late an engine notices work nobody woke it for;
	// in these scenarios wakes arrive in-process (SQLite) or through
	// LISTEN/NOTIFY (PostgreSQL), so the poll is the fallback only.
	flowlitePoll = 50 * time.Millisecond
	// bulkTxSize is how many runs one transaction of the bulk insert holds.
	bulkTxSize = 1000
)

// latencyArgs carry the producer's clock: Unix nanoseconds at the call
// that started the run.
type latencyArgs struct {
	T int64 `json:"t"`
}

func flowliteConfig() *flow.Config { return flowliteConfigOf(flowliteConcurrency) }

func flowlitePGConfig() *flow.Config { return flowliteConfigOf(flowlitePGConcurrency) }

func flowliteConfigOf(concurrency int) *flow.Config {
	return &flow.Config{
		Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: concurrency}},
		PollInterval: flowlitePoll,
		Logger:       slog.New(slog.DiscardHandler),
		// The reports table is not what is measured: write it rarely.
		ReportInterval: time.Minute,
	}
}

// flowliteNoop is the no-op job of the throughput scenarios; done counts
// its handler calls, so a drain knows when to start looking for the end.
// It keeps noopRecord.
func flowliteNoop(done *atomic.Int64) flow.Job[int] {
	return flow.Job[int]{Name: "noop", Record: noopRecord, Handler: func(context.Context, int) error {
		done.Add(1)
		return nil
	}}
}

// noopRecord is the record flowliteNoop keeps: flow.LeanRecord in the
// processes of the flowlite-lean and flowlite-pg-lean systems (leanSQLite,
// leanPG), the full record otherwise.
var noopRecord = flow.FullRecord

// leanSQLite is f with flowliteNoop keeping a lean record.
func leanSQLite(f scenarioFunc) scenarioFunc {
	return func(ctx context.Context, p params) (result, error) {
		noopRecord = flow.LeanRecord
		return f(ctx, p)
	}
}

// leanPG is sys, named NAME-lean, with flowliteNoop keeping a lean record
// in its processes.
func leanPG(sys pgSystem) pgSystem {
	lean := sys
	lean.name += "-lean"
	lean.load = func(ctx context.Context, dsn, scenario string, n int) error {
		noopRecord = flow.LeanRecord
		return sys.load(ctx, dsn, scenario, n)
	}
	lean.worker = func(ctx context.Context, p params, ready func(), start, stop <-chan struct{}) ([]float64, error) {
		noopRecord = flow.LeanRecord
		return sys.worker(ctx, p, ready, start, stop)
	}
	return lean
}

// flowliteThreeSteps is the 3-step workflow: three no-op steps in sequence,
// each checkpointed.
func flowliteThreeSteps(done *atomic.Int64) flow.Workflow[int, int] {
	step := func(name string) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name, Run: func(_ context.Context, n int) (int, error) { return n, nil }}
	}
	s1, s2, s3 := step("step1"), step("step2"), step("step3")
	return flow.Workflow[int, int]{Name: "three_steps", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		n, err := flow.Do(wc, s1, n)
		if err != nil {
			return 0, err
		}
		if n, err = flow.Do(wc, s2, n); err != nil {
			return 0, err
		}
		n, err = flow.Do(wc, s3, n)
		if err == nil {
			done.Add(1)
		}
		return n, err
	}}
}

// flowliteEnqueueBulk records n runs of job, bulkTxSize per transaction of
// db (the engine's database), with EnqueueManyTx: one batch per
// transaction, as River's InsertManyTx does. It is the one place the bulk
// insert scenario and the drains' set-up insert through.
func flowliteEnqueueBulk(ctx context.Context, e *flow.Engine, db *sql.DB, job flow.Job[int], n int) error {
	return flowliteEnqueueBulkWith(ctx, e, db, job, n, nil)
}

// flowliteEnqueueBulkWith is flowliteEnqueueBulk with the options opts
// gives job i (nil: none).
func flowliteEnqueueBulkWith(ctx context.Context, e *flow.Engine, db *sql.DB, job flow.Job[int], n int, opts func(i int) *flow.EnqueueOptions) error {
	return inChunks(ctx, db, n, func(tx *sql.Tx, lo, hi int) error {
		items := make([]flow.EnqueueItem[int], 0, hi-lo)
		for i := lo; i < hi; i++ {
			item := flow.EnqueueItem[int]{Args: i}
			if opts != nil {
				item.Opts = opts(i)
			}
			items = append(items, item)
		}
		_, err := flow.EnqueueManyTx(ctx, e, tx, job, items)
		return err
	})
}

// flowliteStartBulk starts n runs of wf, bulkTxSize per transaction, with
// StartManyTx (the workflows scenarios' untimed set-up).
func flowliteStartBulk(ctx context.Context, e *flow.Engine, db *sql.DB, wf flow.Workflow[int, int], n int) error {
	return inChunks(ctx, db, n, func(tx *sql.Tx, lo, hi int) error {
		items := make([]flow.StartItem[int], 0, hi-lo)
		for i := lo; i < hi; i++ {
			items = append(items, flow.StartItem[int]{In: i})
		}
		_, err := flow.StartManyTx(ctx, e, tx, wf, items)
		return err
	})
}

func inChunks(ctx context.Context, db *sql.DB, n int, f func(tx *sql.Tx, lo, hi int) error) error {
	for lo := 0; lo < n; lo += bulkTxSize {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		hi := min(lo+bulkTxSize, n)
		if err := f(tx, lo, hi); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("insert %d..%d: %w", lo, hi-1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	}
	return nil
}

// flowliteSQLite opens an engine on a fresh file in dir, FULL sync, and a
// pool of one connection on the same file for the callers' transactions.
func flowliteSQLite(ctx context.Context, dir string) (*flow.Engine, *sql.DB, error) {
	path := filepath.Join(dir, "flowlite.db")
	e, err := flowsqlite.Open(ctx, path, flowliteConfig(), &flowsqlite.Options{Synchronous: flowsqlite.SynchronousFull})
	if err != nil {
		return nil, nil, fmt.Errorf("open engine: %w", err)
	}
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("open pool: %w", err)
	}
	db.SetMaxOpenConns(1)
	return e, db, nil
}

// flowliteDrainSQLite bulk-inserts N no-op jobs with the engine stopped,
// then starts it and times the drain until every run is completed.
func flowliteDrainSQLite(ctx context.Context, p params) (result, error) {
	e, db, err := flowliteSQLite(ctx, p.Dir)
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	defer db.Close()
	var handled atomic.Int64
	job := flowliteNoop(&handled)
	flow.RegisterJob(e, job)
	if err := flowliteEnqueueBulk(ctx, e, db, job, p.N); err != nil {
		return result{}, err
	}
	return flowliteDrain(ctx, e, p.N, &handled)
}

// flowliteDrain starts e and waits until n runs are completed: it watches
// the handlers' count (free) and only then the database, so that looking
// does not slow the drain down.
func flowliteDrain(ctx context.Context, e *flow.Engine, n int, handled *atomic.Int64) (result, error) {
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		return result{}, fmt.Errorf("start engine: %w", err)
	}
	var completed int64
	end, err := waitFor(ctx, 2*time.Millisecond, func() (bool, error) {
		if handled.Load() < int64(n) {
			return false, nil
		}
		counts, err := e.CountRuns(ctx)
		completed = counts[flow.StatusCompleted]
		return completed >= int64(n), err
	})
	if err != nil {
		return result{}, err
	}
	if err := e.Stop(ctx); err != nil {
		return result{}, fmt.Errorf("stop engine: %w", err)
	}
	return result{Value: float64(n) / end.Sub(start).Seconds(), Done: int(completed)}, nil
}

// flowliteWorkflowsSQLite starts N 3-step workflows with the engine
// stopped, then times how fast it completes them.
func flowliteWorkflowsSQLite(ctx context.Context, p params) (result, error) {
	e, db, err := flowliteSQLite(ctx, p.Dir)
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	defer db.Close()
	var done atomic.Int64
	wf := flowliteThreeSteps(&done)
	flow.Register(e, wf)
	if err := flowliteStartBulk(ctx, e, db, wf, p.N); err != nil {
		return result{}, err
	}
	return flowliteDrain(ctx, e, p.N, &done)
}

// flowliteBulkSQLite times the bulk insert of N jobs.
func flowliteBulkSQLite(ctx context.Context, p params) (result, error) {
	e, db, err := flowliteSQLite(ctx, p.Dir)
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	defer db.Close()
	job := flowliteNoop(new(atomic.Int64))
	flow.RegisterJob(e, job)
	start := time.Now()
	if err := flowliteEnqueueBulk(ctx, e, db, job, p.N); err != nil {
		return result{}, err
	}
	elapsed := time.Since(start)
	counts, err := e.CountRuns(ctx)
	if err != nil {
		return result{}, err
	}
	return result{Value: float64(p.N) / elapsed.Seconds(), Done: int(counts[flow.StatusPending])}, nil
}

// flowliteEnqueueSQLite times N one-by-one Enqueue calls from callers
// goroutines, the engine stopped (producers only).
func flowliteEnqueueSQLite(callers int) scenarioFunc {
	return func(ctx context.Context, p params) (result, error) {
		e, db, err := flowliteSQLite(ctx, p.Dir)
		if err != nil {
			return result{}, err
		}
		defer e.Close()
		defer db.Close()
		job := flowliteNoop(new(atomic.Int64))
		flow.RegisterJob(e, job)
		start := time.Now()
		if err := concurrently(ctx, callers, p.N, func(i int) error {
			_, err := flow.Enqueue(ctx, e, job, i, nil)
			return err
		}); err != nil {
			return result{}, err
		}
		elapsed := time.Since(start)
		counts, err := e.CountRuns(ctx)
		if err != nil {
			return result{}, err
		}
		return result{Value: float64(p.N) / elapsed.Seconds(), Done: int(counts[flow.StatusPending])}, nil
	}
}

// concurrently calls f(0…n-1) from callers goroutines, each taking the
// next i.
func concurrently(ctx context.Context, callers, n int, f func(i int) error) error {
	var next atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for range callers {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return ctx.Err()
				}
				if err := f(i); err != nil {
					return fmt.Errorf("call %d: %w", i, err)
				}
			}
		})
	}
	return g.Wait()
}

// flowliteLatencySQLite starts a one-step job at latencyRate per second on
// a started engine in the same process and measures Enqueue→handler.
func flowliteLatencySQLite(ctx context.Context, p params) (result, error) {
	e, db, err := flowliteSQLite(ctx, p.Dir)
	if err != nil {
		return result{}, err
	}
	defer e.Close()
	defer db.Close()
	var lat latencies
	job := flowliteLatencyJob(&lat)
	flow.RegisterJob(e, job)
	if err := e.Start(ctx); err != nil {
		return result{}, fmt.Errorf("start engine: %w", err)
	}
	defer e.Stop(context.Background())
	if err := pace(ctx, p.N, latencyRate, func(int) error {
		_, err := flow.Enqueue(ctx, e, job, latencyArgs{T: time.Now().UnixNano()}, nil)
		return err
	}); err != nil {
		return result{}, err
	}
	if _, err := waitFor(ctx, 5*time.Millisecond, func() (bool, error) { return lat.len() >= p.N, nil }); err != nil {
		return result{}, err
	}
	return latencyResult(lat.all()), nil
}

// latencies collects samples from concurrent handlers.
type latencies struct {
	mu sync.Mutex
	s  []float64
}

func (l *latencies) add(ms float64) {
	l.mu.Lock()
	l.s = append(l.s, ms)
	l.mu.Unlock()
}

func (l *latencies) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.s)
}

func (l *latencies) all() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]float64(nil), l.s...)
}

// flowlitePG is flowlite's side of the PostgreSQL scenarios.
var flowlitePG = pgSystem{
	name: "flowlite-pg",
	load: func(ctx context.Context, dsn, scenario string, n int) error {
		db, err := sql.Open(flowpg.DriverName, dsn)
		if err != nil {
			return fmt.Errorf("open pool: %w", err)
		}
		defer db.Close()
		// An engine that is never started: it migrates the schema and
		// records runs.
		e, err := flowpg.New(ctx, db, flowlitePGConfig(), nil)
		if err != nil {
			return fmt.Errorf("open engine: %w", err)
		}
		defer e.Close()
		switch scenario {
		case "pg-drain":
			job := flowliteNoop(new(atomic.Int64))
			flow.RegisterJob(e, job)
			return flowliteEnqueueBulk(ctx, e, db, job, n)
		case "pg-workflows":
			wf := flowliteThreeSteps(new(atomic.Int64))
			flow.Register(e, wf)
			return flowliteStartBulk(ctx, e, db, wf, n)
		}
		return nil
	},
	doneQuery:    "SELECT count(*) FROM flowlite.runs WHERE status = 'completed'",
	pendingQuery: "SELECT count(*) FROM flowlite.runs WHERE status = 'pending'",
	bulk: func(ctx context.Context, dsn string, n int) error {
		// EnqueueMany, each batch in a transaction of the engine's own:
		// PostgreSQL's bulk path (COPY), as InsertManyFast is River's.
		e, err := flowpg.Open(ctx, dsn, flowlitePGConfig(), nil)
		if err != nil {
			return fmt.Errorf("open engine: %w", err)
		}
		defer e.Close()
		job := flowliteNoop(new(atomic.Int64))
		flow.RegisterJob(e, job)
		items := make([]flow.EnqueueItem[int], bulkTxSize)
		for lo := 0; lo < n; lo += bulkTxSize {
			hi := min(lo+bulkTxSize, n)
			for i := lo; i < hi; i++ {
				items[i-lo].Args = i
			}
			if _, err := flow.EnqueueMany(ctx, e, job, items[:hi-lo]); err != nil {
				return err
			}
		}
		return nil
	},
	produce: func(ctx context.Context, dsn string, n int) error {
		e, err := flowpg.Open(ctx, dsn, flowlitePGConfig(), nil)
		if err != nil {
			return fmt.Errorf("open engine: %w", err)
		}
		defer e.Close()
		job := flowliteLatencyJob(nil)
		flow.RegisterJob(e, job)
		return pace(ctx, n, latencyRate, func(int) error {
			_, err := flow.Enqueue(ctx, e, job, latencyArgs{T: time.Now().UnixNano()}, nil)
			return err
		})
	},
	worker: func(ctx context.Context, p params, ready func(), start, stop <-chan struct{}) ([]float64, error) {
		e, err := flowpg.Open(ctx, p.DSN, flowlitePGConfig(), nil)
		if err != nil {
			return nil, fmt.Errorf("open engine: %w", err)
		}
		defer e.Close()
		var lat latencies
		switch p.Scenario {
		case "pg-drain":
			flow.RegisterJob(e, flowliteNoop(new(atomic.Int64)))
		case "pg-workflows":
			flow.Register(e, flowliteThreeSteps(new(atomic.Int64)))
		case "pg-latency":
			flow.RegisterJob(e, flowliteLatencyJob(&lat))
		}
		ready()
		if !started(start, stop) {
			return nil, nil
		}
		if err := e.Start(ctx); err != nil {
			return nil, fmt.Errorf("start engine: %w", err)
		}
		<-stop
		if err := e.Stop(ctx); err != nil {
			return nil, fmt.Errorf("stop engine: %w", err)
		}
		return lat.all(), nil
	},
}

// flowliteLatencyJob records Enqueue→handler into lat (nil: a producer's
// copy of the job, which never runs it).
func flowliteLatencyJob(lat *latencies) flow.Job[latencyArgs] {
	return flow.Job[latencyArgs]{Name: "latency", Handler: func(_ context.Context, a latencyArgs) error {
		if lat != nil {
			lat.add(sinceMS(a.T))
		}
		return nil
	}}
}
