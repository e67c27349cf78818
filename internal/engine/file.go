package engine

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The store's own upkeep (store.Maintainer, e.g. the SQLite adapter's WAL
// watch) and the file operations (store.FileMaintainer) belong to the
// adapter, which knows its database; the engine only starts the upkeep and
// hands both what they need to know about it (maintainHooks).

// maintainHooks tells the store's upkeep about this engine.
func (e *Engine) maintainHooks() store.MaintainHooks {
	return store.MaintainHooks{Owner: e.cfg.WorkerID, Now: e.now, Idle: e.idle, Log: e.log}
}

// runMaintainer runs the store's own upkeep, if it has any, until ctx ends.
func (e *Engine) runMaintainer(ctx context.Context) {
	if m, ok := e.store.(store.Maintainer); ok {
		m.Maintain(ctx, e.maintainHooks())
	}
}

// idle reports whether no run is in flight in this engine.
func (e *Engine) idle() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.active) == 0
}

// fileMaintainer returns the store's file operations, or an error wrapping
// flowtype.ErrNotSupported.
func (e *Engine) fileMaintainer(op string) (store.FileMaintainer, error) {
	fm, ok := e.store.(store.FileMaintainer)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, flowtype.ErrNotSupported)
	}
	return fm, nil
}

// StandbyStatus reads whether the store's server is a streaming standby
// and how far its replay stands; ErrNotSupported for a store that cannot
// be on one (a SQLite file).
func (e *Engine) StandbyStatus(ctx context.Context) (flowtype.StandbyStatus, error) {
	sr, ok := e.store.(store.StandbyReporter)
	if !ok {
		return flowtype.StandbyStatus{}, fmt.Errorf("standby status: %w", flowtype.ErrNotSupported)
	}
	return sr.StandbyStatus(ctx)
}

// Checkpoint runs a checkpoint of the WAL now, recorded under this
// engine's worker ID.
func (e *Engine) Checkpoint(ctx context.Context, mode flowtype.CheckpointMode) (flowtype.CheckpointResult, error) {
	fm, err := e.fileMaintainer("checkpoint")
	if err != nil {
		return flowtype.CheckpointResult{}, err
	}
	return fm.CheckpointRecorded(ctx, mode, e.maintainHooks())
}

// FileHealth returns the sizes of the database file and its WAL, the
// checkpoints this engine ran, and the last checkpoint recorded in the
// database, which another process may have run.
func (e *Engine) FileHealth(ctx context.Context) (flowtype.FileHealth, error) {
	fm, err := e.fileMaintainer("file health")
	if err != nil {
		return flowtype.FileHealth{}, err
	}
	return fm.FileHealth(ctx)
}

// Backup writes a consistent copy of the database to dst, which must not
// exist.
func (e *Engine) Backup(ctx context.Context, dst string) error {
	fm, err := e.fileMaintainer("backup")
	if err != nil {
		return err
	}
	return fm.Backup(ctx, dst)
}

// Check runs an integrity check of the whole database file and returns the
// problems found; none means it is sound.
func (e *Engine) Check(ctx context.Context) ([]string, error) {
	fm, err := e.fileMaintainer("integrity check")
	if err != nil {
		return nil, err
	}
	problems, err := fm.IntegrityCheck(ctx)
	if err != nil {
		return nil, fmt.Errorf("integrity check: %w", err)
	}
	return problems, nil
}

// HistoryPartitions describes the partitions the store keeps the history
// of runs in (store.HistoryPartitioner): none, with Span 0, when it keeps
// it in one table; ErrNotSupported for a store that cannot partition it (a
// SQLite file).
func (e *Engine) HistoryPartitions(ctx context.Context) (flowtype.HistoryPartitions, error) {
	hp, ok := e.store.(store.HistoryPartitioner)
	if !ok {
		return flowtype.HistoryPartitions{}, fmt.Errorf("history partitions: %w", flowtype.ErrNotSupported)
	}
	span, err := hp.HistorySpan(ctx)
	if err != nil || span == 0 {
		return flowtype.HistoryPartitions{}, err
	}
	out := flowtype.HistoryPartitions{Span: span}
	parts, err := hp.HistoryPartitions(ctx)
	if err != nil {
		return flowtype.HistoryPartitions{}, err
	}
	for _, p := range parts {
		part := flowtype.HistoryPartition{Name: p.Name, To: time.UnixMilli(p.To), Bytes: p.Bytes}
		if p.From != math.MinInt64 { // events_before starts nowhere
			part.From = time.UnixMilli(p.From)
		}
		out.Partitions = append(out.Partitions, part)
	}
	return out, nil
}
