package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// TestTimedOutRunTxFailsNoOtherCaller is issue 9's reproduction: fast runs
// next to runs whose RunTx step runs INSERTs past its 20 ms Timeout,
// all sharing the group commit. The timeout interrupted the shared
// connection, which rolled back the whole batch, so unrelated Start calls
// failed, fast runs were released with "interrupted: rollback to
// savepoint", and outcome writes were lost. Now the slow steps fail with
// their timeout (and their rows are rolled back), and nothing else fails.
func TestTimedOutRunTxFailsNoOtherCaller(t *testing.T) {
	t.Parallel()
	fastRuns, slowRuns := 300, 20
	if raceEnabled {
		fastRuns, slowRuns = 100, 5
	}
	path := sqlitePath(t)
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}}
	e := openEngine(t, path, cfg)
	db := rawDB(t, path) // the application's own table, which the RunTx steps write
	if _, err := db.Exec("CREATE TABLE filler (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	// The slow step inserts until its 20 ms Timeout has passed, so that one
	// of its statements always outlasts the timeout, however fast the
	// machine is at that moment. (A size calibrated once before the runs
	// was too small when the machine got faster between the two: the
	// statement ended inside the timeout, and the run completed.)
	const fill = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) INSERT INTO filler SELECT x FROM c`
	const rowsPerStatement = 20_000

	var released atomic.Int64 // fast steps that ran more than once
	seen := sync.Map{}
	fastStep := flow.Step[int, int]{
		Name: "double",
		Run: func(ctx context.Context, n int) (int, error) {
			if _, again := seen.LoadOrStore(n, true); again {
				released.Add(1)
			}
			return 2 * n, nil
		},
	}
	fast := flow.Workflow[int, int]{
		Name: "fast",
		Run:  func(wc flow.Context, n int) (int, error) { return flow.Do(wc, fastStep, n) },
	}
	slowStep := flow.Step[int, int]{
		Name:    "long_insert",
		Timeout: 20 * time.Millisecond,
		Retry:   &flow.RetryPolicy{MaxAttempts: 1},
		RunTx: func(ctx context.Context, tx *sql.Tx, n int) (int, error) {
			for {
				if _, err := tx.ExecContext(ctx, fill, rowsPerStatement); err != nil {
					return n, err
				}
				if ctx.Err() != nil {
					return n, nil // the engine must fail the attempt itself
				}
			}
		},
	}
	slow := flow.Workflow[int, int]{
		Name: "slow",
		Run:  func(wc flow.Context, n int) (int, error) { return flow.Do(wc, slowStep, n) },
	}
	flow.Register(e, fast)
	flow.Register(e, slow)
	startEngine(t, e)
	ctx := waitCtx(t)
	if raceEnabled { // each long INSERT holds the writer several times longer
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
		t.Cleanup(cancel)
	}

	var startErrs, fastErrs, slowWrong atomic.Int64
	var firstErr sync.Map
	note := func(kind string, err error) {
		firstErr.LoadOrStore(kind, err)
	}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for n := w; n < fastRuns; n += 16 {
				r, err := flow.Start(ctx, e, fast, n, &flow.StartOptions{RunID: fmt.Sprintf("fast-%d", n)})
				if err != nil {
					startErrs.Add(1)
					note("start", err)
					continue
				}
				if out, err := r.Result(ctx); err != nil || out != 2*n {
					fastErrs.Add(1)
					note("fast", fmt.Errorf("fast run %d: %d, %v", n, out, err))
				}
			}
		})
	}
	for n := range slowRuns {
		wg.Go(func() {
			r, err := flow.Start(ctx, e, slow, n, &flow.StartOptions{RunID: fmt.Sprintf("slow-%d", n)})
			if err != nil {
				startErrs.Add(1)
				note("start", err)
				return
			}
			_, err = r.Result(ctx)
			if !errors.Is(err, flow.ErrRolledBack) || !strings.Contains(err.Error(), "timed out after 20ms") {
				slowWrong.Add(1)
				note("slow", fmt.Errorf("slow run %d: %v", n, err))
			}
		})
	}
	wg.Wait()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		t.Errorf("stop: %v", err)
	}

	t.Logf("failed Start calls %d, failed fast runs %d, fast steps run again %d, slow runs without their timeout error %d",
		startErrs.Load(), fastErrs.Load(), released.Load(), slowWrong.Load())
	firstErr.Range(func(k, v any) bool { t.Errorf("first %s error: %v", k, v); return true })
	if startErrs.Load()+fastErrs.Load()+released.Load()+slowWrong.Load() != 0 {
		t.Errorf("a caller's interrupted statement failed other callers")
	}
	var filler int
	if err := db.QueryRow("SELECT count(*) FROM filler").Scan(&filler); err != nil {
		t.Fatal(err)
	}
	if filler != 0 {
		t.Errorf("filler has %d rows: a timed-out RunTx step's writes committed", filler)
	}
}

// TestRunTxBodyRunsOncePerAttempt is issue 19's fourth item: RunTx steps
// sharing group commits, some of whose statements outlive the step's
// Timeout. The batch whose transaction was lost retried its callers, the
// timed-out one too, so a body ran several times within one recorded
// attempt (90 attempts ran 256 bodies in a soak): what a body does outside
// the transaction repeated. Each body counts its calls by attempt, outside
// the transaction; every attempt the run's record counts ran its body
// exactly once.
func TestRunTxBodyRunsOncePerAttempt(t *testing.T) {
	t.Parallel()
	runs, slowEvery := 48, 4
	if raceEnabled {
		runs = 24
	}
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}}
	var path string
	var e *flow.Engine
	if pgtest.Postgres() {
		path = dbPath(t)
		e = openEngine(t, path, cfg)
	} else {
		// On a pool the caller opened, the writer cannot detach the
		// statements of its shared transaction from their contexts: a
		// Timeout interrupts the statement, which loses the whole batch.
		path = sqlitePath(t)
		var err error
		if e, err = flowsqlite.New(context.Background(), rawDB(t, path), cfg, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
	}
	db, table := tableDB(t, path) // the application's own table, which the RunTx steps write
	filler := table("runtx_filler")
	if _, err := db.Exec("CREATE TABLE " + filler + " (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	// A slow attempt's one statement must outlast the step's 20 ms
	// Timeout, so that its context ends while it runs: on SQLite an INSERT
	// of enough rows for about 60 ms on this machine, on PostgreSQL a sleep.
	slowSQL, slowArg := "SELECT pg_sleep($1)", any(0.06)
	if !pgtest.Postgres() {
		const fill = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) INSERT INTO %s SELECT x FROM c`
		slowSQL = fmt.Sprintf(fill, filler)
		took := time.Hour // the fastest of three: a slow first one would make too few rows
		for range 3 {
			began := time.Now()
			if _, err := db.Exec(slowSQL, 10_000); err != nil {
				t.Fatal(err)
			}
			took = min(took, time.Since(began))
		}
		if _, err := db.Exec("DELETE FROM " + filler); err != nil {
			t.Fatal(err)
		}
		slowArg = 10_000 * min(200, max(1, int(60*time.Millisecond/max(took, time.Millisecond))+1))
	}
	fastSQL := "INSERT INTO " + filler + " (x) VALUES (1)"

	type call struct {
		run     string
		attempt int
	}
	var mu sync.Mutex
	calls := map[call]int{} // body calls per attempt, counted outside the transaction
	step := flow.Step[int, int]{
		Name:    "write",
		Timeout: 20 * time.Millisecond,
		Retry:   &flow.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond},
		RunTx: func(ctx context.Context, tx *sql.Tx, n int) (int, error) {
			info, _ := flow.Attempt(ctx)
			mu.Lock()
			calls[call{info.RunID, info.Attempt}]++
			mu.Unlock()
			var err error
			if n%slowEvery == 0 {
				_, err = tx.ExecContext(ctx, slowSQL, slowArg)
			} else {
				_, err = tx.ExecContext(ctx, fastSQL)
			}
			return n, err
		},
	}
	wf := flow.Workflow[int, int]{
		Name: "runtx_once",
		Run:  func(wc flow.Context, n int) (int, error) { return flow.Do(wc, step, n) },
	}
	flow.Register(e, wf)
	startEngine(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), slowBound(time.Minute))
	defer cancel()

	var wg sync.WaitGroup
	var timedOut atomic.Int64
	errs := make(chan error, runs)
	for n := range runs {
		wg.Go(func() {
			r, err := flow.Start(ctx, e, wf, n, &flow.StartOptions{RunID: fmt.Sprintf("r%d", n)})
			if err != nil {
				errs <- fmt.Errorf("start run %d: %w", n, err)
				return
			}
			out, err := r.Result(ctx)
			switch {
			case n%slowEvery == 0 && err != nil && strings.Contains(err.Error(), "timed out after 20ms"):
				timedOut.Add(1)
			case n%slowEvery != 0 && (err != nil || out != n):
				errs <- fmt.Errorf("fast run %d: %d, %v", n, out, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if timedOut.Load() == 0 {
		t.Fatal("no slow run timed out: the test tested nothing")
	}

	mu.Lock()
	defer mu.Unlock()
	bodies, attempts := 0, 0
	for n := range runs {
		id := fmt.Sprintf("r%d", n)
		info, err := e.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Steps) != 1 {
			t.Fatalf("run %s (%s) has %d step records, want 1", id, info.Status, len(info.Steps))
		}
		recorded := info.Steps[0].Attempts
		attempts += recorded
		for a := 1; a <= recorded; a++ {
			c := calls[call{id, a}]
			bodies += c
			if c != 1 {
				t.Errorf("run %s (%s): attempt %d of %d recorded ran its body %d times, want once", id, info.Status, a, recorded, c)
			}
		}
		for k, c := range calls {
			if k.run == id && (k.attempt < 1 || k.attempt > recorded) {
				t.Errorf("run %s: its body ran %d times as attempt %d, which is not recorded (%d attempts)", id, c, k.attempt, recorded)
				bodies += c
			}
		}
	}
	t.Logf("%d runs (%d slow ones timed out), %d recorded attempts, %d body calls", runs, timedOut.Load(), attempts, bodies)
}

// TestSharesFileWithApplication opens an engine on a file that holds the
// application's own tables, two of them named like flowlite's old tables
// (runs, events) and one like goose's default version table, and runs a
// RunTx step that writes the application's runs table in the engine's
// transaction. (That flowlite's schema keeps to its namespace beside them
// is sqlitestore's TestSchemaKeepsToItsNamespace.)
func TestSharesFileWithApplication(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	app := rawDB(t, path) // the application's own tables, beside flowlite's
	if _, err := app.Exec(`
		CREATE TABLE runs (id INTEGER PRIMARY KEY, athlete TEXT NOT NULL, km REAL NOT NULL);
		CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT NOT NULL);
		CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL);
		INSERT INTO runs (athlete, km) VALUES ('ada', 10.5);
		INSERT INTO events (what) VALUES ('marathon');
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1), (20240101, 1);`); err != nil {
		t.Fatal(err)
	}

	e := openEngine(t, path, nil)
	record := flow.Step[string, int64]{
		Name: "record_run",
		RunTx: func(ctx context.Context, tx *sql.Tx, athlete string) (int64, error) {
			res, err := tx.ExecContext(ctx, "INSERT INTO runs (athlete, km) VALUES (?, 42.195)", athlete)
			if err != nil {
				return 0, err
			}
			return res.LastInsertId()
		},
	}
	wf := flow.Workflow[string, int64]{Name: "record", Version: 1, Run: func(wc flow.Context, athlete string) (int64, error) {
		return flow.Do(wc, record, athlete)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	r, err := flow.Start(ctx, e, wf, "grace", &flow.StartOptions{RunID: "record-grace"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The application's tables keep their rows and gained the step's.
	var athletes []string
	rows, err := app.Query("SELECT athlete FROM runs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		athletes = append(athletes, a)
	}
	rows.Close()
	if !slices.Equal(athletes, []string{"ada", "grace"}) || id != 2 {
		t.Errorf("application runs: %v (step returned id %d), want [ada grace] and id 2", athletes, id)
	}

	// flowlite's run is in flowlite's tables.
	if info, err := e.Inspect(ctx, "record-grace"); err != nil || info.Status != flow.StatusCompleted {
		t.Errorf("inspect: %+v, %v", info, err)
	}
}
