package flow

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// ErrNotSupported is returned by the file operations (FileHealth,
// Checkpoint, Backup, Check) of an engine whose store is not a database
// file.
var ErrNotSupported = store.ErrNotSupported

// Retention says how long finished runs are kept, counted from when they
// finished, per final state: Completed (default 24h), Failed (default 7
// days) and Cancelled (default 7 days). See [flowtype.Retention] for its
// fields.
type Retention = flowtype.Retention

// Retention defaults: how long finished runs are kept when Config.Retention
// leaves a state at zero.
const (
	DefaultRetainCompleted = flowtype.DefaultRetainCompleted
	DefaultRetainFailed    = flowtype.DefaultRetainFailed
	DefaultRetainCancelled = flowtype.DefaultRetainCancelled
)

// CheckpointMode is how hard a checkpoint of the WAL tries; see the
// Checkpoint* modes and [flowtype.CheckpointMode].
type CheckpointMode = flowtype.CheckpointMode

// Checkpoint modes, SQLite's wal_checkpoint modes.
const (
	// CheckpointPassive copies what it can without waiting.
	CheckpointPassive = flowtype.CheckpointPassive
	// CheckpointFull waits for writers, then copies the whole WAL.
	CheckpointFull = flowtype.CheckpointFull
	// CheckpointRestart is CheckpointFull, then waits for readers so the
	// WAL starts over.
	CheckpointRestart = flowtype.CheckpointRestart
	// CheckpointTruncate is CheckpointRestart, then truncates the WAL file
	// to zero bytes.
	CheckpointTruncate = flowtype.CheckpointTruncate
)

// CheckpointResult is the outcome of a checkpoint. See
// [flowtype.CheckpointResult] for its fields.
type CheckpointResult = flowtype.CheckpointResult

// FileHealth describes the database file, its WAL and the checkpoints run
// on it. See [flowtype.FileHealth] for its fields.
type FileHealth = flowtype.FileHealth

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

// Check runs SQLite's integrity check over the whole database file, then
// checks that every stored value (run, step and schedule inputs, run and
// step outputs, signal payloads) is JSON, and returns the problems it found,
// each naming the run, step or signal; none means the file is sound. SQLite
// checks the file's structure but keeps no checksum of a value, so a
// damaged value that still parses as JSON goes unnoticed. It reads every
// page, so it takes a while on a large file, but it does not block the
// engine.
func (e *Engine) Check(ctx context.Context) ([]string, error) { return e.core.Check(ctx) }
