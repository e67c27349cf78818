package store

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// The report side of the store: what engines tell other processes about
// themselves. SQLite keeps no record of checkpoints, and an engine's
// counters live in its memory; a process that runs no workflows (the CLI,
// the dashboard) reads them here.

// EngineReport is what one engine recorded about itself. Times are Unix
// milliseconds.
type EngineReport struct {
	Owner      string // the engine's worker ID, as in leases
	Host       string
	PID        int
	StartedAt  int64
	ReportedAt int64
	// Metrics is the engine's instrumentation, encoded by the engine
	// (JSON); the store keeps it as it is.
	Metrics []byte
	// Queues are the queues the engine works, sorted; nil for none.
	Queues []string
	// LiveUntil is when the engine will have written its report again if
	// it still runs; StoppedAt when it stopped, 0 while it runs.
	LiveUntil int64
	StoppedAt int64
}

// CheckpointRecord is a WAL checkpoint an engine ran on the file.
type CheckpointRecord struct {
	At       int64 // Unix ms
	Owner    string
	Mode     flowtype.CheckpointMode
	WALBytes int64  // size of the WAL file just before the checkpoint
	Busy     bool   // readers or writers kept it from finishing
	Error    string // why it failed; empty when it ran
}

// ReportReader reads what engines reported.
type ReportReader interface {
	// EngineReportList returns every engine's report, the engine started
	// first first.
	EngineReportList(ctx context.Context) ([]EngineReport, error)
	// CheckpointLast returns the last recorded checkpoint, or
	// flowtype.ErrRunNotFound.
	CheckpointLast(ctx context.Context) (CheckpointRecord, error)
}

// ReportTx writes what engines report.
type ReportTx interface {
	// EngineReportSave replaces the report of r.Owner.
	EngineReportSave(ctx context.Context, r EngineReport) error
	// EngineReportDeleteBefore deletes the reports last written before
	// reportedBefore and returns how many it deleted.
	EngineReportDeleteBefore(ctx context.Context, reportedBefore int64) (int, error)
	// EngineReportDeleteStoppedBefore deletes the reports of engines that
	// stopped (StoppedAt > 0) before stoppedBefore and returns how many it
	// deleted; the reports of running or silent engines stay.
	EngineReportDeleteStoppedBefore(ctx context.Context, stoppedBefore int64) (int, error)
	// CheckpointSave replaces the record of the last checkpoint.
	CheckpointSave(ctx context.Context, c CheckpointRecord) error
}
