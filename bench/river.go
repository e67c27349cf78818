package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// River's settings are those of its own benchmark command (river bench):
// a 2 ms fetch cooldown and a 20 ms poll instead of the defaults' 100 ms and
// 1 s, and 2,000 workers per client ("much better than the client's default
// values", in its words).
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
	riverMaxWorkers        = 2000
	// riverInsertBatch is how many jobs one InsertMany call holds in the
	// scenarios' set-up; river bench uses 5,000.
	riverInsertBatch = 5000
)

type riverNoopArgs struct {
	N int `json:"n"`
}

func (riverNoopArgs) Kind() string { return "bench_noop" }

type riverLatencyArgs struct {
	T int64 `json:"t"`
}

func (riverLatencyArgs) Kind() string { return "bench_latency" }

// River has no workflows in its open-source edition. The closest durable
// equivalent of a 3-step workflow is a chain: the worker of step k inserts
// step k+1 with InsertTx and completes itself with JobCompleteTx in the
// same transaction, so a crash never loses or doubles the next step.
type (
	riverStep1Args struct {
		WF int `json:"wf"`
	}
	riverStep2Args struct {
		WF int `json:"wf"`
	}
	riverStep3Args struct {
		WF int `json:"wf"`
	}
)

func (riverStep1Args) Kind() string { return "bench_step1" }
func (riverStep2Args) Kind() string { return "bench_step2" }
func (riverStep3Args) Kind() string { return "bench_step3" }

// riverTx begins a transaction of the driver's type and returns how to
// commit and roll it back.
type riverTx[TTx any] func(ctx context.Context) (tx TTx, commit, rollback func() error, err error)

// riverWorkers registers every worker the scenarios use; lat receives the
// latency samples.
func riverWorkers[TDriver riverdriver.Driver[TTx], TTx any](begin riverTx[TTx], lat *latencies) *river.Workers {
	w := river.NewWorkers()
	river.AddWorker(w, river.WorkFunc(func(context.Context, *river.Job[riverNoopArgs]) error { return nil }))
	river.AddWorker(w, river.WorkFunc(func(_ context.Context, j *river.Job[riverLatencyArgs]) error {
		lat.add(sinceMS(j.Args.T))
		return nil
	}))
	river.AddWorker(w, river.WorkFunc(riverChainStep[TDriver](begin, func(a riverStep1Args) river.JobArgs { return riverStep2Args(a) })))
	river.AddWorker(w, river.WorkFunc(riverChainStep[TDriver](begin, func(a riverStep2Args) river.JobArgs { return riverStep3Args(a) })))
	river.AddWorker(w, river.WorkFunc(func(context.Context, *river.Job[riverStep3Args]) error { return nil }))
	return w
}

// riverChainStep is a step of the chain: insert the next step and complete
// this one in one transaction.
func riverChainStep[TDriver riverdriver.Driver[TTx], TTx any, A river.JobArgs](begin riverTx[TTx], next func(A) river.JobArgs) func(context.Context, *river.Job[A]) error {
	return func(ctx context.Context, job *river.Job[A]) error {
		tx, commit, rollback, err := begin(ctx)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() { _ = rollback() }()
		if _, err := river.ClientFromContext[TTx](ctx).InsertTx(ctx, tx, next(job.Args), nil); err != nil {
			return fmt.Errorf("insert next step: %w", err)
		}
		if _, err := river.JobCompleteTx[TDriver](ctx, tx, job); err != nil {
			return fmt.Errorf("complete step: %w", err)
		}
		return commit()
	}
}

func riverConfig(workers *river.Workers) *river.Config {
	c := &river.Config{
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            slog.New(slog.DiscardHandler),
	}
	if workers != nil {
		c.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: riverMaxWorkers}}
		c.Workers = workers
	}
	return c
}

func riverMigrate[TTx any](ctx context.Context, driver riverdriver.Driver[TTx]) error {
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fmt.Errorf("migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// riverInsertMany inserts n jobs made by args, batch per InsertMany call.
func riverInsertMany[TTx any](ctx context.Context, c *river.Client[TTx], n, batch int, args func(i int) river.JobArgs) error {
	params := make([]river.InsertManyParams, 0, batch)
	for lo := 0; lo < n; lo += batch {
		params = params[:0]
		for i := lo; i < min(lo+batch, n); i++ {
			params = append(params, river.InsertManyParams{Args: args(i)})
		}
		if _, err := c.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("insert many: %w", err)
		}
	}
	return nil
}

// riverSQLiteDB opens a fresh SQLite file for River the way its driver
// asks: WAL, synchronous=FULL (as flowlite), a busy timeout, and a pool of
// one connection ("a good workaround to avoid errors", riversqlite's doc).
func riverSQLiteDB(dir string) (*sql.DB, error) {
	path := filepath.Join(dir, "river.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

func sqlTx(db *sql.DB) riverTx[*sql.Tx] {
	return func(ctx context.Context) (*sql.Tx, func() error, func() error, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, nil, nil, err
		}
		return tx, tx.Commit, tx.Rollback, nil
	}
}

func pgxTx(pool *pgxpool.Pool) riverTx[pgx.Tx] {
	return func(ctx context.Context) (pgx.Tx, func() error, func() error, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		return tx, func() error { return tx.Commit(ctx) }, func() error { return tx.Rollback(ctx) }, nil
	}
}

// riverSQLite runs one SQLite scenario of River in this process.
func riverSQLite(ctx context.Context, p params) (result, error) {
	db, err := riverSQLiteDB(p.Dir)
	if err != nil {
		return result{}, err
	}
	defer db.Close()
	driver := riversqlite.New(db)
	if err := riverMigrate(ctx, driver); err != nil {
		return result{}, err
	}
	var lat latencies
	client, err := river.NewClient(driver, riverConfig(riverWorkers[*riversqlite.Driver](sqlTx(db), &lat)))
	if err != nil {
		return result{}, fmt.Errorf("new client: %w", err)
	}
	available := func() (int, error) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'available'").Scan(&n)
		return n, err
	}
	return riverScenario(ctx, p, client, &lat, available)
}

// riverScenario runs the in-process scenarios (the SQLite group) on client;
// available counts the jobs waiting, after the insert scenarios.
func riverScenario[TTx any](ctx context.Context, p params, client *river.Client[TTx], lat *latencies, available func() (int, error)) (result, error) {
	noop := func(i int) river.JobArgs { return riverNoopArgs{N: i} }
	switch p.Scenario {
	case "bulk":
		start := time.Now()
		// As many jobs per call as flowlite puts in one transaction.
		if err := riverInsertMany(ctx, client, p.N, bulkTxSize, noop); err != nil {
			return result{}, err
		}
		elapsed := time.Since(start)
		n, err := available()
		return result{Value: float64(p.N) / elapsed.Seconds(), Done: n}, err
	case "enqueue1", "enqueue16":
		callers := 1
		if p.Scenario == "enqueue16" {
			callers = 16
		}
		start := time.Now()
		if err := concurrently(ctx, callers, p.N, func(i int) error {
			_, err := client.Insert(ctx, riverNoopArgs{N: i}, nil)
			return err
		}); err != nil {
			return result{}, err
		}
		elapsed := time.Since(start)
		n, err := available()
		return result{Value: float64(p.N) / elapsed.Seconds(), Done: n}, err
	case "drain":
		if err := riverInsertMany(ctx, client, p.N, riverInsertBatch, noop); err != nil {
			return result{}, err
		}
		return riverDrain(ctx, client, p.N, "")
	case "workflows":
		if err := riverInsertMany(ctx, client, p.N, riverInsertBatch, func(i int) river.JobArgs { return riverStep1Args{WF: i} }); err != nil {
			return result{}, err
		}
		return riverDrain(ctx, client, p.N, riverStep3Args{}.Kind())
	case "latency":
		if err := client.Start(ctx); err != nil {
			return result{}, fmt.Errorf("start client: %w", err)
		}
		defer client.Stop(context.Background())
		if err := pace(ctx, p.N, latencyRate, func(int) error {
			_, err := client.Insert(ctx, riverLatencyArgs{T: time.Now().UnixNano()}, nil)
			return err
		}); err != nil {
			return result{}, err
		}
		if _, err := waitFor(ctx, 5*time.Millisecond, func() (bool, error) { return lat.len() >= p.N, nil }); err != nil {
			return result{}, err
		}
		return latencyResult(lat.all()), nil
	}
	return result{}, fmt.Errorf("unknown scenario %s", p.Scenario)
}

// riverDrain starts client and counts completions (of jobs of kind, or of
// all jobs) through its event subscription, as river bench does: the
// events come after the completer has written the jobs' state.
func riverDrain[TTx any](ctx context.Context, client *river.Client[TTx], n int, kind string) (result, error) {
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 3*n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, fmt.Errorf("start client: %w", err)
	}
	done := 0
	for done < n {
		select {
		case <-ctx.Done():
			return result{}, ctx.Err()
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return result{}, fmt.Errorf("job %d (%s) failed", ev.Job.ID, ev.Job.Kind)
			}
			if kind == "" || ev.Job.Kind == kind {
				done++
			}
		}
	}
	elapsed := time.Since(start)
	if err := client.Stop(ctx); err != nil {
		return result{}, fmt.Errorf("stop client: %w", err)
	}
	return result{Value: float64(n) / elapsed.Seconds(), Done: done}, nil
}

// riverPG is River's side of the PostgreSQL scenarios, with riverpgxv5.
var riverPG = pgSystem{
	name: "river-pg",
	load: func(ctx context.Context, dsn, scenario string, n int) error {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return fmt.Errorf("open pool: %w", err)
		}
		defer pool.Close()
		driver := riverpgxv5.New(pool)
		if err := riverMigrate(ctx, driver); err != nil {
			return err
		}
		client, err := river.NewClient(driver, riverConfig(nil))
		if err != nil {
			return fmt.Errorf("new client: %w", err)
		}
		switch scenario {
		case "pg-drain":
			return riverInsertMany(ctx, client, n, riverInsertBatch, func(i int) river.JobArgs { return riverNoopArgs{N: i} })
		case "pg-workflows":
			return riverInsertMany(ctx, client, n, riverInsertBatch, func(i int) river.JobArgs { return riverStep1Args{WF: i} })
		}
		return nil
	},
	doneQuery:    "SELECT count(*) FROM river_job WHERE state = 'completed'",
	pendingQuery: "SELECT count(*) FROM river_job WHERE state = 'available'",
	bulk: func(ctx context.Context, dsn string, n int) error {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return fmt.Errorf("open pool: %w", err)
		}
		defer pool.Close()
		client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(nil))
		if err != nil {
			return fmt.Errorf("new client: %w", err)
		}
		params := make([]river.InsertManyParams, 0, bulkTxSize)
		for lo := 0; lo < n; lo += bulkTxSize {
			params = params[:0]
			for i := lo; i < min(lo+bulkTxSize, n); i++ {
				params = append(params, river.InsertManyParams{Args: riverNoopArgs{N: i}})
			}
			if _, err := client.InsertManyFast(ctx, params); err != nil {
				return fmt.Errorf("insert many fast: %w", err)
			}
		}
		return nil
	},
	finishedQuery: map[string]string{
		"pg-workflows": "SELECT count(*) FROM river_job WHERE state = 'completed' AND kind = 'bench_step3'",
	},
	produce: func(ctx context.Context, dsn string, n int) error {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return fmt.Errorf("open pool: %w", err)
		}
		defer pool.Close()
		// An insert-only client, with the same FetchCooldown: it also
		// limits how often inserts NOTIFY the workers.
		client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(nil))
		if err != nil {
			return fmt.Errorf("new client: %w", err)
		}
		return pace(ctx, n, latencyRate, func(int) error {
			_, err := client.Insert(ctx, riverLatencyArgs{T: time.Now().UnixNano()}, nil)
			return err
		})
	},
	worker: func(ctx context.Context, p params, ready func(), start, stop <-chan struct{}) ([]float64, error) {
		pool, err := pgxpool.New(ctx, p.DSN)
		if err != nil {
			return nil, fmt.Errorf("open pool: %w", err)
		}
		defer pool.Close()
		var lat latencies
		client, err := river.NewClient(riverpgxv5.New(pool), riverConfig(riverWorkers[*riverpgxv5.Driver](pgxTx(pool), &lat)))
		if err != nil {
			return nil, fmt.Errorf("new client: %w", err)
		}
		ready()
		if !started(start, stop) {
			return nil, nil
		}
		if err := client.Start(ctx); err != nil {
			return nil, fmt.Errorf("start client: %w", err)
		}
		<-stop
		if err := client.Stop(ctx); err != nil {
			return nil, fmt.Errorf("stop client: %w", err)
		}
		return lat.all(), nil
	},
}
