package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"

	"github.com/flowlite/flowlite/internal/store"
)

// Replication of the file with Litestream (github.com/benbjohnson/litestream),
// run in this process: Litestream copies each transaction out of the WAL
// into an LTX file beside the database (in its -litestream directory) and
// uploads those files to the replica, from which Restore rebuilds the file
// as it was at any moment still kept.
//
// Litestream must be the only one that checkpoints the file. It holds a
// read transaction so that no checkpoint copies frames it has not read, and
// lets go of it only for its own checkpoints; a checkpoint of flowlite's
// that restarted the WAL in between would throw away frames Litestream
// never copied, and the replica would miss those commits until its next
// snapshot (issue 26: up to a further second of acknowledged runs lost).
// So while a store replicates, its WAL watch stands down, its writer's
// automatic checkpoints are off (wal_autocheckpoint(0), see dsnFor), an
// operator's checkpoint is refused, and Litestream's emergency TRUNCATE
// threshold is the store's WALLimit.
//
// The same holds when Litestream runs as its own process beside the
// engines: Options.Checkpoints (or the detection of Litestream's directory,
// see checkpointer) makes the watch stand down there too.

// DefaultSyncInterval is the default of Options.SyncInterval: the recovery
// point of a replicated file.
const DefaultSyncInterval = time.Second

// CheckpointOwner says who checkpoints the WAL of a store's file (see
// Options.Checkpoints).
type CheckpointOwner string

// Checkpoint owners.
const (
	// CheckpointsAuto: flowlite checkpoints, unless Litestream's directory
	// (.<file>-litestream) is beside the file, which means Litestream
	// replicates it and must checkpoint alone.
	CheckpointsAuto CheckpointOwner = ""
	// CheckpointsByEngine: flowlite's WAL watch checkpoints, whatever is
	// beside the file.
	CheckpointsByEngine CheckpointOwner = "engine"
	// CheckpointsByLitestream: a Litestream process beside the engines
	// checkpoints; the WAL watch only watches.
	CheckpointsByLitestream CheckpointOwner = "litestream"
)

// statusFile is the name, inside Litestream's directory, of the file in
// which a replicating store leaves its figures for other processes (a
// flowlite health or serve that opens the file read-only).
const statusFile = "flowlite-replication.json"

// LitestreamDir returns the directory Litestream keeps beside the database
// file at path: .<name>-litestream.
func LitestreamDir(path string) string {
	dir, file := filepath.Split(path)
	return filepath.Join(dir, "."+file+litestream.MetaDirSuffix)
}

// replicator runs Litestream on one store's file and keeps the figures of
// ReplicationHealth.
type replicator struct {
	db     *litestream.DB
	ls     *litestream.Store
	client *watchedClient
	name   string
	sync   time.Duration
	log    *slog.Logger
	status string // the status file

	mu          sync.Mutex
	behindSince time.Time // when the replica was first seen behind; zero in sync
	warned      bool      // a "falling behind" warning is out

	stop chan struct{}
	done chan struct{}
}

// startReplication starts Litestream on the store's file with the replica
// of opts. It returns once Litestream has opened the replica; the first
// copy of the WAL happens within a sync interval.
func (s *Store) startReplication(ctx context.Context, opts Options) error {
	if opts.Replica == nil {
		return nil
	}
	if s.path == "" {
		return errors.New("replicate: the database is in memory")
	}
	interval := opts.SyncInterval
	if interval <= 0 {
		interval = DefaultSyncInterval
	}
	log := opts.ReplicaLogger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("db", s.path, "replica", opts.ReplicaName)
	var pageSize int64
	if err := s.reader.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return fmt.Errorf("replicate: read page size: %w", interpretError(err))
	}

	client := &watchedClient{ReplicaClient: opts.Replica}
	db := litestream.NewDB(s.path)
	// Litestream copies the WAL into LTX files every MonitorInterval and
	// uploads them every Replica.SyncInterval: together they are the
	// recovery point, so each gets a part of the interval, leaving room for
	// the upload itself.
	db.MonitorInterval = max(interval/4, 10*time.Millisecond)
	db.BusyTimeout = s.busyTimeout
	db.TruncatePageN = int(max(s.walLimit/pageSize, 1))
	r := litestream.NewReplicaWithClient(db, client)
	r.SyncInterval = max(interval/2, 10*time.Millisecond)
	db.Replica = r
	ls := litestream.NewStore([]*litestream.DB{db}, litestream.DefaultCompactionLevels)
	ls.Logger = log
	db.SetLogger(log)
	if opts.ReplicaRetention > 0 {
		ls.SnapshotRetention = opts.ReplicaRetention
		ls.SnapshotInterval = min(ls.SnapshotInterval, opts.ReplicaRetention)
	}
	// Close uploads what is left, but a replica that does not answer must
	// not hold a stopping engine for Litestream's default 30s: ten sync
	// intervals, between 1s and 5s.
	ls.SetShutdownSyncTimeout(min(max(10*interval, time.Second), 5*time.Second))
	if err := ls.Open(ctx); err != nil {
		return fmt.Errorf("replicate %s to %s: %w", s.path, opts.ReplicaName, err)
	}
	rep := &replicator{
		db: db, ls: ls, client: client, name: opts.ReplicaName, sync: interval, log: log,
		status: filepath.Join(LitestreamDir(s.path), statusFile),
		stop:   make(chan struct{}), done: make(chan struct{}),
	}
	go rep.watch()
	s.repl = rep
	return nil
}

// close stops Litestream after a last upload of what the WAL holds.
func (r *replicator) close() error {
	close(r.stop)
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.ls.Close(ctx)
	r.writeStatus() // the last figures, for readers after this process
	if err != nil {
		return fmt.Errorf("stop replication to %s: %w", r.name, err)
	}
	return nil
}

// watch looks at the replica's position a few times per sync interval,
// logs a replica that falls behind (and one that caught up again), and
// leaves the figures in the status file for other processes.
func (r *replicator) watch() {
	defer close(r.done)
	t := time.NewTicker(max(r.sync/2, 10*time.Millisecond))
	defer t.Stop()
	lastWrite := time.Time{}
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		h := r.health()
		behind := h.Lag > r.behindLimit()
		r.mu.Lock()
		switch {
		case behind && !r.warned:
			r.warned = true
			r.log.Warn("replica falling behind: commits older than the sync interval are not on the replica yet",
				"lag", h.Lag.Round(time.Millisecond), "sync_interval", r.sync, "local_txid", h.LocalTXID,
				"replica_txid", h.ReplicaTXID, "last_error", h.LastError)
		case !behind && r.warned && h.Lag == 0:
			r.warned = false
			r.log.Info("replica caught up", "txid", h.ReplicaTXID)
		}
		r.mu.Unlock()
		// Often enough for a reader to see a lag as it grows.
		if time.Since(lastWrite) >= time.Second {
			r.writeStatus()
			lastWrite = time.Now()
		}
	}
}

// behindLimit is how far behind the replica may be before it is said to
// fall behind: a few sync intervals, since an upload itself takes time.
func (r *replicator) behindLimit() time.Duration { return max(3*r.sync, 2*time.Second) }

// health returns the replica's figures now.
func (r *replicator) health() store.ReplicationHealth {
	now := time.Now()
	h := store.ReplicationHealth{Replica: r.name, InProcess: true, SyncInterval: r.sync, ReportedAt: now}
	if pos, err := r.db.Pos(); err == nil {
		h.LocalTXID = uint64(pos.TXID)
	}
	h.ReplicaTXID = uint64(r.db.Replica.Pos().TXID)
	h.LastSync, h.Errors, h.LastError, h.LastErrorAt = r.client.figures()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case h.ReplicaTXID >= h.LocalTXID:
		r.behindSince = time.Time{}
	case r.behindSince.IsZero():
		r.behindSince = now
	default:
		h.Lag = now.Sub(r.behindSince)
	}
	return h
}

// writeStatus leaves the figures in the status file, replaced whole (a
// reader never sees half of it). A failure is logged at debug level only:
// the figures are a courtesy to other processes.
func (r *replicator) writeStatus() {
	b, err := json.Marshal(r.health())
	if err == nil {
		tmp := r.status + ".tmp" // Litestream removes *.tmp files it finds
		if err = os.WriteFile(tmp, b, 0o644); err == nil {
			err = os.Rename(tmp, r.status)
		}
	}
	if err != nil {
		r.log.Debug("write replication status", "file", r.status, "err", err)
	}
}

// readStatus reads the figures a replicating process left beside the file
// at path; false when there are none.
func readStatus(path string) (store.ReplicationHealth, bool) {
	b, err := os.ReadFile(filepath.Join(LitestreamDir(path), statusFile))
	if err != nil {
		return store.ReplicationHealth{}, false
	}
	var h store.ReplicationHealth
	if json.Unmarshal(b, &h) != nil {
		return store.ReplicationHealth{}, false
	}
	h.InProcess = false
	return h, true
}

// watchedClient is the replica client Litestream writes through, which
// records when the replica last acknowledged a write and what failed.
type watchedClient struct {
	litestream.ReplicaClient

	mu        sync.Mutex
	lastSync  time.Time
	errors    int64
	lastErr   string
	lastErrAt time.Time
}

func (c *watchedClient) WriteLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, r io.Reader) (*ltx.FileInfo, error) {
	info, err := c.ReplicaClient.WriteLTXFile(ctx, level, minTXID, maxTXID, r)
	c.note(err)
	return info, err
}

func (c *watchedClient) note(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.lastSync = time.Now()
		return
	}
	if errors.Is(err, context.Canceled) {
		return // a stop, not a failure of the replica
	}
	c.errors++
	c.lastErr, c.lastErrAt = err.Error(), time.Now()
}

func (c *watchedClient) figures() (lastSync time.Time, errs int64, lastErr string, lastErrAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSync, c.errors, c.lastErr, c.lastErrAt
}

// checkpointer says who checkpoints the store's file now. A look for
// Litestream's directory stats one path.
func (s *Store) checkpointer() store.Checkpointer {
	switch {
	case s.repl != nil, s.checkpoints == CheckpointsByLitestream:
		return store.CheckpointerLitestream
	case s.checkpointInterval < 0:
		return store.CheckpointerSQLite
	case s.checkpoints == CheckpointsByEngine, s.path == "":
		return store.CheckpointerEngine
	}
	if info, err := os.Stat(LitestreamDir(s.path)); err == nil && info.IsDir() {
		return store.CheckpointerLitestream
	}
	return store.CheckpointerEngine
}

// errLitestreamCheckpoints refuses a checkpoint of flowlite's on a file
// Litestream checkpoints.
func (s *Store) errLitestreamCheckpoints() error {
	if s.repl != nil {
		return fmt.Errorf("%w: this engine replicates %s with Litestream, which checkpoints the file alone: a checkpoint of flowlite's would cost the replica commits",
			store.ErrNotSupported, s.path)
	}
	return fmt.Errorf("%w: Litestream checkpoints %s (its directory %s is beside the file, or the engines leave checkpoints to it): a checkpoint of flowlite's would cost the replica commits; remove that directory if Litestream no longer replicates the file",
		store.ErrNotSupported, s.path, LitestreamDir(s.path))
}

// RestoreOptions say what Restore brings back.
type RestoreOptions struct {
	// At restores the file as it was at that moment (point in time); zero:
	// the newest state the replica holds.
	At time.Time
	// TXID restores the file as it was after that Litestream transaction;
	// zero: see At. At most one of At and TXID may be set.
	TXID uint64
	// Logger receives Litestream's logs of the restore; default
	// slog.Default().
	Logger *slog.Logger
}

// Restore writes the database that client's replica holds to the new file
// dst, checks it (quick_check) and leaves it ready to open. An existing
// dst is refused (errors.Is(err, fs.ErrExist)) and left as it is.
func Restore(ctx context.Context, client litestream.ReplicaClient, dst string, opts RestoreOptions) error {
	switch {
	case dst == "":
		return errors.New("restore: destination path is empty")
	case !opts.At.IsZero() && opts.TXID != 0:
		return fmt.Errorf("restore to %s: give a time or a transaction ID, not both", dst)
	}
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("restore to %s: %w: refusing to overwrite it", dst, fs.ErrExist)
	}
	if err := client.Init(ctx); err != nil {
		return fmt.Errorf("restore to %s: open the replica: %w", dst, err)
	}
	o := litestream.NewRestoreOptions()
	o.OutputPath, o.Timestamp, o.TXID = dst, opts.At, ltx.TXID(opts.TXID)
	o.IntegrityCheck = litestream.IntegrityCheckQuick
	// A replica logs through its database's logger, so the restore gets a
	// database that is never opened; Close drops the metrics NewDB made.
	db := litestream.NewDB(dst)
	if opts.Logger != nil {
		db.Logger = opts.Logger
	}
	defer db.Close(context.WithoutCancel(ctx))
	if err := litestream.NewReplicaWithClient(db, client).Restore(ctx, o); err != nil {
		if errors.Is(err, litestream.ErrTxNotAvailable) || errors.Is(err, litestream.ErrNoSnapshots) {
			return fmt.Errorf("restore to %s: %w: the replica holds nothing for that point (%v)", dst, store.ErrNotFound, err)
		}
		return fmt.Errorf("restore to %s: %w", dst, err)
	}
	return nil
}
