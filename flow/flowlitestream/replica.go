package flowlitestream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"

	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// DefaultSyncInterval is the default of Replication.SyncInterval: the
// recovery point.
const DefaultSyncInterval = time.Second

// replicator runs Litestream on one file and keeps the figures of
// ReplicationHealth: a flowsqlite.Replica.
type replicator struct {
	db     *litestream.DB
	ls     *litestream.Store
	client *watchedClient
	name   string
	sync   time.Duration
	log    *slog.Logger

	// paced runs the file's checkpoints (checkpoint.go), and pacedDone
	// is closed when it stopped; nil when Litestream paces them itself.
	paced     *checkpoints
	pacedDone chan struct{}

	mu          sync.Mutex
	behindSince time.Time // when the replica was first seen behind; zero in sync
	warned      bool      // a "falling behind" warning is out

	stop chan struct{}
	done chan struct{}
}

// start starts Litestream on the file f with the replica client and the
// settings of r. It returns once Litestream has opened the replica; the
// first copy of the WAL happens within a sync interval.
func start(ctx context.Context, f flowsqlite.ReplicaFile, c litestream.ReplicaClient, name string, r *Replication) (*replicator, error) {
	interval := r.SyncInterval
	if interval <= 0 {
		interval = DefaultSyncInterval
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("db", f.Path, "replica", name)
	pageSize := max(f.PageSize, 512)

	client := &watchedClient{ReplicaClient: c}
	db := litestream.NewDB(f.Path)
	// Litestream copies the WAL into LTX files every MonitorInterval and
	// uploads them every Replica.SyncInterval: together they are the
	// recovery point, so each gets a part of the interval, leaving room for
	// the upload itself.
	db.MonitorInterval = max(interval/4, 10*time.Millisecond)
	db.BusyTimeout = f.BusyTimeout
	if f.WALLimit > 0 {
		db.TruncatePageN = int(max(f.WALLimit/pageSize, 1))
	}
	paced := pacedCheckpoints(db, f) // nil: Litestream's thresholds
	rep := litestream.NewReplicaWithClient(db, client)
	rep.SyncInterval = max(interval/2, 10*time.Millisecond)
	db.Replica = rep
	ls := litestream.NewStore([]*litestream.DB{db}, litestream.DefaultCompactionLevels)
	ls.Logger = log
	db.SetLogger(log)
	if r.Retention > 0 {
		ls.SnapshotRetention = r.Retention
		ls.SnapshotInterval = min(ls.SnapshotInterval, r.Retention)
	}
	// Close uploads what is left, but a replica that does not answer must
	// not hold a stopping engine for Litestream's default 30s: ten sync
	// intervals, between 1s and 5s.
	ls.SetShutdownSyncTimeout(min(max(10*interval, time.Second), 5*time.Second))
	if err := ls.Open(ctx); err != nil {
		return nil, fmt.Errorf("replicate %s to %s: %w", f.Path, name, err)
	}
	// Litestream opens the file at its first sync, which writes when its
	// tables are new: now, before the engine's writer is busy.
	if err := db.Sync(ctx); err != nil {
		_ = ls.Close(context.Background())
		return nil, fmt.Errorf("replicate %s to %s: first copy of the WAL: %w", f.Path, name, err)
	}
	w := &replicator{
		db: db, ls: ls, client: client, name: name, sync: interval, log: log, paced: paced,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.watch()
	if paced != nil {
		w.pacedDone = make(chan struct{})
		go func() {
			defer close(w.pacedDone)
			paced.run(w.stop, func(msg string, args ...any) { log.Warn(msg, args...) })
		}()
	}
	return w, nil
}

// Close stops Litestream after a last upload of what the WAL holds.
func (r *replicator) Close() error {
	close(r.stop)
	<-r.done
	if r.pacedDone != nil {
		<-r.pacedDone
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Litestream's own Close syncs a last time only a database it has
	// begun to replicate (its first monitor tick opens it): an engine
	// closed within its first sync interval would leave its commits off
	// the replica. SyncAndWait opens it first, then copies and uploads.
	syncErr := r.db.SyncAndWait(ctx)
	if err := r.ls.Close(ctx); err != nil {
		return fmt.Errorf("stop replication to %s: %w", r.name, err)
	}
	if syncErr != nil {
		return fmt.Errorf("stop replication to %s: last upload: %w", r.name, syncErr)
	}
	return nil
}

// watch looks at the replica's position a few times per sync interval, and
// logs a replica that falls behind (and one that caught up again).
func (r *replicator) watch() {
	defer close(r.done)
	t := time.NewTicker(max(r.sync/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		h := r.Health()
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
	}
}

// behindLimit is how far behind the replica may be before it is said to
// fall behind: a few sync intervals, since an upload itself takes time.
func (r *replicator) behindLimit() time.Duration { return max(3*r.sync, 2*time.Second) }

// Health returns the replica's figures now.
func (r *replicator) Health() flowsqlite.ReplicationHealth {
	now := time.Now()
	h := flowsqlite.ReplicationHealth{Replica: r.name, InProcess: true, SyncInterval: r.sync, ReportedAt: now}
	if pos, err := r.db.Pos(); err == nil {
		h.LocalTXID = uint64(pos.TXID)
	}
	h.ReplicaTXID = uint64(r.db.Replica.Pos().TXID)
	h.LastSync, h.Errors, h.LastError, h.LastErrorAt = r.client.figures()
	if r.paced != nil {
		r.paced.report(&h)
	}
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
