package flowsqlite

import (
	"context"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// Replicator replicates the database files of an engine while it is open
// (Options.Replication); flow/flowlitestream's Replication is the one
// flowlite has: Litestream, run in the engine's process. It is a separate
// package so that a program that does not replicate links no Litestream
// (which brings net/http and net/http/pprof, whose init registers handlers
// on http.DefaultServeMux).
//
// While a file replicates, the replicator alone checkpoints its WAL:
// flowlite's own checkpoints are off (Engine.Checkpoint is refused), since
// a checkpoint that restarted the WAL before Litestream copied it would
// cost the replica commits. The engine sets the pace, though: ReplicaFile
// gives the replicator Options.CheckpointInterval and WALLimit, how much of
// the WAL is in use, and a way to hold the engine's writer while its own
// connection takes the write lock. See docs/backups.md.
type Replicator interface {
	// Replicate starts the replication of one file as the engine opens it
	// (after its migrations) and returns it running; the engine closes it
	// when it closes the file, after its last commit.
	Replicate(ctx context.Context, f ReplicaFile) (Replica, error)
}

// ReplicaFile is what a Replicator is told of a file to replicate.
type ReplicaFile struct {
	// Path is the database file.
	Path string
	// Shard is the file's place in its shard set, of Shards (1 for a
	// plain engine).
	Shard, Shards int
	// PageSize is the database's page size.
	PageSize int64
	// BusyTimeout is the engine's busy timeout, for the replicator's own
	// connections.
	BusyTimeout time.Duration
	// WALLimit is Options.WALLimit: the WAL size the replicator's
	// checkpoints should keep the WAL under.
	WALLimit int64
	// CheckpointInterval is Options.CheckpointInterval: how often the
	// replicator should checkpoint the WAL while it is in use; negative,
	// by its own policy.
	CheckpointInterval time.Duration
	// HoldWrites keeps the engine's writer between two of its
	// transactions until release is called. A replicator that writes on a
	// connection of its own (Litestream's checkpoints take SQLite's write
	// lock) holds it for those writes: the engine's writer takes the lock
	// again microseconds after each commit, and SQLite's busy handler,
	// which polls every few milliseconds, keeps losing that race.
	HoldWrites func(ctx context.Context) (release func(), err error)
	// WALInUse returns how many bytes of the WAL hold frames in use (read
	// from the WAL index): zero once a checkpoint restarted the WAL,
	// however long the file still is.
	WALInUse func() (int64, error)
}

// Replica is the running replication of one file.
type Replica interface {
	// Health returns the replica's state now, for Engine.FileHealth.
	Health() ReplicationHealth
	// Close uploads what is left, as far as the replica answers, and stops.
	Close() error
}

// Checkpoints says who checkpoints the WAL of the file (see
// Options.Checkpoints).
type Checkpoints string

// Who checkpoints.
const (
	// CheckpointsAuto is the default: the engine checkpoints (see
	// Options.CheckpointInterval), unless Litestream's directory
	// (.<file>-litestream) is beside the file: then Litestream replicates
	// it, and the engine leaves checkpoints to it.
	CheckpointsAuto Checkpoints = ""
	// CheckpointsByEngine: the engine checkpoints, whatever is beside the
	// file (e.g. a Litestream directory left over from an old set-up).
	CheckpointsByEngine Checkpoints = "engine"
	// CheckpointsByLitestream: a Litestream process beside the engines
	// replicates the file and checkpoints it alone; the engine only
	// watches the WAL's size and warns when it passes WALLimit.
	CheckpointsByLitestream Checkpoints = "litestream"
)

// storeReplicate is the adapter's Replicate for file shard of shards, with
// r (nil: none).
func storeReplicate(r Replicator, shard, shards int) func(context.Context, sqlitestore.ReplicaFile) (sqlitestore.Replica, error) {
	if r == nil {
		return nil
	}
	return func(ctx context.Context, f sqlitestore.ReplicaFile) (sqlitestore.Replica, error) {
		return r.Replicate(ctx, ReplicaFile{Path: f.Path, Shard: shard, Shards: shards, PageSize: f.PageSize,
			BusyTimeout: f.BusyTimeout, WALLimit: f.WALLimit, CheckpointInterval: f.CheckpointInterval,
			HoldWrites: f.HoldWrites, WALInUse: f.WALInUse})
	}
}

// LitestreamDir returns the directory Litestream keeps beside the database
// file at path (.<name>-litestream), whose presence makes the engine leave
// checkpoints to Litestream (CheckpointsAuto).
func LitestreamDir(path string) string { return sqlitestore.LitestreamDir(path) }

// ReplicationHealth is the state of a file's replica, in
// flow.FileHealth's Replication. See [flowtype.ReplicationHealth].
type ReplicationHealth = flowtype.ReplicationHealth

// Checkpointer names who checkpoints a file's WAL, in flow.FileHealth's
// Checkpointer. See [flowtype.Checkpointer].
type Checkpointer = flowtype.Checkpointer

// Checkpointers.
const (
	CheckpointerEngine     = flowtype.CheckpointerEngine
	CheckpointerLitestream = flowtype.CheckpointerLitestream
	CheckpointerSQLite     = flowtype.CheckpointerSQLite
)
