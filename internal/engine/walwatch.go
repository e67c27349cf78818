package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The WAL watch keeps the write-ahead log of a SQLite file bounded.
//
// SQLite checkpoints the WAL by itself (PASSIVE, every 1000 pages), but a
// passive checkpoint never waits: while readers keep overlapping read
// transactions open, it cannot copy the newest frames, the log never starts
// over, and the file grows without bound (checkpoint starvation). So the
// watch looks at the size of the -wal file (stat(2) only) ten times a
// second, and more often while the WAL grows fast enough to pass half of
// WALLimit before the next look, and runs:
//
//   - TRUNCATE as soon as the WAL passed half of WALLimit. It waits briefly
//     for readers to move to the newest snapshot, with writes held back,
//     and leaves an empty file;
//   - every CheckpointInterval, TRUNCATE when the engine is idle (no run in
//     flight here), which then costs nothing, and PASSIVE otherwise, which
//     never waits.
//
// A TRUNCATE waits for readers at most about a second. Overlapping short
// readers make one fail now and then by chance, so the watch retries at
// once; after three failures in a row it checkpoints passively for a
// backoff that doubles up to a minute, so that a long reader (e.g. a
// backup) cannot stall the writer again and again.
//
// Checkpoints go through the store's writer connection, between its
// transactions.

// FileHealth describes the database file, the checkpoints this engine ran
// on it, and the last checkpoint any engine ran on it. It is defined in
// flow/flowtype, where go doc shows its fields.
type FileHealth = flowtype.FileHealth

// walState records the checkpoints this engine ran, for FileHealth.
type walState struct {
	mu      sync.Mutex
	last    store.CheckpointResult
	lastAt  time.Time
	lastErr error
	// lastWALBytes is the WAL's size before the last checkpoint.
	lastWALBytes int64
	checkpoints  int64
	forced       int64
	peak         int64
}

// walQuickRetries is how many blocking checkpoints in a row the watch tries
// before it backs off.
const walQuickRetries = 3

// maxForcedBackoff bounds how long the watch waits before forcing a
// checkpoint again after readers outlasted one.
const maxForcedBackoff = time.Minute

// runWALWatch checkpoints the WAL as described at the top of this file. It
// does nothing for a store without a file.
func (e *Engine) runWALWatch(ctx context.Context) {
	fm, ok := e.store.(store.FileMaintainer)
	if !ok || e.cfg.CheckpointInterval < 0 {
		return
	}
	now := time.Now()
	w := &walWatch{e: e, fm: fm, lastRoutine: now, baseAt: now}
	timer := time.NewTimer(w.maxLook())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(w.check(ctx))
	}
}

// The watch looks at the WAL at least every maxWALLook (or
// CheckpointInterval if shorter), and at most every minWALLook. It measures
// the WAL's growth over windows of walRateWindow.
const (
	minWALLook    = 5 * time.Millisecond
	maxWALLook    = 100 * time.Millisecond
	walRateWindow = 100 * time.Millisecond
)

// walWatch is the state of the WAL watch loop.
type walWatch struct {
	e  *Engine
	fm store.FileMaintainer

	size        int64     // WAL size at the last look, or 0 after a truncate
	baseAt      time.Time // start of the growth measurement window
	baseSize    int64     // WAL size then
	rate        float64   // WAL growth over the last window, bytes per second
	lastRoutine time.Time // last routine (not forced) checkpoint
	failures    int       // blocking checkpoints readers defeated in a row
	backoff     time.Duration
	holdUntil   time.Time // no blocking checkpoint before then
}

func (w *walWatch) maxLook() time.Duration { return min(maxWALLook, w.e.cfg.CheckpointInterval) }

// check looks at the WAL, checkpoints when due, and returns when to look
// again: soon enough that, growing at its recent rate, the WAL cannot pass
// half of WALLimit unseen. A look only stats the file and reads its path.
func (w *walWatch) check(ctx context.Context) time.Duration {
	e, limit := w.e, w.e.cfg.WALLimit
	st, err := e.fileStats(ctx, w.fm)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("read WAL size", "err", err)
		}
		return e.cfg.CheckpointInterval
	}
	now := time.Now()
	w.size = st.WALBytes
	switch dt := now.Sub(w.baseAt); {
	case w.size < w.baseSize: // truncated meanwhile, e.g. by another process
		w.baseAt, w.baseSize = now, w.size
	case dt >= walRateWindow:
		w.rate = float64(w.size-w.baseSize) / dt.Seconds()
		w.baseAt, w.baseSize = now, w.size
	}

	holding := now.Before(w.holdUntil)
	var mode store.CheckpointMode
	forced := false
	switch {
	case w.size > limit/2 && !holding:
		mode, forced = store.CheckpointTruncate, true
	case now.Sub(w.lastRoutine) < e.cfg.CheckpointInterval || w.size == 0:
	case e.idle() && !holding:
		mode = store.CheckpointTruncate
	default:
		mode = store.CheckpointPassive
	}
	if mode != "" {
		if !forced {
			w.lastRoutine = now
		}
		if w.checkpoint(ctx, mode, forced, w.size) {
			w.size, w.baseAt, w.baseSize = 0, time.Now(), 0
		}
	}

	if w.size > limit/2 { // readers defeated the truncate: wait for the backoff
		return max(minWALLook, min(w.maxLook(), time.Until(w.holdUntil)))
	}
	next := w.maxLook()
	if w.rate > 0 {
		untilHalf := time.Duration(float64(limit/2-w.size) / w.rate * float64(time.Second))
		next = min(next, max(minWALLook, untilHalf/2))
	}
	return next
}

// checkpoint runs one checkpoint of the watch, backs off blocking
// checkpoints that readers defeat, and reports whether the WAL file was
// truncated.
func (w *walWatch) checkpoint(ctx context.Context, mode store.CheckpointMode, forced bool, walBytes int64) (truncated bool) {
	e := w.e
	res, err := e.checkpoint(ctx, w.fm, mode, forced, walBytes)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.log.Error("checkpoint WAL", "mode", mode, "wal_bytes", walBytes, "err", err)
		}
	case mode != store.CheckpointPassive && res.Busy:
		// Overlapping short readers defeat a blocking checkpoint now and
		// then, by chance: retry at once. Readers that keep defeating it
		// hold long transactions, which no checkpoint can beat: back off.
		if w.failures++; w.failures < walQuickRetries {
			return false
		}
		w.backoff = min(max(2*w.backoff, e.cfg.CheckpointInterval), maxForcedBackoff)
		w.holdUntil = time.Now().Add(w.backoff)
		level := slog.LevelDebug
		if forced {
			level = slog.LevelWarn
		}
		e.log.Log(ctx, level, "readers kept the WAL from being truncated; checkpointing passively for a while",
			"wal_bytes", walBytes, "wal_limit", e.cfg.WALLimit, "attempts", w.failures, "retry_in", w.backoff)
	case mode == store.CheckpointTruncate:
		w.backoff, w.failures = 0, 0
		e.log.Debug("WAL truncated", "forced", forced, "wal_bytes", walBytes, "wal_limit", e.cfg.WALLimit)
		return true
	}
	return false
}

// idle reports whether no run is in flight in this engine.
func (e *Engine) idle() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.active) == 0
}

// fileMaintainer returns the store's file operations, or an error wrapping
// store.ErrNotSupported.
func (e *Engine) fileMaintainer(op string) (store.FileMaintainer, error) {
	fm, ok := e.store.(store.FileMaintainer)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotSupported)
	}
	return fm, nil
}

// fileStats reads the file sizes and keeps the peak WAL size.
func (e *Engine) fileStats(ctx context.Context, fm store.FileMaintainer) (store.FileStats, error) {
	st, err := fm.FileStats(ctx)
	if err != nil {
		return st, err
	}
	e.wal.mu.Lock()
	e.wal.peak = max(e.wal.peak, st.WALBytes)
	e.wal.mu.Unlock()
	return st, nil
}

// checkpoint runs a checkpoint and records it, in memory for FileHealth and
// in the database for other processes. walBytes is the WAL's size before.
//
// The database record is written just before the checkpoint, so that the
// checkpoint copies it too (a truncated WAL stays empty, and an idle engine
// does not write a record after each of its checkpoints forever); it is
// written again after a checkpoint that failed or was busy.
func (e *Engine) checkpoint(ctx context.Context, fm store.FileMaintainer, mode store.CheckpointMode, forced bool, walBytes int64) (store.CheckpointResult, error) {
	rec := store.CheckpointRecord{At: e.nowMs(), Owner: e.cfg.WorkerID, Mode: mode, WALBytes: walBytes}
	e.recordCheckpoint(ctx, rec)
	res, err := fm.Checkpoint(ctx, mode)
	if err != nil && ctx.Err() != nil {
		return res, err // interrupted by the caller: nothing to record
	}
	if err != nil || res.Busy {
		rec.Busy = res.Busy
		if err != nil {
			rec.Error = err.Error()
		}
		e.recordCheckpoint(ctx, rec)
	}
	e.wal.mu.Lock()
	defer e.wal.mu.Unlock()
	e.wal.last, e.wal.lastAt, e.wal.lastErr, e.wal.lastWALBytes = res, time.UnixMilli(rec.At), err, walBytes
	e.wal.checkpoints++
	if forced {
		e.wal.forced++
	}
	return res, err
}

// Checkpoint runs a checkpoint of the WAL now.
func (e *Engine) Checkpoint(ctx context.Context, mode store.CheckpointMode) (store.CheckpointResult, error) {
	fm, err := e.fileMaintainer("checkpoint")
	if err != nil {
		return store.CheckpointResult{}, err
	}
	if !mode.Valid() { // before anything is recorded
		return store.CheckpointResult{}, fmt.Errorf("checkpoint: unknown mode %q: want PASSIVE, FULL, RESTART or TRUNCATE", mode)
	}
	st, err := e.fileStats(ctx, fm)
	if err != nil {
		return store.CheckpointResult{}, fmt.Errorf("checkpoint: %w", err)
	}
	return e.checkpoint(ctx, fm, mode, false, st.WALBytes)
}

// FileHealth returns the sizes of the database file and its WAL, the
// checkpoints this engine ran, and the last checkpoint recorded in the
// database, which another process may have run.
func (e *Engine) FileHealth(ctx context.Context) (FileHealth, error) {
	fm, err := e.fileMaintainer("file health")
	if err != nil {
		return FileHealth{}, err
	}
	st, err := e.fileStats(ctx, fm)
	if err != nil {
		return FileHealth{}, err
	}
	recorded, ok, err := e.lastRecordedCheckpoint(ctx)
	if err != nil {
		return FileHealth{}, fmt.Errorf("file health: %w", err)
	}
	e.wal.mu.Lock()
	defer e.wal.mu.Unlock()
	h := FileHealth{
		Path: st.Path, DBBytes: st.DBBytes, WALBytes: st.WALBytes, WALLimit: e.cfg.WALLimit,
		PeakWALBytes: e.wal.peak, Checkpoints: e.wal.checkpoints, Forced: e.wal.forced,
	}
	if !e.wal.lastAt.IsZero() {
		h.LastCheckpoint, h.LastCheckpointBy, h.LastCheckpointMode = e.wal.lastAt, e.cfg.WorkerID, e.wal.last.Mode
		h.LastCheckpointWALBytes, h.LastCheckpointBusy = e.wal.lastWALBytes, e.wal.last.Busy
		h.WALFrames, h.CheckpointedFrames = e.wal.last.WALFrames, e.wal.last.Checkpointed
		if e.wal.lastErr != nil {
			h.LastCheckpointError = e.wal.lastErr.Error()
		}
	}
	// A record newer than this engine's last checkpoint is another's.
	if ok && (h.LastCheckpoint.IsZero() || recorded.At > h.LastCheckpoint.UnixMilli()) {
		h.LastCheckpoint, h.LastCheckpointBy, h.LastCheckpointMode = time.UnixMilli(recorded.At), recorded.Owner, recorded.Mode
		h.LastCheckpointWALBytes, h.LastCheckpointBusy, h.LastCheckpointError = recorded.WALBytes, recorded.Busy, recorded.Error
		h.WALFrames, h.CheckpointedFrames = 0, 0
	}
	return h, nil
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
