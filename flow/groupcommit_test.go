package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
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
	db := rawDB(t, path)
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
