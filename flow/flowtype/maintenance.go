package flowtype

import "time"

// Retention says how long finished runs are kept, counted from when they
// finished, per final state. A zero field takes the default
// (DefaultRetainCompleted and so on); a negative one keeps runs of that
// state forever. Runs that are not finished (pending, running, waiting,
// compensating, suspended) are never deleted, and neither is a finished
// child run whose parent has not finished.
type Retention struct {
	// Completed is how long completed runs are kept; default 24h.
	Completed time.Duration
	// Failed is how long failed (rolled-back) runs are kept; default 7
	// days, long enough to look into a failure after a weekend.
	Failed time.Duration
	// Cancelled is how long cancelled runs are kept; default 7 days.
	Cancelled time.Duration
}

// Retention defaults: how long finished runs are kept when a Retention
// leaves a state at zero.
const (
	// DefaultRetainCompleted is the default of Retention.Completed.
	DefaultRetainCompleted = 24 * time.Hour
	// DefaultRetainFailed is the default of Retention.Failed.
	DefaultRetainFailed = 7 * 24 * time.Hour
	// DefaultRetainCancelled is the default of Retention.Cancelled.
	DefaultRetainCancelled = 7 * 24 * time.Hour
)

// CheckpointMode is how hard a checkpoint of the WAL tries; the modes are
// SQLite's wal_checkpoint modes.
type CheckpointMode string

// Checkpoint modes.
const (
	// CheckpointPassive copies what it can without waiting for readers or
	// writers.
	CheckpointPassive CheckpointMode = "PASSIVE"
	// CheckpointFull waits for writers, then copies the whole WAL.
	CheckpointFull CheckpointMode = "FULL"
	// CheckpointRestart is CheckpointFull, then waits for readers to leave
	// the WAL so that the next write starts it over from the beginning.
	CheckpointRestart CheckpointMode = "RESTART"
	// CheckpointTruncate is CheckpointRestart, then truncates the WAL file
	// to zero bytes.
	CheckpointTruncate CheckpointMode = "TRUNCATE"
)

// Valid reports whether m is one of the checkpoint modes.
func (m CheckpointMode) Valid() bool {
	switch m {
	case CheckpointPassive, CheckpointFull, CheckpointRestart, CheckpointTruncate:
		return true
	}
	return false
}

// CheckpointResult is the outcome of a checkpoint.
type CheckpointResult struct {
	// Mode is the mode the checkpoint ran in.
	Mode CheckpointMode
	// Busy is true when the checkpoint could not finish because readers or
	// writers held on to the WAL past the wait.
	Busy bool
	// WALFrames is the number of frames in the WAL; zero after a successful
	// CheckpointTruncate.
	WALFrames int
	// Checkpointed is how many of the WAL's frames are now in the database
	// file; zero after a successful CheckpointTruncate.
	Checkpointed int
}

// FileHealth describes the database file, the checkpoints this engine ran
// on it, and the last checkpoint any engine ran on it, so that an operator
// can tell whether the WAL is kept in check.
type FileHealth struct {
	// Path is the database file.
	Path string
	// DBBytes is the size of the database file.
	DBBytes int64
	// WALBytes is the size of the -wal file now.
	WALBytes int64
	// WALLimit is the configured bound of the -wal file (flowsqlite's
	// Options.WALLimit).
	WALLimit int64
	// PeakWALBytes is the largest WAL size this engine saw since it was
	// created (by its WAL watch or FileHealth).
	PeakWALBytes int64
	// Checkpoints counts the checkpoints this engine ran. SQLite's own
	// automatic checkpoints are not counted.
	Checkpoints int64
	// Forced counts those of Checkpoints that ran because the WAL passed
	// half of WALLimit.
	Forced int64
	// LastCheckpoint is when the last checkpoint run on the file, by this
	// engine or by another one (another process) that recorded it in the
	// database, ran, on the clock of the engine that ran it; zero when none
	// did.
	LastCheckpoint time.Time
	// LastCheckpointBy is the worker ID of the engine that ran the last
	// checkpoint.
	LastCheckpointBy string
	// LastCheckpointMode is the mode of the last checkpoint.
	LastCheckpointMode CheckpointMode
	// LastCheckpointWALBytes is the WAL's size before the last checkpoint.
	LastCheckpointWALBytes int64
	// LastCheckpointBusy is true when readers or writers kept the last
	// checkpoint from finishing.
	LastCheckpointBusy bool
	// LastCheckpointError is the last checkpoint's error, if it failed.
	LastCheckpointError string
	// WALFrames is how many frames the WAL held when this engine ran the
	// last checkpoint; zero when another engine ran it, and after a
	// CheckpointTruncate.
	WALFrames int
	// CheckpointedFrames is how many of WALFrames were copied into the
	// database file; zero when another engine ran the last checkpoint, and
	// after a CheckpointTruncate.
	CheckpointedFrames int
	// Checkpointer says who checkpoints the file's WAL: CheckpointerEngine
	// (flowlite's WAL watch), CheckpointerLitestream (Litestream, in this
	// process or beside it) or CheckpointerSQLite (only SQLite's own
	// automatic checkpoints, with flowsqlite's CheckpointInterval < 0).
	// Two processes that checkpoint one file fight: a checkpoint that
	// restarts the WAL before Litestream copied its frames costs the
	// replica a recovery point. Empty on PostgreSQL.
	Checkpointer Checkpointer
	// Replication describes the Litestream replica of the file; nil when
	// the file is not replicated by flowlite (a separate Litestream
	// process keeps its own figures: see its /metrics).
	Replication *ReplicationHealth
}

// Checkpointer names who checkpoints a SQLite file's WAL (see
// FileHealth.Checkpointer).
type Checkpointer string

// Checkpointers.
const (
	// CheckpointerEngine is flowlite's own WAL watch.
	CheckpointerEngine Checkpointer = "flowlite"
	// CheckpointerLitestream is Litestream, which replicates the file:
	// flowlite runs no checkpoint of its own while it does.
	CheckpointerLitestream Checkpointer = "litestream"
	// CheckpointerSQLite is SQLite's automatic passive checkpoint alone.
	CheckpointerSQLite Checkpointer = "sqlite"
)

// ReplicationHealth is the state of a file's Litestream replica, as the
// process that replicates it last saw it.
type ReplicationHealth struct {
	// Replica names the replica: its type and place, without credentials.
	Replica string
	// InProcess is true when the engine that reports it replicates the
	// file itself (flowsqlite's Options.Replication); false when it was
	// read from the status that process left beside the file.
	InProcess bool
	// SyncInterval is the replication's configured recovery point: how
	// far behind the newest commit the replica is meant to stay.
	SyncInterval time.Duration
	// LocalTXID is the newest transaction Litestream copied out of the
	// WAL; ReplicaTXID the newest the replica acknowledged.
	LocalTXID, ReplicaTXID uint64
	// LastSync is when the replica last acknowledged a write of
	// Litestream's; zero before the first.
	LastSync time.Time
	// Lag is how long the replica has been behind the newest transaction
	// Litestream copied out of the WAL, when it was last looked at; zero
	// while it is in sync.
	Lag time.Duration
	// Errors counts the writes to the replica that failed since the
	// replication started.
	Errors int64
	// LastError is the newest of those failures, empty when none failed.
	LastError string
	// LastErrorAt is when LastError happened; zero when none failed.
	LastErrorAt time.Time
	// Checkpoints counts the checkpoints Litestream ran at the engine's
	// pace (flowsqlite.ReplicaFile.HoldWrites); zero when Litestream
	// paces its own.
	Checkpoints int64
	// LastCheckpoint is when the last of them ended; zero before the
	// first.
	LastCheckpoint time.Time
	// LastCheckpointMode is the mode of the last of them.
	LastCheckpointMode CheckpointMode
	// LastCheckpointWALBytes is how much of the WAL was in use before it.
	LastCheckpointWALBytes int64
	// LastCheckpointError is its failure; empty when it succeeded.
	LastCheckpointError string
	// ReportedAt is when these figures were taken.
	ReportedAt time.Time
}

// StandbyStatus is where the PostgreSQL server a store reads from stands
// in streaming replication, read when it is asked for. A standby in
// recovery (a read replica) serves what its primary committed only once it
// replayed it, so everything read there is as old as its replay: an
// operator reading a dashboard or a report off a standby needs to see how
// old.
type StandbyStatus struct {
	// Standby says the server is a standby in recovery; the fields below
	// describe it only then.
	Standby bool
	// CaughtUp says the standby replayed all the WAL it received.
	CaughtUp bool
	// ReplayAge is how long ago the last transaction the standby replayed
	// committed on the primary: how far behind the primary it is while it
	// replays (not CaughtUp), and once caught up, how long the primary has
	// sent nothing newer (an idle primary, not a lag).
	ReplayAge time.Duration
}

// HistoryPartitions describes how a PostgreSQL schema keeps the history of
// runs: in one table, or in partitions of time that retention drops whole
// (flowpg.Options.HistoryPartitions).
type HistoryPartitions struct {
	// Span is the time each partition covers; 0 when the history is one
	// table, and Partitions is empty.
	Span time.Duration
	// Partitions are the history's partitions, oldest first, the one
	// made ahead of now included.
	Partitions []HistoryPartition
}

// HistoryPartition is one partition of a run history kept in partitions.
type HistoryPartition struct {
	// Name is the partition's table, in the engine's schema.
	Name string
	// From is the first event time the partition holds; zero for
	// events_before, which holds the history from before partitioning.
	From time.Time
	// To is the first event time past the partition.
	To time.Time
	// Bytes is the partition's size on disk, indexes included.
	Bytes int64
}
