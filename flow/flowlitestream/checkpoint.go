package flowlitestream

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"

	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowtype"
)

// Litestream checkpoints the WAL by itself when it grows past thresholds,
// on a connection of its own, and each of its checkpoints writes: it takes
// SQLite's write lock to seal the WAL, and writes a row after it. Under a
// steady load the engine's writer takes that lock again microseconds after
// each commit, while SQLite's busy handler polls every few milliseconds:
// Litestream's checkpoints came seconds apart, and the WAL grew without
// bound (270 MB in 8 s of 16 callers enqueueing, past a 64 MiB WALLimit,
// with every commit's fsync slower for it). Paced by the engine but without
// the writer held, it still grew to 88-115 MB; held, it stays under 38 MB.
//
// So the engine decides when, and Litestream checkpoints: Litestream's own
// thresholds are turned off, and a loop here looks at how much of the WAL
// is in use (ReplicaFile.WALInUse) and asks Litestream for a checkpoint
// with the engine's writer held between two transactions
// (ReplicaFile.HoldWrites), so that Litestream's connection gets the lock at
// once:
//
//   - PASSIVE every CheckpointInterval while the WAL is in use, and at once
//     when it passes half of WALLimit. With the writer held it almost
//     always restarts the WAL; Litestream copies the WAL's last frames
//     before and after it, so the replica misses nothing.
//   - TRUNCATE only when a PASSIVE left the WAL past WALLimit (a reader's
//     long transaction kept it from restarting). Litestream then takes a
//     snapshot of the whole file, so it is the exception: readers that keep
//     defeating it make the loop back off, doubling up to a minute.
//
// Before the writer is held, Litestream copies what the WAL holds (Sync),
// so that what it copies with the writer held is short.

// checkpointLook is how often the loop reads how much of the WAL is in use
// (96 bytes of the -shm file), at most.
const checkpointLook = 100 * time.Millisecond

// maxTruncateBackoff bounds how long the loop waits after readers defeated
// a TRUNCATE before it tries another.
const maxTruncateBackoff = time.Minute

// checkpoints is the engine-paced checkpointing of one file.
type checkpoints struct {
	db       *litestream.DB
	file     flowsqlite.ReplicaFile
	interval time.Duration

	mu       sync.Mutex
	count    int64                   // checkpoints run
	last     time.Time               // when the last one ended
	lastMode flowtype.CheckpointMode // its mode
	lastWAL  int64                   // the WAL in use before it
	lastErr  string                  // its failure; empty when it succeeded

	stuck      bool          // the last PASSIVE did not restart the WAL
	backoff    time.Duration // after readers defeated a TRUNCATE
	truncAfter time.Time     // no TRUNCATE before then
}

// pacedCheckpoints returns the engine-paced checkpointing of f, having
// turned Litestream's own thresholds off; nil, leaving them on, when the
// engine does not pace them (a negative CheckpointInterval, or a
// ReplicaFile without HoldWrites and WALInUse).
func pacedCheckpoints(db *litestream.DB, f flowsqlite.ReplicaFile) *checkpoints {
	if f.CheckpointInterval < 0 || f.HoldWrites == nil || f.WALInUse == nil {
		return nil
	}
	db.MinCheckpointPageN = math.MaxInt32 // must be positive; never reached
	db.TruncatePageN = math.MaxInt32
	db.CheckpointInterval = 0
	interval := f.CheckpointInterval
	if interval == 0 {
		interval = time.Second
	}
	return &checkpoints{db: db, file: f, interval: interval}
}

// run checkpoints as the top of this file says until stop is closed.
func (c *checkpoints) run(stop <-chan struct{}, log func(msg string, args ...any)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	maxLook := min(checkpointLook, c.interval)
	t := time.NewTimer(maxLook)
	defer t.Stop()
	var lastRoutine, lookedAt time.Time
	var looked int64 // the WAL in use at the last look
	var rate float64 // how fast it grew between the last two looks that saw it grow, bytes/s
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		inUse, err := c.file.WALInUse()
		now := time.Now()
		if dt := now.Sub(lookedAt); inUse > looked && dt > 0 {
			rate = float64(inUse-looked) / dt.Seconds()
		}
		t.Reset(c.nextLook(maxLook, inUse, rate))
		lookedAt, looked = now, inUse
		if err != nil || inUse == 0 {
			continue
		}
		// Past half the limit, a checkpoint is due at once, unless the
		// last one could not restart the WAL: then at the interval.
		routine := time.Since(lastRoutine) >= c.interval
		forced := c.file.WALLimit > 0 && inUse >= c.file.WALLimit/2 && !c.stuck
		if !routine && !forced {
			continue
		}
		lastRoutine = time.Now()
		restarted, err := c.checkpoint(ctx, flowtype.CheckpointPassive, inUse)
		if err != nil {
			if ctx.Err() == nil {
				log("checkpoint through Litestream failed", "mode", flowtype.CheckpointPassive, "wal_in_use", inUse, "err", err)
			}
			continue
		}
		c.stuck = !restarted
		if restarted || c.file.WALLimit <= 0 {
			continue
		}
		after, err := c.file.WALInUse()
		if err != nil || after <= c.file.WALLimit || time.Now().Before(c.truncAfter) {
			continue
		}
		restarted, err = c.checkpoint(ctx, flowtype.CheckpointTruncate, after)
		switch {
		case err != nil && ctx.Err() == nil:
			log("checkpoint through Litestream failed", "mode", flowtype.CheckpointTruncate, "err", err)
		case err == nil && !restarted:
			c.backoff = min(max(2*c.backoff, c.interval), maxTruncateBackoff)
			c.truncAfter = time.Now().Add(c.backoff)
			log("readers kept the WAL from being truncated; checkpointing passively for a while",
				"wal_limit", c.file.WALLimit, "retry_in", c.backoff)
		case err == nil:
			c.backoff, c.stuck = 0, false
		}
	}
}

// minLook bounds how often the loop looks at the WAL while it grows fast.
const minLook = 5 * time.Millisecond

// nextLook returns when to look at the WAL again: soon enough that,
// growing at rate bytes a second from inUse, it cannot pass half of
// WALLimit unseen.
func (c *checkpoints) nextLook(maxLook time.Duration, inUse int64, rate float64) time.Duration {
	half := c.file.WALLimit / 2
	switch {
	case half <= 0 || rate <= 0:
		return maxLook
	case inUse >= half && c.stuck: // the interval's checkpoint is next
		return maxLook
	case inUse >= half:
		return minLook
	}
	untilHalf := time.Duration(float64(half-inUse) / rate * float64(time.Second))
	return min(maxLook, max(minLook, untilHalf/2))
}

// checkpoint has Litestream checkpoint in mode with the engine's writer
// held, and reports whether the WAL restarted; inUse is how much of the WAL
// was in use, for Health.
func (c *checkpoints) checkpoint(ctx context.Context, mode flowtype.CheckpointMode, inUse int64) (restarted bool, err error) {
	defer func() { c.note(mode, inUse, err) }()
	// Copy what the WAL holds now while the writer goes on, so that the
	// copy Litestream makes with the writer held is short.
	if err := c.db.Sync(ctx); err != nil {
		return false, fmt.Errorf("copy the WAL: %w", err)
	}
	release, err := c.file.HoldWrites(ctx)
	if err != nil {
		return false, fmt.Errorf("hold the engine's writes: %w", err)
	}
	defer release()
	before, err := walHeader(c.db.WALPath())
	if err != nil {
		return false, err
	}
	if err := c.db.Checkpoint(ctx, string(mode)); err != nil {
		return false, err
	}
	after, err := walHeader(c.db.WALPath())
	if err != nil {
		return false, err
	}
	// A restarted (or truncated) WAL has new salts in its header.
	return !bytes.Equal(before, after), nil
}

// note records the outcome of a checkpoint for Health.
func (c *checkpoints) note(mode flowtype.CheckpointMode, inUse int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	c.last, c.lastMode, c.lastWAL, c.lastErr = time.Now(), mode, inUse, ""
	if err != nil {
		c.lastErr = err.Error()
	}
}

// report adds what note recorded to h.
func (c *checkpoints) report(h *flowsqlite.ReplicationHealth) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.Checkpoints, h.LastCheckpoint, h.LastCheckpointError = c.count, c.last, c.lastErr
	h.LastCheckpointMode, h.LastCheckpointWALBytes = c.lastMode, c.lastWAL
}

// walHeader reads the 32-byte header of the WAL file at path; empty when
// the WAL is empty or absent.
func walHeader(path string) ([]byte, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read the WAL header: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 32)
	n, err := f.ReadAt(buf, 0)
	if n < len(buf) {
		return buf[:n], nil // shorter than a header: truncated
	}
	if err != nil {
		return nil, fmt.Errorf("read the WAL header: %w", err)
	}
	return buf, nil
}
