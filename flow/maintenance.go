package flow

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// ErrNotSupported is returned by the file operations (FileHealth,
// Checkpoint, Backup, Check) of an engine whose backend keeps no database
// file (they are the SQLite backend's, flow/flowsqlite).
var ErrNotSupported = flowtype.ErrNotSupported

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

// FileHealth describes the database file, its WAL and the checkpoints run
// on it. See [flowtype.FileHealth] for its fields.
type FileHealth = flowtype.FileHealth

// StandbyStatus says whether the engine's database server is a streaming
// standby; see [flowtype.StandbyStatus] for its fields.
type StandbyStatus = flowtype.StandbyStatus

// StandbyStatus reads, now, whether the engine's PostgreSQL server is a
// standby in recovery (a read replica, on which an engine only reads) and,
// if so, whether it caught up with what it received and how long ago the
// last commit it replayed was made on the primary: how stale what the
// engine reads there may be. It returns ErrNotSupported on SQLite, whose
// file is never a standby (its Litestream replica is in FileHealth).
func (e *Engine) StandbyStatus(ctx context.Context) (StandbyStatus, error) {
	// Shards are SQLite files, never standbys: the first answers for all.
	return e.route.all()[0].core.StandbyStatus(ctx)
}

// HistoryPartitions describes how the engine's PostgreSQL schema keeps the
// history of runs; see [flowtype.HistoryPartitions].
type HistoryPartitions = flowtype.HistoryPartitions

// HistoryPartition is one partition of the history; see
// [flowtype.HistoryPartition].
type HistoryPartition = flowtype.HistoryPartition

// HistoryPartitions lists the partitions the engine's PostgreSQL schema
// keeps the history of runs in (flowpg.Options.HistoryPartitions), oldest
// first: Span 0 and none when it keeps it in one table. It returns
// ErrNotSupported on SQLite, whose history is always one table.
func (e *Engine) HistoryPartitions(ctx context.Context) (HistoryPartitions, error) {
	// Shards are SQLite files: the first answers for all.
	return e.route.all()[0].core.HistoryPartitions(ctx)
}

// Clean deletes now, instead of at the cleaner's next tick, the finished
// runs older than their state's retention (see Config.Retention), with
// their steps, history and signals, and returns how many runs it deleted.
// Age is measured on the engine's clock. It deletes in small transactions
// through the engine's single writer, so runs in flight keep progressing.
// On PostgreSQL, the cleaners of engines sharing the database delete
// separate batches at once, and each counts only what it deleted.
func (e *Engine) Clean(ctx context.Context) (deleted int, err error) {
	return sumAll(e, func(inner *Engine) (int, error) { return inner.core.Clean(ctx) })
}

// The file operations below are those of a database kept in one file with
// a write-ahead log, which is what flowsqlite's backend is. They stay on
// Engine, returning ErrNotSupported on other backends, so that operator
// tools (flowlite, its dashboard) work through Engine alone, whatever the
// backend.

// FileHealth returns the sizes of the database file and its WAL, and what
// this engine's last checkpoint did.
// On a sharded engine, ask each shard (Engine.Shard).
func (e *Engine) FileHealth(ctx context.Context) (FileHealth, error) {
	inner, err := e.route.one("file health")
	if err != nil {
		return FileHealth{}, err
	}
	return inner.core.FileHealth(ctx)
}

// Checkpoint checkpoints the WAL now, in one of SQLite's modes
// (flowsqlite.CheckpointPassive, …), and records it under this engine's
// worker ID. The SQLite backend does so by itself (see flowsqlite's
// Options.CheckpointInterval); this is for operators and tests. Modes
// other than passive hold writes back while they wait for readers, at most
// about a second.
func (e *Engine) Checkpoint(ctx context.Context, mode flowtype.CheckpointMode) (flowtype.CheckpointResult, error) {
	inner, err := e.route.one("checkpoint")
	if err != nil {
		return flowtype.CheckpointResult{}, err
	}
	return inner.core.Checkpoint(ctx, mode)
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
	inner, err := e.route.one("back up to " + dstPath)
	if err != nil {
		return err
	}
	return inner.core.Backup(ctx, dstPath)
}

// Check runs SQLite's integrity check over the whole database file, then
// checks that every stored value (run, step and schedule inputs, run and
// step outputs, signal payloads) is JSON, and returns the problems it found,
// each naming the run, step or signal; none means the file is sound. SQLite
// checks the file's structure but keeps no checksum of a value, so a
// damaged value that still parses as JSON goes unnoticed. It reads every
// page, so it takes a while on a large file, but it does not block the
// engine.
// On a sharded engine it checks every shard, and each problem names its
// shard.
func (e *Engine) Check(ctx context.Context) ([]string, error) {
	var lists [][]string
	for i, inner := range e.route.all() {
		ps, err := inner.core.Check(ctx)
		lists = append(lists, ps)
		if err != nil {
			return merge(lists, mergeProblems), e.route.shardErr(i, err, "check shard %d: %w")
		}
	}
	return merge(lists, mergeProblems), nil
}
