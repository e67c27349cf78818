package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// MaintenanceTx holds the writes that keep a database small: deleting the
// runs retention no longer keeps.
type MaintenanceTx interface {
	// RunDeleteFinished deletes up to p.Max runs in state p.Status that
	// finished before p.FinishedBefore, oldest first, with their steps,
	// events and signals, and returns how many runs it deleted. It never
	// deletes an unfinished run (the delete re-checks the state, whatever
	// p.Status says), nor a finished child of an unfinished parent, which
	// may still read the child's outcome, nor a run with an event after
	// p.KeepAfter (a position the feed's consumers have not acknowledged).
	// Concurrent deletes must not wait on each other: on PostgreSQL each
	// skips the runs another transaction holds (SQLite's single writer
	// serializes them anyway).
	RunDeleteFinished(ctx context.Context, p RunDeleteFinishedParams) (int, error)
}

// RunDeleteFinishedParams selects finished runs to delete.
type RunDeleteFinishedParams struct {
	Status         flowtype.RunStatus // completed, failed or cancelled
	FinishedBefore int64              // Unix milliseconds, exclusive
	Max            int                // positive
	// WaitForFeed keeps runs with an event after the feed position
	// KeepAfter (the feed's consumers have not read it); false deletes
	// regardless of the feed.
	WaitForFeed bool
	KeepAfter   int64
}

// Maintainer is implemented by stores with upkeep of their own, which only
// the adapter knows how to do: the SQLite adapter keeps its write-ahead log
// bounded. A started engine runs Maintain beside its other loops; a store
// without such upkeep does not implement it. Callers type-assert a Store to
// it.
type Maintainer interface {
	// Maintain does the store's upkeep until ctx ends. h tells it what it
	// needs to know about the engine it works for.
	Maintain(ctx context.Context, h MaintainHooks)
}

// MaintainHooks is what a store's upkeep needs from the engine it works
// for.
type MaintainHooks struct {
	// Owner is the engine's worker ID, which records of the upkeep name.
	Owner string
	// Now is the engine's clock, on which records of the upkeep are dated.
	Now func() time.Time
	// Idle reports whether no run is in flight in this engine, when upkeep
	// that holds writes back costs nothing.
	Idle func() bool
	// Log receives what the upkeep has to say.
	Log *slog.Logger
}

// StandbyReporter is implemented by stores whose server may be a streaming
// standby (the PostgreSQL adapter), which can say whether it is one and how
// far its replay stands, so that readers off a replica can show how old
// what they read is. Callers type-assert a Store to it; a store without it
// (a SQLite file) is never a standby.
type StandbyReporter interface {
	// StandbyStatus reads the server's replication state now.
	StandbyStatus(ctx context.Context) (flowtype.StandbyStatus, error)
}

// FileMaintainer is implemented by stores kept in one database file, which
// can report the file's size, checkpoint its write-ahead log, copy it
// consistently and check it. Callers type-assert a Store to it.
type FileMaintainer interface {
	// FileStats returns the sizes of the database file and its WAL.
	FileStats(ctx context.Context) (FileStats, error)
	// Checkpoint copies the WAL into the database file. It runs between
	// write transactions, never inside one (the SQLite adapter runs it on
	// its writer connection).
	Checkpoint(ctx context.Context, mode flowtype.CheckpointMode) (flowtype.CheckpointResult, error)
	// Backup writes a consistent copy of the database to dst, a path that
	// must not exist yet (errors.Is(err, fs.ErrExist) otherwise). The copy
	// is synced before Backup returns.
	Backup(ctx context.Context, dst string) error
	// IntegrityCheck checks the whole file and returns the problems found;
	// none means the file is sound.
	IntegrityCheck(ctx context.Context) ([]string, error)
	// CheckpointRecorded is Checkpoint on an operator's request: it is
	// recorded in the database under h.Owner, and counted in FileHealth,
	// like the checkpoints of the store's own upkeep.
	CheckpointRecorded(ctx context.Context, mode flowtype.CheckpointMode, h MaintainHooks) (flowtype.CheckpointResult, error)
	// FileHealth describes the file, its WAL, the checkpoints this store
	// ran and the last checkpoint recorded in the database, which another
	// process may have run.
	FileHealth(ctx context.Context) (flowtype.FileHealth, error)
}

// FileStats describes a database file.
type FileStats struct {
	Path     string // the database file
	DBBytes  int64  // size of the database file
	WALBytes int64  // size of its -wal file; 0 when there is none
}

// HistoryPartitioner is implemented by stores that can keep the history of
// runs in partitions of time (the PostgreSQL adapter, with
// pgstore.Options.HistoryPartitions), so that retention drops a partition
// whole where it would delete each event of each run: no dead rows are left
// for vacuum in the table and its indexes, and the cost of a drop does not
// grow with the rows it removes. Callers type-assert a Store to it.
//
// A partition goes only with every run that has history in it, in one
// transaction, so no run outlives part of its history; a partition that a
// run still kept has history in waits, and the cleaner's row deletes take
// its runs one by one once they are two spans past their retention
// (internal/engine/cleaner.go).
type HistoryPartitioner interface {
	// HistorySpan reads the time each partition covers; 0 when history is
	// not partitioned.
	HistorySpan(ctx context.Context) (time.Duration, error)
	// DropHistoryPartitions makes the partitions of the spans up to three
	// past p.Until, then drops up to p.Max of the old ones whose every run
	// can go, with those runs.
	DropHistoryPartitions(ctx context.Context, p HistoryDropParams) (HistoryDropResult, error)
	// HistoryPartitions lists the partitions, oldest first.
	HistoryPartitions(ctx context.Context) ([]HistoryPartition, error)
}

// HistoryDropParams says which runs DropHistoryPartitions may delete: the
// runs of each finished state that finished before its horizon (Unix ms;
// math.MinInt64 keeps that state's runs for good), and with WaitForFeed
// only those whose events the feed's slowest consumer read.
type HistoryDropParams struct {
	Until                                          int64 // Unix ms: partitions are made up to three spans past it
	CompletedBefore, FailedBefore, CancelledBefore int64
	WaitForFeed                                    bool
	Max                                            int // partitions dropped at most; positive
}

// HistoryDropResult is what DropHistoryPartitions did.
type HistoryDropResult struct {
	Made    int // partitions made ahead
	Dropped int // partitions dropped
	Runs    int // runs deleted with them
}

// HistoryPartition is one partition of the history.
type HistoryPartition struct {
	Name     string
	From, To int64 // Unix ms, To exclusive; From is math.MinInt64 for the history from before partitioning
	Bytes    int64 // rows and indexes on disk
}
