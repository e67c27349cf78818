package flow_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/pgtest"
)

var maintenanceEpoch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// maintenanceConfig uses a manual clock, leases that never expire on it, and
// no automatic cleaning: the tests call Clean.
func maintenanceConfig(clk flow.Clock) *flow.Config {
	cfg := testConfig()
	cfg.Clock = clk
	cfg.LeaseTimeout = 1000 * time.Hour
	cfg.CleanInterval = -1
	return cfg
}

// recordCounts returns how many steps and events of a run the API shows
// (Inspect's steps, History's events). That a deleted run leaves no steps,
// events or signals behind, and that an unfinished one keeps its signals,
// are the store's: storetest's RunDeleteFinishedStatesAndAge checks both
// on every adapter.
func recordCounts(t *testing.T, e *flow.Engine, runID string) [2]int {
	t.Helper()
	info, events, err := e.InspectWithHistory(context.Background(), runID)
	if err != nil {
		t.Fatalf("inspect %s: %v", runID, err)
	}
	return [2]int{len(info.Steps), len(events)}
}

// The cleaner deletes finished runs older than their state's retention,
// with their steps, events and signals, and nothing else: runs in every
// unfinished state survive with all their records, whatever their age.
func TestCleanDeletesOnlyFinishedRunsPastRetention(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(maintenanceEpoch)
	cfg := maintenanceConfig(clk)
	cfg.Retention = flow.Retention{Completed: time.Hour, Failed: 2 * time.Hour, Cancelled: 3 * time.Hour}
	e := openEngine(t, path, cfg)

	undo := flow.Step[string, string]{
		Name:       "reserve",
		Run:        func(_ context.Context, s string) (string, error) { return "r-" + s, nil },
		Compensate: func(context.Context, string, string) error { return nil },
	}
	stuckUndo := undo
	stuckUndo.Name = "reserve-stuck"
	stuckUndo.Compensate = func(context.Context, string, string) error {
		return flow.Permanent(errors.New("the bank is gone"))
	}
	gate := make(chan struct{})
	blockedUndo := undo
	blockedUndo.Name = "reserve-blocked"
	blockedUndo.Compensate = func(ctx context.Context, _, _ string) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	blocking := flow.Step[string, string]{Name: "block", Run: func(ctx context.Context, s string) (string, error) {
		select {
		case <-gate:
			return s, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	failWith := func(name string, s flow.Step[string, string]) flow.Workflow[string, string] {
		return flow.Workflow[string, string]{Name: name, Run: func(wc flow.Context, in string) (string, error) {
			if _, err := flow.Do(wc, s, in); err != nil {
				return "", err
			}
			return "", errors.New("declined")
		}}
	}
	ok := flow.Workflow[string, string]{Name: "ok", Run: func(wc flow.Context, in string) (string, error) {
		out, err := flow.Do(wc, undo, in)
		if err != nil {
			return "", err
		}
		_, err = flow.Receive[string](wc, "go", 0)
		return out, err
	}}
	failed := failWith("failed", undo)
	suspended := failWith("suspended", stuckUndo)
	compensating := failWith("compensating", blockedUndo)
	sleeper := flow.Workflow[string, string]{Name: "sleeper", Run: func(wc flow.Context, in string) (string, error) {
		if _, err := flow.Do(wc, undo, in); err != nil {
			return "", err
		}
		return in, flow.Sleep(wc, 30*24*time.Hour)
	}}
	running := flow.Workflow[string, string]{Name: "running", Run: func(wc flow.Context, in string) (string, error) {
		if _, err := flow.Do(wc, undo, in); err != nil {
			return "", err
		}
		return flow.Do(wc, blocking, in)
	}}
	for _, wf := range []flow.Workflow[string, string]{ok, failed, suspended, compensating, sleeper, running} {
		flow.Register(e, wf)
	}
	startEngine(t, e)

	start := func(wf flow.Workflow[string, string], id string, opts *flow.StartOptions) string {
		t.Helper()
		if opts == nil {
			opts = &flow.StartOptions{}
		}
		opts.RunID = id
		if _, err := flow.Start(ctx, e, wf, id, opts); err != nil {
			t.Fatal(err)
		}
		return id
	}
	status := func(id string) flow.RunStatus {
		t.Helper()
		info, err := e.Inspect(ctx, id)
		if err != nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		return info.Status
	}
	settle := func(id string, want flow.RunStatus) {
		t.Helper()
		eventually(t, fmt.Sprintf("run %s %s", id, want), func() bool { return status(id) == want })
	}
	// finishAll drives one run to each finished state.
	finishAll := func(suffix string) {
		t.Helper()
		c := start(ok, "completed-"+suffix, nil)
		if _, err := flow.Signal(ctx, e, c, "go", "now", nil); err != nil {
			t.Fatal(err)
		}
		settle(c, flow.StatusCompleted)
		settle(start(failed, "failed-"+suffix, nil), flow.StatusFailed)
		x := start(sleeper, "cancelled-"+suffix, nil)
		settle(x, flow.StatusWaiting)
		if err := e.Cancel(ctx, x); err != nil {
			t.Fatal(err)
		}
		settle(x, flow.StatusCancelled)
	}

	// The runs that must survive, each with steps and history, started at
	// the epoch like the oldest finished runs.
	live := map[string]flow.RunStatus{
		start(ok, "pending", &flow.StartOptions{Delay: 365 * 24 * time.Hour}): flow.StatusPending,
		start(sleeper, "waiting", nil):                                        flow.StatusWaiting,
		start(running, "running", nil):                                        flow.StatusRunning,
		start(compensating, "compensating", nil):                              flow.StatusCompensating,
		start(suspended, "suspended", nil):                                    flow.StatusSuspended,
	}
	if _, err := flow.Signal(ctx, e, "waiting", "unrelated", 1, nil); err != nil {
		t.Fatal(err)
	}
	for id, st := range live {
		settle(id, st)
	}
	finishAll("old") // at the epoch
	clk.Advance(30 * time.Minute)
	finishAll("young") // 30 minutes later

	before := map[string][2]int{}
	for _, id := range slices.Concat(slices.Collect(maps.Keys(live)), allStates("old"), allStates("young")) {
		before[id] = recordCounts(t, e, id)
		if n := before[id]; (n[0] == 0 && id != "pending") || n[1] == 0 {
			t.Fatalf("run %s has %d steps, %d events: the test needs some", id, n[0], n[1])
		}
	}

	// Every state's age is its own: 70 minutes after the epoch only the old
	// completed run (age 70m > 1h) goes; 130 minutes, also the old failed
	// one (> 2h) and the young completed one (100m > 1h); 190 minutes, the
	// old cancelled one (> 3h) and the young failed one (160m > 2h).
	steps := []struct {
		at   time.Duration
		gone []string
	}{
		{10 * time.Minute, nil},
		{70 * time.Minute, []string{"completed-old"}},
		{130 * time.Minute, []string{"failed-old", "completed-young"}},
		{190 * time.Minute, []string{"cancelled-old", "failed-young"}},
		{500 * time.Hour, []string{"cancelled-young"}},
	}
	var deleted []string
	for _, s := range steps {
		clk.Set(maintenanceEpoch.Add(s.at))
		n, err := e.Clean(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(s.gone) {
			t.Errorf("clean at epoch+%s deleted %d runs, want %d (%v)", s.at, n, len(s.gone), s.gone)
		}
		deleted = append(deleted, s.gone...)
		for _, id := range slices.Concat(allStates("old"), allStates("young")) {
			_, err := e.Inspect(ctx, id)
			gone := slices.Contains(deleted, id)
			switch {
			case gone && !errors.Is(err, flow.ErrRunNotFound):
				t.Errorf("at epoch+%s: run %s should be deleted, Inspect error %v", s.at, id, err)
			case gone:
				if _, err := e.History(ctx, id); !errors.Is(err, flow.ErrRunNotFound) {
					t.Errorf("at epoch+%s: deleted run %s still has a history: %v", s.at, id, err)
				}
			case err != nil:
				t.Errorf("at epoch+%s: run %s, not past its retention, is gone: %v", s.at, id, err)
			}
		}
		// The unfinished runs survive, records and all, whatever the clock.
		for id, st := range live {
			if got := status(id); got != st {
				t.Errorf("at epoch+%s: run %s is %s, want %s", s.at, id, got, st)
			}
			if got := recordCounts(t, e, id); got != before[id] {
				t.Errorf("at epoch+%s: run %s has steps/events %v, had %v", s.at, id, got, before[id])
			}
		}
	}
	close(gate) // let the running and compensating runs finish before Close
	settle("running", flow.StatusCompleted)
	settle("compensating", flow.StatusFailed)
}

func allStates(suffix string) []string {
	return []string{"completed-" + suffix, "failed-" + suffix, "cancelled-" + suffix}
}

// recordHandler keeps the log records whose message is msg, and calls each
// (outside its lock) when one arrives.
type recordHandler struct {
	msg  string
	each func(slog.Record)
	mu   *sync.Mutex
	got  *[]slog.Record
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h recordHandler) WithGroup(string) slog.Handler            { return h }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != h.msg {
		return nil
	}
	h.mu.Lock()
	*h.got = append(*h.got, r.Clone())
	h.mu.Unlock()
	if h.each != nil {
		h.each(r)
	}
	return nil
}

func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// 2,000 old runs are deleted in transactions of at most CleanBatch (500)
// runs, and between two of them the engine's other writes go on: a
// workflow completes between every two batches. It runs on the suite's
// backend: the old runs are written straight into the SQLite file or the
// PostgreSQL schema (insertFinishedRuns).
func TestCleanDeletesInBatchesWhileWorkflowsRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := dbPath(t)
	clk := clock.NewManual(maintenanceEpoch)
	cfg := maintenanceConfig(clk)
	cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}}
	var completed atomic.Int64
	var mu sync.Mutex
	var batches []slog.Record
	// Called by Clean between two batch transactions: wait until another
	// workflow completed since the previous batch.
	var last, stalls int64
	waitForProgress := func(slog.Record) {
		deadline := time.Now().Add(10 * time.Second)
		for completed.Load() <= last {
			if time.Now().After(deadline) {
				stalls++
				break
			}
			time.Sleep(time.Millisecond)
		}
		last = completed.Load()
	}
	cfg.Logger = slog.New(recordHandler{msg: "deleted a batch of finished runs", each: waitForProgress, mu: &mu, got: &batches})
	e := openEngine(t, path, cfg)
	wf := doubler("batch-doubler", 1)
	flow.Register(e, wf)
	startEngine(t, e)

	// 20 runs executed, and 1,980 like them written directly (executing
	// them takes a minute under the race detector), each with 2 steps, 6
	// events and a signal.
	const old, executed = 2000, 20
	for i := range executed {
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	insertFinishedRuns(t, path, old-executed, clk.Now())
	clk.Advance(48 * time.Hour) // past the default 24h of completed runs

	// A client starting and awaiting one workflow after another.
	stop := make(chan struct{})
	var g errgroup.Group
	g.Go(func() error {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return nil
			default:
			}
			r, err := flow.Start(ctx, e, wf, i, nil)
			if err != nil {
				return err
			}
			if _, err := r.Result(ctx); err != nil {
				return err
			}
			completed.Add(1)
		}
	})
	last = completed.Load()
	start := time.Now()
	n, err := e.Clean(ctx)
	took := time.Since(start)
	close(stop)
	if gerr := g.Wait(); gerr != nil {
		t.Fatal(gerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n != old {
		t.Errorf("Clean deleted %d runs, want %d", n, old)
	}
	mu.Lock()
	defer mu.Unlock()
	total := int64(0)
	for _, r := range batches {
		size := attr(r, "runs").Int64()
		if size > engine.DefaultCleanBatch {
			t.Errorf("one transaction deleted %d runs, want at most %d", size, engine.DefaultCleanBatch)
		}
		total += size
		t.Logf("batch of %d runs took %v", size, attr(r, "took").Duration())
	}
	if stalls > 0 {
		t.Errorf("between %d of %d batches, no workflow completed within 10s", stalls, len(batches))
	}
	if len(batches) < old/engine.DefaultCleanBatch || total != old {
		t.Errorf("%d batches deleted %d runs; want at least %d batches deleting %d", len(batches), total, old/engine.DefaultCleanBatch, old)
	}
	t.Logf("Clean deleted %d runs in %v; %d workflows completed meanwhile", n, took, completed.Load())
	// That each batch takes its runs' steps, events and signals with it is
	// the store's: storetest's RunDeleteFinishedMaxOldestFirst checks it.
	counts, err := e.CountRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[flow.StatusCompleted] != completed.Load() {
		t.Errorf("%d completed runs left, want the %d the client ran during the clean", counts[flow.StatusCompleted], completed.Load())
	}
	if pgtest.Postgres() {
		return // Check is SQLite's integrity check: flow.ErrNotSupported here
	}
	if problems, err := e.Check(ctx); err != nil || len(problems) > 0 {
		t.Errorf("check after clean: %v, %v", problems, err)
	}
}

// insertFinishedRuns writes n completed runs of batch-doubler that finished
// at finished, each with 2 steps, 6 events and a signal, in one
// transaction, into the database of path on the backend openEngine chose
// for it (tableDB): the SQLite file, or the PostgreSQL schema.
func insertFinishedRuns(t *testing.T, path string, n int, finished time.Time) {
	t.Helper()
	// Raw SQL: thousands of finished runs in one statement per table, which
	// starting and finishing them through the API would take minutes to do.
	db, table := tableDB(t, path)
	_, sqlite := sqlitePaths.Load(path)
	pg := pgtest.Postgres() && !sqlite
	// The same rows in each dialect: n numbered 1 to n in the CTE n(i), the
	// time (Unix ms) as parameter 1 and n as parameter 2.
	with := `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2) `
	stmts := []string{
		`INSERT INTO ` + table("runs") + ` (id, workflow, version, queue, status, input, output, run_at, created_at, updated_at, finished_at)
		 SELECT 'synthetic-' || i, 'batch-doubler', 1, 'default', 'completed', CAST('1' AS BLOB), CAST('2' AS BLOB), ?1, ?1, ?1, ?1 FROM n`,
		`INSERT INTO ` + table("steps") + ` (run_id, name, occurrence, status, attempts, input, output, completed_seq, started_at, finished_at)
		 SELECT 'synthetic-' || i, 'double', o.value, 'completed', 1, CAST('1' AS BLOB), CAST('2' AS BLOB), o.value + 1, ?1, ?1
		 FROM n, json_each('[0,1]') AS o`,
		`INSERT INTO ` + table("events") + ` (run_id, at, kind)
		 SELECT 'synthetic-' || i, ?1, k.value FROM n,
		 json_each('["run.started","run.claimed","step.started","step.completed","run.completed","run.completed"]') AS k`,
		`INSERT INTO ` + table("signals") + ` (run_id, name, payload, key, sent_at, consumed_by)
		 SELECT 'synthetic-' || i, 'go', CAST('{}' AS BLOB), 'k', ?1, 'wait' FROM n`,
	}
	if pg {
		// BYTEA for BLOB ('1'::bytea is the byte '1'), generate_series and
		// unnest for json_each, $N for ?N; seq and the IDs of events and
		// signals are identities, as the engine's own inserts leave them.
		with = `WITH n(i) AS (SELECT generate_series(1, $2::bigint)) `
		stmts = []string{
			`INSERT INTO ` + table("runs") + ` (id, workflow, version, queue, status, input, output, run_at, created_at, updated_at, finished_at)
			 SELECT 'synthetic-' || i, 'batch-doubler', 1, 'default', 'completed', CAST('1' AS BYTEA), CAST('2' AS BYTEA), $1, $1, $1, $1 FROM n`,
			`INSERT INTO ` + table("steps") + ` (run_id, name, occurrence, status, attempts, input, output, completed_seq, started_at, finished_at)
			 SELECT 'synthetic-' || i, 'double', o.value, 'completed', 1, CAST('1' AS BYTEA), CAST('2' AS BYTEA), o.value + 1, $1, $1
			 FROM n, generate_series(0, 1) AS o(value)`,
			`INSERT INTO ` + table("events") + ` (run_id, at, kind)
			 SELECT 'synthetic-' || i, $1, k.value FROM n,
			 unnest(ARRAY['run.started','run.claimed','step.started','step.completed','run.completed','run.completed']) AS k(value)`,
			`INSERT INTO ` + table("signals") + ` (run_id, name, payload, key, sent_at, consumed_by)
			 SELECT 'synthetic-' || i, 'go', CAST('{}' AS BYTEA), 'k', $1, 'wait' FROM n`,
		}
	}
	ms := finished.UnixMilli()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, stmt := range stmts {
		res, err := tx.Exec(with+stmt, ms, n)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		if rows, err := res.RowsAffected(); err != nil || rows < int64(n) {
			t.Fatalf("%s: inserted %d rows for %d runs (%v)", stmt, rows, n, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// The automatic cleaner deletes runs past their retention on its own, and
// keeps failed runs when their retention is negative.
func TestCleanerRunsByItself(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(maintenanceEpoch)
	cfg := maintenanceConfig(clk)
	cfg.CleanInterval = 20 * time.Millisecond
	cfg.Retention = flow.Retention{Completed: time.Minute, Failed: -1}
	e := openEngine(t, dbPath(t), cfg)
	good := doubler("auto-good", 1)
	bad := flow.Workflow[int, int]{Name: "auto-bad", Run: func(flow.Context, int) (int, error) {
		return 0, errors.New("no")
	}}
	flow.Register(e, good)
	flow.Register(e, bad)
	startEngine(t, e)
	r1, err := flow.Start(ctx, e, good, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := flow.Start(ctx, e, bad, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r1.Result(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r2.Result(ctx); err == nil {
		t.Fatal("bad workflow succeeded")
	}
	clk.Advance(100 * 24 * time.Hour)
	eventually(t, "the cleaner deleting the completed run", func() bool {
		_, err := e.Inspect(ctx, r1.ID())
		return errors.Is(err, flow.ErrRunNotFound)
	})
	if info, err := e.Inspect(ctx, r2.ID()); err != nil || info.Status != flow.StatusFailed {
		t.Errorf("failed run kept forever: %v, %v", info.Status, err)
	}
}

// FileHealth reports the file and the checkpoints the engine ran; a
// TRUNCATE checkpoint empties the WAL.
func TestFileHealthAndCheckpoint(t *testing.T) {
	skipOnPostgres(t, "Engine.FileHealth and Checkpoint (the WAL)")
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(maintenanceEpoch)
	cfg := maintenanceConfig(clk)
	e := openSQLiteEngine(t, path, cfg, &flowsqlite.Options{CheckpointInterval: -1})
	wf := doubler("health", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	for i := range 20 {
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h, err := e.FileHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Path != path || h.DBBytes == 0 || h.WALBytes == 0 || h.WALLimit != 64<<20 || h.Checkpoints != 0 || !h.LastCheckpoint.IsZero() {
		t.Errorf("before any checkpoint: %+v", h)
	}
	if _, err := e.Checkpoint(ctx, "HARD"); err == nil {
		t.Error("checkpoint in an unknown mode succeeded")
	}
	res, err := e.Checkpoint(ctx, flowsqlite.CheckpointTruncate)
	if err != nil || res.Busy {
		t.Fatalf("truncate checkpoint: %+v, %v", res, err)
	}
	h, err = e.FileHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.WALBytes != 0 || h.LastCheckpointMode != flowsqlite.CheckpointTruncate || !h.LastCheckpoint.Equal(clk.Now()) ||
		h.Checkpoints != 1 || h.PeakWALBytes == 0 {
		t.Errorf("after a truncate checkpoint: %+v", h)
	}
}

// An idle engine truncates the WAL by itself.
func TestIdleEngineTruncatesWAL(t *testing.T) {
	skipOnPostgres(t, "truncating the WAL when idle")
	t.Parallel()
	ctx := waitCtx(t)
	e := openSQLiteEngine(t, dbPath(t), testConfig(), &flowsqlite.Options{CheckpointInterval: 20 * time.Millisecond})
	wf := doubler("idle", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	runToEnd(t, ctx, e, wf, 1)
	eventually(t, "an idle truncate", func() bool {
		h, err := e.FileHealth(ctx)
		return err == nil && h.WALBytes == 0 && h.LastCheckpointMode == flowsqlite.CheckpointTruncate
	})
}

// A backup taken while the engine works is a consistent database that Open
// accepts and that holds the runs; an existing destination is refused and
// nothing changes.
func TestBackup(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "Engine.Backup (VACUUM INTO a file)")
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openEngine(t, path, nil)
	wf := doubler("backed-up", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	var want []string
	for i := range 50 {
		r, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID())
	}
	// More runs go on while the backup is taken; the copy is a snapshot.
	stop := make(chan struct{})
	var g errgroup.Group
	g.Go(func() error {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return nil
			default:
			}
			r, err := flow.Start(ctx, e, wf, i, nil)
			if err != nil {
				return err
			}
			if _, err := r.Result(ctx); err != nil {
				return err
			}
		}
	})
	dst := t.TempDir() + "/backup.db"
	err := e.Backup(ctx, dst)
	close(stop)
	if gerr := g.Wait(); gerr != nil {
		t.Fatal(gerr)
	}
	if err != nil {
		t.Fatalf("backup: %v", err)
	}

	b := openEngine(t, dst, nil)
	if problems, err := b.Check(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("backup integrity: %v, %v", problems, err)
	}
	got, err := b.ListRuns(ctx, flow.RunFilter{Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]flow.RunInfo{}
	for _, r := range got {
		byID[r.ID] = r
	}
	for _, id := range want {
		r, ok := byID[id]
		if !ok {
			t.Errorf("run %s missing from the backup", id)
			continue
		}
		if r.Status != flow.StatusCompleted {
			t.Errorf("run %s in the backup is %s", id, r.Status)
		}
	}
	// Every run in the copy is whole: a finished run has its steps and its
	// history up to the end.
	for _, r := range got {
		if !r.Status.Finished() {
			continue
		}
		kinds := eventKinds(t, b, r.ID)
		info, err := b.Inspect(ctx, r.ID)
		if err != nil || len(info.Steps) != 1 || len(kinds) == 0 || kinds[len(kinds)-1] != flow.EventRunCompleted {
			t.Errorf("run %s in the backup: %d steps, history %v, %v", r.ID, len(info.Steps), kinds, err)
		}
	}
	if len(got) < len(want) {
		t.Errorf("backup holds %d runs, want at least %d", len(got), len(want))
	}

	// An existing destination is refused and left alone; the source too.
	countBefore, err := e.CountRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	before, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Backup(ctx, dst); !errors.Is(err, fs.ErrExist) {
		t.Errorf("backup onto an existing file: error %v, want fs.ErrExist", err)
	}
	if after, _ := os.ReadFile(dst); string(after) != string(before) {
		t.Error("refused backup changed the existing file")
	}
	countAfter, err := e.CountRuns(ctx)
	if err != nil || fmt.Sprint(countAfter) != fmt.Sprint(countBefore) {
		t.Errorf("source runs %v after the refused backup, had %v (%v)", countAfter, countBefore, err)
	}
	if problems, err := e.Check(ctx); err != nil || len(problems) > 0 {
		t.Errorf("source integrity: %v, %v", problems, err)
	}
}

// Check finds nothing wrong with a healthy database.
func TestCheckHealthyDatabase(t *testing.T) {
	t.Parallel()
	skipOnPostgres(t, "Engine.Check (integrity_check)")
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := doubler("checked", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	r, err := flow.Start(ctx, e, wf, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); err != nil {
		t.Fatal(err)
	}
	problems, err := e.Check(ctx)
	if err != nil || len(problems) != 0 {
		t.Errorf("Check = %v, %v; want no problems", problems, err)
	}
}

// walLoad describes a write load with readers that starve checkpoints.
type walLoad struct {
	readers int           // goroutines looping on read transactions
	readFor time.Duration // how long each read transaction stays open
	runFor  time.Duration // how long the load lasts at least
	// enough reports, after runFor, whether the load did its job; the load
	// goes on until it does, for at most two minutes more.
	enough func(e *flow.Engine, peak int64) bool
}

// run runs workflows flat out on an engine opened with cfg while the
// readers keep overlapping read transactions open on their own pool
// (staggered, so one is always open), and returns the engine, the largest
// WAL size seen and the number of workflows completed.
func (l walLoad) run(t *testing.T, cfg *flow.Config, opts *flowsqlite.Options) (e *flow.Engine, peak int64, runs int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), l.runFor+3*time.Minute)
	defer cancel()
	path := dbPath(t)
	e = openSQLiteEngine(t, path, cfg, opts)
	payload := strings.Repeat("x", 8<<10) // large, so the WAL grows fast even under -race
	step := flow.Step[string, string]{Name: "echo", Run: func(_ context.Context, s string) (string, error) { return s, nil }}
	wf := flow.Workflow[string, string]{Name: "wal-writer", Run: func(wc flow.Context, s string) (string, error) {
		for range 3 {
			var err error
			if s, err = flow.Do(wc, step, s); err != nil {
				return "", err
			}
		}
		return s, nil
	}}
	flow.Register(e, wf)
	startEngine(t, e)

	// The readers are other processes' read transactions on the file, which
	// keep SQLite from checkpointing past them: only a connection of their
	// own can hold one open.
	db := rawDB(t, path)
	db.SetMaxOpenConns(l.readers)
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopLoad := func() { stopOnce.Do(func() { close(stop) }) }
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var g errgroup.Group
	var peakWAL atomic.Int64
	start := time.Now()
	g.Go(func() error { // the sampler, which also ends the load
		for i := 0; !stopped(); i++ {
			if info, err := os.Stat(path + "-wal"); err == nil {
				peakWAL.Store(max(peakWAL.Load(), info.Size()))
			}
			if elapsed := time.Since(start); elapsed >= l.runFor && i%25 == 0 &&
				(l.enough(e, peakWAL.Load()) || elapsed >= l.runFor+2*time.Minute) {
				stopLoad()
			}
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	})
	for i := range l.readers {
		g.Go(func() error {
			time.Sleep(time.Duration(i) * l.readFor / time.Duration(l.readers))
			for !stopped() {
				// ReadOnly: a plain BEGIN, not the DSN's BEGIN IMMEDIATE.
				tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
				if err != nil {
					return err
				}
				var n int
				if err := tx.QueryRow("SELECT count(*) FROM flowlite_runs").Scan(&n); err != nil {
					tx.Rollback()
					return err
				}
				time.Sleep(l.readFor)
				if err := tx.Rollback(); err != nil {
					return err
				}
			}
			return nil
		})
	}
	var done atomic.Int64
	for range 8 { // clients, each starting 16 runs and awaiting them
		g.Go(func() error {
			for !stopped() {
				batch := make([]*flow.Run[string], 16)
				for i := range batch {
					r, err := flow.Start(ctx, e, wf, payload, nil)
					if err != nil {
						return err
					}
					batch[i] = r
				}
				for _, r := range batch {
					if _, err := r.Result(ctx); err != nil {
						return err
					}
					done.Add(1)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return e, peakWAL.Load(), done.Load()
}

// Readers that always hold a read transaction starve SQLite's automatic
// checkpoints, and the WAL grows without bound; the engine's WAL watch
// keeps it under WALLimit anyway (reliability pitfall 3 and B7).
//
// By default: one reader with 40 ms transactions and an 8 MiB limit, for 5 s
// and at least until the watch truncated the WAL three times. With
// FLOWLITE_LONG=1, 60 s, and also B7's shape: four readers with overlapping
// 100 ms transactions and the default 64 MiB limit, for 60 s.
func TestWALStaysBoundedUnderConstantReaders(t *testing.T) {
	skipOnPostgres(t, "the WAL watch (Options.WALLimit)")
	if testing.Short() {
		t.Skip("load test")
	}
	t.Parallel()
	cases := []struct {
		name  string
		load  walLoad
		limit int64 // 0: the default
	}{
		{"OneReader", walLoad{readers: 1, readFor: 40 * time.Millisecond, runFor: 5 * time.Second}, 8 << 20},
	}
	if os.Getenv("FLOWLITE_LONG") == "1" {
		cases[0].load.runFor = time.Minute
		cases = append(cases, struct {
			name  string
			load  walLoad
			limit int64
		}{"B7FourReaders", walLoad{readers: 4, readFor: 100 * time.Millisecond, runFor: time.Minute}, 0})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 16}}
			opts := &flowsqlite.Options{WALLimit: c.limit}
			limit := cmp.Or(c.limit, 64<<20)

			// The premise: without the watch, the WAL passes the limit.
			control := c.load
			control.runFor = 0
			control.enough = func(_ *flow.Engine, peak int64) bool { return peak >= limit }
			ctlOpts := *opts
			ctlOpts.CheckpointInterval = -1
			ctlStart := time.Now()
			_, ctlPeak, _ := control.run(t, cfg, &ctlOpts)
			t.Logf("without the WAL watch, the WAL reached %.2f MiB in %v", float64(ctlPeak)/(1<<20), time.Since(ctlStart).Round(time.Millisecond))
			if ctlPeak < limit {
				t.Fatalf("without the WAL watch the WAL reached only %d bytes: the load does not starve checkpoints", ctlPeak)
			}

			load := c.load
			load.enough = func(e *flow.Engine, _ int64) bool {
				h, err := e.FileHealth(context.Background())
				return err == nil && h.Forced >= 3
			}
			e, peak, runs := load.run(t, cfg, opts)
			h, err := e.FileHealth(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, %d readers × %s: %d workflows, WAL peak %.2f MiB (limit %d MiB), %d checkpoints (%d forced)",
				c.load.runFor, c.load.readers, c.load.readFor, runs, float64(peak)/(1<<20), limit>>20, h.Checkpoints, h.Forced)
			if peak >= limit {
				t.Errorf("WAL reached %d bytes, limit %d", peak, limit)
			}
			if h.Checkpoints == 0 || h.Forced == 0 || h.LastCheckpoint.IsZero() {
				t.Errorf("file health %+v: want checkpoints, some forced by the WAL size", h)
			}
			if h.LastCheckpointError != "" {
				t.Errorf("last checkpoint failed: %s", h.LastCheckpointError)
			}
		})
	}
}
