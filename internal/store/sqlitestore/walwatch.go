package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

var _ store.Maintainer = (*Store)(nil)

// The WAL watch keeps the write-ahead log of the file bounded. It is the
// store's upkeep (store.Maintainer): a started engine runs it.
//
// SQLite checkpoints the WAL by itself (PASSIVE, every 1000 pages), but a
// passive checkpoint never waits: while readers keep overlapping read
// transactions open, it cannot copy the newest frames, the log never starts
// over, and the file grows without bound (checkpoint starvation). So the
// watch looks at the size of the -wal file (stat(2) only) ten times a
// second, and more often while the WAL grows fast enough to pass half of
// Options.WALLimit before the next look (and at once when a commit of the
// writer left it past that half), and runs:
//
//   - TRUNCATE as soon as the WAL passed half of WALLimit. It waits briefly
//     for readers to move to the newest snapshot, with writes held back,
//     and leaves an empty file;
//   - every Options.CheckpointInterval, TRUNCATE when the engine is idle
//     (no run in flight in it), which then costs nothing, and PASSIVE
//     otherwise, which never waits.
//
// A TRUNCATE waits for readers at most about a second. Overlapping short
// readers make one fail now and then by chance, so the watch retries at
// once; after three failures in a row it checkpoints passively for a
// backoff that doubles up to a minute, so that a long reader (e.g. a
// backup) cannot stall the writer again and again.
//
// Checkpoints go through the store's writer connection, between its
// transactions. Each is recorded in the database (the checkpoints table)
// under the engine's worker ID, so that processes that run no workflows can
// tell whether the WAL is kept in check, and counted in FileHealth.

// WAL watch defaults: see Options.
const (
	DefaultCheckpointInterval = time.Second
	DefaultWALLimit           = 64 << 20
)

// walState records the checkpoints this store ran, for FileHealth.
type walState struct {
	mu      sync.Mutex
	last    flowtype.CheckpointResult
	lastAt  time.Time
	lastBy  string // the engine that asked for it
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

// Maintain runs the WAL watch described at the top of this file until ctx
// ends. It does nothing when Options.CheckpointInterval is negative.
func (s *Store) Maintain(ctx context.Context, h store.MaintainHooks) {
	if s.checkpointInterval < 0 {
		return
	}
	now := time.Now()
	w := &walWatch{s: s, h: h, lastRoutine: now, baseAt: now}
	timer := time.NewTimer(w.maxLook())
	defer timer.Stop()
	for {
		// While another checkpoints the file, a WAL past half the limit is
		// its business: the watch keeps to its timer rather than waking at
		// every commit batch that leaves the WAL there.
		grew := s.walGrew
		if w.stoodDown {
			grew = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-grew: // a commit left the WAL past half the limit
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
	s *Store
	h store.MaintainHooks

	size        int64     // WAL size at the last look, or 0 after a truncate
	baseAt      time.Time // start of the growth measurement window
	baseSize    int64     // WAL size then
	rate        float64   // WAL growth over the last window, bytes per second
	lastRoutine time.Time // last routine (not forced) checkpoint
	failures    int       // blocking checkpoints readers defeated in a row
	backoff     time.Duration
	holdUntil   time.Time // no blocking checkpoint before then
	stoodDown   bool      // another checkpoints the file (standDown)
	warnedAt    time.Time // last warning of a WAL past the limit
}

// standDown is a look of the watch while another checkpoints the file: it
// says so once, and warns (at most once a minute) while the WAL is past
// WALLimit, which means the other does not keep it in check.
func (w *walWatch) standDown(ctx context.Context, by flowtype.Checkpointer, now time.Time) {
	s := w.s
	if !w.stoodDown {
		w.stoodDown = true
		w.h.Log.Info("leaving WAL checkpoints to another", "db", s.path, "checkpointer", by)
	}
	if w.size > s.walLimit && now.Sub(w.warnedAt) >= time.Minute {
		w.warnedAt = now
		w.h.Log.Log(ctx, slog.LevelWarn, "the WAL is past its limit, and flowlite leaves checkpoints to another: is it running?",
			"db", s.path, "checkpointer", by, "wal_bytes", w.size, "wal_limit", s.walLimit)
	}
}

func (w *walWatch) maxLook() time.Duration { return min(maxWALLook, w.s.checkpointInterval) }

// check looks at the WAL, checkpoints when due, and returns when to look
// again: soon enough that, growing at its recent rate, the WAL cannot pass
// half of WALLimit unseen. A look only reads the store's path and stats the
// file and its WAL (and, under CheckpointsAuto, Litestream's directory: see
// checkpointer).
func (w *walWatch) check(ctx context.Context) time.Duration {
	s, limit := w.s, w.s.walLimit
	st, err := s.fileStats(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.h.Log.Error("read WAL size", "err", err)
		}
		return s.checkpointInterval
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

	if by := s.checkpointer(); by != flowtype.CheckpointerEngine {
		// Litestream checkpoints alone (replicate.go): watch only. Its
		// checkpoints restart the WAL without truncating the file, so
		// what counts is the WAL in use.
		if n, err := s.WALInUse(); err == nil {
			w.size = n
		}
		w.standDown(ctx, by, now)
		return w.maxLook()
	}
	if w.stoodDown {
		w.stoodDown = false
		w.h.Log.Info("flowlite checkpoints the WAL again", "db", s.path)
	}

	holding := now.Before(w.holdUntil)
	var mode flowtype.CheckpointMode
	forced := false
	switch {
	case w.size > limit/2 && !holding:
		mode, forced = flowtype.CheckpointTruncate, true
	case now.Sub(w.lastRoutine) < s.checkpointInterval || w.size == 0:
	case w.h.Idle() && !holding:
		mode = flowtype.CheckpointTruncate
	default:
		mode = flowtype.CheckpointPassive
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
func (w *walWatch) checkpoint(ctx context.Context, mode flowtype.CheckpointMode, forced bool, walBytes int64) (truncated bool) {
	s, log := w.s, w.h.Log
	res, err := s.checkpointRecorded(ctx, w.h, mode, forced, walBytes)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			log.Error("checkpoint WAL", "mode", mode, "wal_bytes", walBytes, "err", err)
		}
	case mode != flowtype.CheckpointPassive && res.Busy:
		// Overlapping short readers defeat a blocking checkpoint now and
		// then, by chance: retry at once. Readers that keep defeating it
		// hold long transactions, which no checkpoint can beat: back off.
		if w.failures++; w.failures < walQuickRetries {
			return false
		}
		w.backoff = min(max(2*w.backoff, s.checkpointInterval), maxForcedBackoff)
		w.holdUntil = time.Now().Add(w.backoff)
		level := slog.LevelDebug
		if forced {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "readers kept the WAL from being truncated; checkpointing passively for a while",
			"wal_bytes", walBytes, "wal_limit", s.walLimit, "attempts", w.failures, "retry_in", w.backoff)
	case mode == flowtype.CheckpointTruncate:
		w.backoff, w.failures = 0, 0
		log.Debug("WAL truncated", "forced", forced, "wal_bytes", walBytes, "wal_limit", s.walLimit)
		return true
	}
	return false
}

// fileStats reads the file sizes and keeps the peak WAL size.
func (s *Store) fileStats(ctx context.Context) (store.FileStats, error) {
	st, err := s.FileStats(ctx)
	if err != nil {
		return st, err
	}
	s.wal.mu.Lock()
	s.wal.peak = max(s.wal.peak, st.WALBytes)
	s.wal.mu.Unlock()
	return st, nil
}

// checkpointRecorded runs a checkpoint and records it, in memory for
// FileHealth and in the database for other processes. walBytes is the
// WAL's size before.
//
// The database record is written just before the checkpoint, so that the
// checkpoint copies it too (a truncated WAL stays empty, and an idle engine
// does not write a record after each of its checkpoints forever); it is
// written again after a checkpoint that failed or was busy.
func (s *Store) checkpointRecorded(ctx context.Context, h store.MaintainHooks, mode flowtype.CheckpointMode, forced bool, walBytes int64) (flowtype.CheckpointResult, error) {
	rec := store.CheckpointRecord{At: h.Now().UnixMilli(), Owner: h.Owner, Mode: mode, WALBytes: walBytes}
	s.recordCheckpoint(ctx, h, rec)
	res, err := s.Checkpoint(ctx, mode)
	if err != nil && ctx.Err() != nil {
		return res, err // interrupted by the caller: nothing to record
	}
	if err != nil || res.Busy {
		rec.Busy = res.Busy
		if err != nil {
			rec.Error = err.Error()
		}
		s.recordCheckpoint(ctx, h, rec)
	}
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	s.wal.last, s.wal.lastAt, s.wal.lastBy, s.wal.lastErr, s.wal.lastWALBytes = res, time.UnixMilli(rec.At), h.Owner, err, walBytes
	s.wal.checkpoints++
	if forced {
		s.wal.forced++
	}
	return res, err
}

// recordCheckpoint stores c as the last checkpoint. A failure is logged, not
// returned: the checkpoint matters, its record does not.
func (s *Store) recordCheckpoint(ctx context.Context, h store.MaintainHooks, c store.CheckpointRecord) {
	err := s.Write(ctx, func(tx store.Tx) error { return tx.CheckpointSave(ctx, c) })
	if err != nil && ctx.Err() == nil && h.Log != nil {
		h.Log.Warn("record checkpoint", "mode", c.Mode, "err", err)
	}
}

// CheckpointRecorded runs a checkpoint of the WAL now, on an operator's
// request, and records it like the watch's own.
func (s *Store) CheckpointRecorded(ctx context.Context, mode flowtype.CheckpointMode, h store.MaintainHooks) (flowtype.CheckpointResult, error) {
	if !mode.Valid() { // before anything is recorded
		return flowtype.CheckpointResult{}, fmt.Errorf("checkpoint: unknown mode %q: want PASSIVE, FULL, RESTART or TRUNCATE", mode)
	}
	if s.checkpointer() == flowtype.CheckpointerLitestream {
		return flowtype.CheckpointResult{}, fmt.Errorf("checkpoint: %w", s.errLitestreamCheckpoints())
	}
	st, err := s.fileStats(ctx)
	if err != nil {
		return flowtype.CheckpointResult{}, fmt.Errorf("checkpoint: %w", err)
	}
	return s.checkpointRecorded(ctx, h, mode, false, st.WALBytes)
}

// FileHealth returns the sizes of the database file and its WAL, the
// checkpoints this store ran, and the last checkpoint recorded in the
// database, which another process may have run.
func (s *Store) FileHealth(ctx context.Context) (flowtype.FileHealth, error) {
	st, err := s.fileStats(ctx)
	if err != nil {
		return flowtype.FileHealth{}, err
	}
	recorded, err := s.Reader().CheckpointLast(ctx)
	ok := err == nil
	if err != nil && !errors.Is(err, flowtype.ErrRunNotFound) {
		return flowtype.FileHealth{}, fmt.Errorf("file health: %w", err)
	}
	s.wal.mu.Lock()
	defer s.wal.mu.Unlock()
	h := flowtype.FileHealth{
		Path: st.Path, DBBytes: st.DBBytes, WALBytes: st.WALBytes, WALLimit: s.walLimit,
		PeakWALBytes: s.wal.peak, Checkpoints: s.wal.checkpoints, Forced: s.wal.forced,
	}
	if !s.wal.lastAt.IsZero() {
		h.LastCheckpoint, h.LastCheckpointBy, h.LastCheckpointMode = s.wal.lastAt, s.wal.lastBy, s.wal.last.Mode
		h.LastCheckpointWALBytes, h.LastCheckpointBusy = s.wal.lastWALBytes, s.wal.last.Busy
		h.WALFrames, h.CheckpointedFrames = s.wal.last.WALFrames, s.wal.last.Checkpointed
		if s.wal.lastErr != nil {
			h.LastCheckpointError = s.wal.lastErr.Error()
		}
	}
	h.Checkpointer = s.checkpointer()
	if s.repl != nil {
		r := s.repl.r.Health()
		h.Replication = &r
	} else if r, ok := readStatus(st.Path); ok {
		h.Replication = &r
	}
	// A record newer than this store's last checkpoint is another's.
	if ok && (h.LastCheckpoint.IsZero() || recorded.At > h.LastCheckpoint.UnixMilli()) {
		h.LastCheckpoint, h.LastCheckpointBy, h.LastCheckpointMode = time.UnixMilli(recorded.At), recorded.Owner, recorded.Mode
		h.LastCheckpointWALBytes, h.LastCheckpointBusy, h.LastCheckpointError = recorded.WALBytes, recorded.Busy, recorded.Error
		h.WALFrames, h.CheckpointedFrames = 0, 0
	}
	// Litestream's checkpoints at the engine's pace (flowlitestream) are
	// this file's checkpoints while it replicates.
	if r := h.Replication; r != nil && r.Checkpoints > 0 && r.LastCheckpoint.After(h.LastCheckpoint) {
		h.Checkpoints += r.Checkpoints
		h.LastCheckpoint, h.LastCheckpointBy, h.LastCheckpointMode = r.LastCheckpoint, string(flowtype.CheckpointerLitestream), r.LastCheckpointMode
		h.LastCheckpointError, h.LastCheckpointWALBytes, h.LastCheckpointBusy = r.LastCheckpointError, r.LastCheckpointWALBytes, false
		h.WALFrames, h.CheckpointedFrames = 0, 0
	}
	return h, nil
}
