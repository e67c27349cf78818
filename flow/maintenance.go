package flow

import (
	"context"

	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// ErrNotSupported is returned by the file operations (FileHealth,
// Checkpoint, Backup, Check) of an engine whose store is not a database
// file.
var ErrNotSupported = store.ErrNotSupported

// Retention says how long finished runs are kept, counted from when they
// finished, per final state: Completed (default 24h), Failed (default 7
// days) and Cancelled (default 7 days). A zero field takes the default; a
// negative one keeps runs of that state forever. Runs that are not finished
// (pending, running, waiting, compensating, suspended) are never deleted,
// and neither is a finished child run whose parent has not finished.
type Retention = engine.Retention

// Retention defaults: how long finished runs are kept when Config.Retention
// leaves a state at zero.
const (
	DefaultRetainCompleted = engine.DefaultRetainCompleted
	DefaultRetainFailed    = engine.DefaultRetainFailed
	DefaultRetainCancelled = engine.DefaultRetainCancelled
)

// CheckpointMode is how hard a checkpoint of the WAL tries; see the
// Checkpoint* modes.
type CheckpointMode = store.CheckpointMode

// Checkpoint modes, SQLite's wal_checkpoint modes.
const (
	// CheckpointPassive copies what it can without waiting.
	CheckpointPassive = store.CheckpointPassive
	// CheckpointFull waits for writers, then copies the whole WAL.
	CheckpointFull = store.CheckpointFull
	// CheckpointRestart is CheckpointFull, then waits for readers so the
	// WAL starts over.
	CheckpointRestart = store.CheckpointRestart
	// CheckpointTruncate is CheckpointRestart, then truncates the WAL file
	// to zero bytes.
	CheckpointTruncate = store.CheckpointTruncate
)

// CheckpointResult is the outcome of a checkpoint: its mode, whether
// readers or writers kept it from finishing (Busy), the frames in the WAL
// and how many of them are in the database file now.
type CheckpointResult = store.CheckpointResult

// FileHealth describes the database file: its path, the sizes of the file
// and its WAL (and the largest WAL size this engine saw), the configured
// WALLimit, and the checkpoints this engine ran (how many, how many were
// forced by the WAL passing half its limit, and the last one's time, mode,
// outcome and frame counts).
type FileHealth = engine.FileHealth

// Clean deletes now, instead of at the cleaner's next tick, the finished
// runs older than their state's retention (see Config.Retention), with
// their steps, history and signals, and returns how many runs it deleted.
// Age is measured on the engine's clock. It deletes in small transactions
// through the engine's single writer, so runs in flight keep progressing.
func (e *Engine) Clean(ctx context.Context) (deleted int, err error) { return e.core.Clean(ctx) }

// FileHealth returns the sizes of the database file and its WAL, and what
// this engine's last checkpoint did.
func (e *Engine) FileHealth(ctx context.Context) (FileHealth, error) { return e.core.FileHealth(ctx) }

// Checkpoint checkpoints the WAL now. The engine does so by itself (see
// Config.CheckpointInterval); this is for operators and tests. Modes other
// than CheckpointPassive hold writes back while they wait for readers, at
// most about a second.
func (e *Engine) Checkpoint(ctx context.Context, mode CheckpointMode) (CheckpointResult, error) {
	return e.core.Checkpoint(ctx, mode)
}

// Backup writes a consistent copy of the database to dstPath while the
// engine keeps working (SQLite's VACUUM INTO, which reads one snapshot).
// The copy is a compact, ordinary database file that Open accepts; it is
// synced to disk, and dstPath never names a partial copy. An existing
// dstPath is refused with an error matching fs.ErrExist, and left as it is.
//
// Copying the database file by hand while an engine has it open is unsafe:
// the copy misses what the WAL holds.
func (e *Engine) Backup(ctx context.Context, dstPath string) error {
	return e.core.Backup(ctx, dstPath)
}

// Check runs SQLite's integrity check over the whole database file and
// returns the problems it found; none means the file is sound. It reads
// every page, so it takes a while on a large file, but it does not block
// the engine.
func (e *Engine) Check(ctx context.Context) ([]string, error) { return e.core.Check(ctx) }
