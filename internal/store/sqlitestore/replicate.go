package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Replication of the file with Litestream (github.com/benbjohnson/litestream),
// run in this process by a Replicate function (flow/flowlitestream's):
// Litestream copies each transaction out of the WAL into an LTX file beside
// the database (in its -litestream directory) and uploads those files to
// the replica. This adapter does not link Litestream, which brings
// net/http and net/http/pprof (whose init registers handlers on
// http.DefaultServeMux) into every program; it only makes room for it.
//
// Litestream must be the only one that checkpoints the file. It holds a
// read transaction so that no checkpoint copies frames it has not read, and
// lets go of it only for its own checkpoints; a checkpoint of flowlite's
// that restarted the WAL in between would throw away frames Litestream
// never copied, and the replica would miss those commits until its next
// snapshot (issue 26: up to a further second of acknowledged runs lost).
// So while a store replicates, its WAL watch stands down, its writer's
// automatic checkpoints are off (wal_autocheckpoint(0), see Open), and an
// operator's checkpoint is refused.
//
// Litestream's checkpoints take SQLite's write lock on a connection of its
// own. Left to itself it asks for the lock with SQLite's busy handler, which
// polls every few milliseconds, while this store's writer takes the lock
// again microseconds after each commit: under a steady load Litestream's
// checkpoints came seconds apart, and the WAL grew past any limit (issue
// 26: 270 MB in 8 s). So the replicator is given
// HoldWrites and WALInUse, and checkpoints when the store's
// CheckpointInterval and WALLimit say, with the writer held between two
// transactions.
//
// The same holds when Litestream runs as its own process beside the
// engines: Options.Checkpoints (or the detection of Litestream's directory,
// see checkpointer) makes the watch stand down there too.

// ReplicaFile is what a Replicate function is told of the file to
// replicate.
type ReplicaFile struct {
	Path        string
	PageSize    int64
	BusyTimeout time.Duration
	WALLimit    int64 // the WAL size the replicator's checkpoints should keep it under
	// CheckpointInterval is Options.CheckpointInterval: how often the
	// replicator should checkpoint a WAL in use; negative, by its own
	// policy.
	CheckpointInterval time.Duration
	// HoldWrites is Store.HoldWrites, for the replicator's checkpoints.
	HoldWrites func(ctx context.Context) (release func(), err error)
	// WALInUse is Store.WALInUse.
	WALInUse func() (int64, error)
}

// Replica is the replication of one file, running until Close, which
// uploads what is left.
type Replica interface {
	Health() flowtype.ReplicationHealth
	Close() error
}

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

// litestreamDirSuffix is Litestream's litestream.MetaDirSuffix.
const litestreamDirSuffix = "-litestream"

// LitestreamDir returns the directory Litestream keeps beside the database
// file at path: .<name>-litestream.
func LitestreamDir(path string) string {
	dir, file := filepath.Split(path)
	return filepath.Join(dir, "."+file+litestreamDirSuffix)
}

// replication is a store's running Replica, and the loop that leaves its
// figures in the status file for other processes.
type replication struct {
	r      Replica
	status string
	stop   chan struct{}
	done   chan struct{}
}

// startReplication starts the replication of the store's file with
// opts.Replicate, if set.
func (s *Store) startReplication(ctx context.Context, opts Options) error {
	if opts.Replicate == nil {
		return nil
	}
	if s.path == "" {
		return errors.New("replicate: the database is in memory")
	}
	var pageSize int64
	if err := s.reader.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return fmt.Errorf("replicate: read page size: %w", interpretError(err))
	}
	r, err := opts.Replicate(ctx, ReplicaFile{Path: s.path, PageSize: pageSize, BusyTimeout: s.busyTimeout,
		WALLimit: s.walLimit, CheckpointInterval: s.checkpointInterval, HoldWrites: s.HoldWrites, WALInUse: s.WALInUse})
	if err != nil {
		return fmt.Errorf("replicate: %w", err)
	}
	rep := &replication{r: r, status: filepath.Join(LitestreamDir(s.path), statusFile),
		stop: make(chan struct{}), done: make(chan struct{})}
	go rep.report()
	s.repl = rep
	return nil
}

// report writes the replica's figures to the status file every second,
// often enough for a reader to see a lag as it grows.
func (r *replication) report() {
	defer close(r.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.writeStatus()
		}
	}
}

// close stops the replication after a last upload, and leaves the last
// figures for readers after this process.
func (r *replication) close() error {
	close(r.stop)
	<-r.done
	err := r.r.Close()
	r.writeStatus()
	return err
}

// writeStatus leaves the figures in the status file, replaced whole (a
// reader never sees half of it). A failure is ignored: the figures are a
// courtesy to other processes, and the directory is Litestream's.
func (r *replication) writeStatus() {
	b, err := json.Marshal(r.r.Health())
	if err != nil {
		return
	}
	tmp := r.status + ".tmp" // Litestream removes the *.tmp files it finds
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, r.status)
	}
}

// readStatus reads the figures a replicating process left beside the file
// at path; false when there are none.
func readStatus(path string) (flowtype.ReplicationHealth, bool) {
	b, err := os.ReadFile(filepath.Join(LitestreamDir(path), statusFile))
	if err != nil {
		return flowtype.ReplicationHealth{}, false
	}
	var h flowtype.ReplicationHealth
	if json.Unmarshal(b, &h) != nil {
		return flowtype.ReplicationHealth{}, false
	}
	h.InProcess = false
	return h, true
}

// checkpointer says who checkpoints the store's file now. A look for
// Litestream's directory stats one path.
func (s *Store) checkpointer() flowtype.Checkpointer {
	switch {
	case s.repl != nil, s.checkpoints == CheckpointsByLitestream:
		return flowtype.CheckpointerLitestream
	case s.checkpointInterval < 0:
		return flowtype.CheckpointerSQLite
	case s.checkpoints == CheckpointsByEngine, s.path == "":
		return flowtype.CheckpointerEngine
	}
	if info, err := os.Stat(LitestreamDir(s.path)); err == nil && info.IsDir() {
		return flowtype.CheckpointerLitestream
	}
	return flowtype.CheckpointerEngine
}

// errLitestreamCheckpoints refuses a checkpoint of flowlite's on a file
// Litestream checkpoints.
func (s *Store) errLitestreamCheckpoints() error {
	if s.repl != nil {
		return fmt.Errorf("%w: this engine replicates %s with Litestream, which checkpoints the file alone: a checkpoint of flowlite's would cost the replica commits",
			flowtype.ErrNotSupported, s.path)
	}
	return fmt.Errorf("%w: Litestream checkpoints %s (its directory %s is beside the file, or the engines leave checkpoints to it): a checkpoint of flowlite's would cost the replica commits; remove that directory if Litestream no longer replicates the file",
		flowtype.ErrNotSupported, s.path, LitestreamDir(s.path))
}
