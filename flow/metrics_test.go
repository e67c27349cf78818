package flow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/clock"
)

// An engine that runs no workflows (as in flowlite serve) sees the metrics
// of the engines that do, through their reports in the database.
func TestReportsReachOtherEngines(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	cfg := testConfig()
	cfg.WorkerID = "worker-1"
	cfg.ReportInterval = 20 * time.Millisecond
	worker := openEngine(t, path, cfg)
	wf := doubler("reported", 1)
	flow.Register(worker, wf)
	startEngine(t, worker)

	observer := openEngine(t, path, testConfig())
	reports, err := observer.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].Owner != "worker-1" || reports[0].Metrics.RunsStarted != 0 {
		t.Fatalf("after Start: reports %+v, want worker-1's with nothing started", reports)
	}
	if reports[0].PID == 0 || reports[0].Host == "" || reports[0].StartedAt.IsZero() {
		t.Errorf("report lacks its process: %+v", reports[0])
	}

	const runs = 5
	for i := range runs {
		runToEnd(t, ctx, worker, wf, i)
	}
	want := worker.Metrics()
	eventually(t, "the worker's report to catch up", func() bool {
		reports, err := observer.Reports(ctx)
		return err == nil && len(reports) == 1 && reports[0].Metrics.RunsFinished[flow.StatusCompleted] == runs
	})
	reports, err = observer.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := reports[0].Metrics
	if got.RunsStarted != runs || got.AttemptSeconds["step"].Count != want.AttemptSeconds["step"].Count ||
		got.ClaimSeconds["default"].Count != want.ClaimSeconds["default"].Count {
		t.Errorf("reported metrics %+v, want those of the worker %+v", got, want)
	}
	if reports[0].ReportedAt.Before(reports[0].StartedAt) {
		t.Errorf("reported at %v, before the start %v", reports[0].ReportedAt, reports[0].StartedAt)
	}
	if sum := flow.SumMetrics(reports[0].Metrics, reports[0].Metrics); sum.RunsStarted != 2*runs ||
		sum.AttemptSeconds["step"].Count != 2*want.AttemptSeconds["step"].Count {
		t.Errorf("sum of two copies: %+v", sum)
	}
}

// Stop writes the last report, even when the interval has not passed.
func TestStopWritesLastReport(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	cfg := testConfig()
	cfg.WorkerID = "worker-stop"
	cfg.ReportInterval = time.Hour
	worker := openEngine(t, path, cfg)
	wf := doubler("stopped", 1)
	flow.Register(worker, wf)
	startEngine(t, worker)
	runToEnd(t, ctx, worker, wf, 1)
	if err := worker.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	reports, err := openEngine(t, path, testConfig()).Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].Metrics.RunsStarted != 1 || reports[0].Metrics.RunsFinished[flow.StatusCompleted] != 1 {
		t.Errorf("after Stop: reports %+v, want one run started and completed", reports)
	}
}

// ReportInterval < 0 writes no report.
func TestReportsOff(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.ReportInterval = -1
	e := openEngine(t, dbPath(t), cfg)
	flow.Register(e, doubler("silent", 1))
	startEngine(t, e)
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if reports, err := e.Reports(ctx); err != nil || len(reports) != 0 {
		t.Errorf("reports %+v, %v; want none", reports, err)
	}
}

// The cleaner deletes the reports of engines silent past ReportRetention,
// and keeps the others.
func TestCleanDeletesOldReports(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(maintenanceEpoch)
	for _, id := range []string{"old", "new"} {
		cfg := maintenanceConfig(clk)
		cfg.WorkerID = id
		cfg.StoppedReportRetention = -1 // this test is about ReportRetention
		e := openEngine(t, path, cfg)
		flow.Register(e, doubler("clean-"+id, 1))
		startEngine(t, e)
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(4 * 24 * time.Hour)
	}
	// "old" reported 8 days ago, "new" 4 days ago.
	cfg := maintenanceConfig(clk)
	cfg.StoppedReportRetention = -1
	e := openEngine(t, path, cfg)
	if _, err := e.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	reports, err := e.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || reports[0].Owner != "new" {
		t.Errorf("after Clean: reports %+v, want only new's", reports)
	}
}

// The last checkpoint shows in the FileHealth of another engine, which ran
// none, and a TRUNCATE still leaves an empty WAL though it is recorded.
func TestCheckpointVisibleToOtherEngines(t *testing.T) {
	skipOnPostgres(t, "Engine.Checkpoint (the WAL)")
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(maintenanceEpoch)
	cfg := maintenanceConfig(clk)
	cfg.WorkerID = "checkpointer"
	noWatch := &flowsqlite.Options{CheckpointInterval: -1}
	worker := openSQLiteEngine(t, path, cfg, noWatch)
	wf := doubler("checkpointed", 1)
	flow.Register(worker, wf)
	startEngine(t, worker)
	runToEnd(t, ctx, worker, wf, 1)
	observer := openSQLiteEngine(t, path, maintenanceConfig(clk), noWatch)
	h, err := observer.FileHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !h.LastCheckpoint.IsZero() {
		t.Fatalf("before any checkpoint: last checkpoint %v by %q", h.LastCheckpoint, h.LastCheckpointBy)
	}
	walBefore := h.WALBytes

	// A checkpoint in an unknown mode records nothing.
	if _, err := worker.Checkpoint(ctx, "HARD"); err == nil || !strings.Contains(err.Error(), `unknown mode "HARD"`) {
		t.Errorf("checkpoint HARD: %v, want an unknown mode error", err)
	}
	if h, err := observer.FileHealth(ctx); err != nil || !h.LastCheckpoint.IsZero() {
		t.Errorf("after a refused checkpoint: last checkpoint %v by %q (%v)", h.LastCheckpoint, h.LastCheckpointBy, err)
	}

	clk.Advance(time.Minute)
	if _, err := worker.Checkpoint(ctx, flowsqlite.CheckpointTruncate); err != nil {
		t.Fatal(err)
	}
	h, err = observer.FileHealth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.WALBytes != 0 {
		t.Errorf("WAL %d bytes after a TRUNCATE, want 0: the record must be written before the checkpoint", h.WALBytes)
	}
	if !h.LastCheckpoint.Equal(clk.Now()) || h.LastCheckpointBy != "checkpointer" || h.LastCheckpointMode != flowsqlite.CheckpointTruncate ||
		h.LastCheckpointBusy || h.LastCheckpointError != "" || h.LastCheckpointWALBytes < walBefore || h.Checkpoints != 0 {
		t.Errorf("observer's view of the worker's checkpoint: %+v (WAL was %d bytes)", h, walBefore)
	}
}

// An idle engine stops writing: once its last report and checkpoint are
// done, the WAL stays empty.
func TestIdleEngineWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	cfg := testConfig()
	cfg.ReportInterval = 10 * time.Millisecond
	e := openSQLiteEngine(t, path, cfg, &flowsqlite.Options{CheckpointInterval: 10 * time.Millisecond})
	wf := doubler("quiet", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	runToEnd(t, ctx, e, wf, 1)
	eventually(t, "the report of the run", func() bool {
		reports, err := e.Reports(ctx)
		return err == nil && len(reports) == 1 && reports[0].Metrics.RunsFinished[flow.StatusCompleted] == 1
	})
	eventually(t, "an empty WAL", func() bool {
		h, err := e.FileHealth(ctx)
		return err == nil && h.WALBytes == 0
	})
	for range 30 { // 30 report and checkpoint intervals
		time.Sleep(10 * time.Millisecond)
		h, err := e.FileHealth(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if h.WALBytes != 0 {
			t.Fatalf("an idle engine wrote %d WAL bytes", h.WALBytes)
		}
	}
}
