package flow_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/pgtest"
)

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
	db, table := tableDB(t, path)
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
