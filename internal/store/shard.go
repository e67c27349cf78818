package store

import "context"

// ShardRecord is a database's place in a shard set: the SetID shared by
// every file of the set, and this file's Index among Count files.
type ShardRecord struct {
	SetID     string
	Index     int
	Count     int
	CreatedAt int64 // unix milliseconds
}

// Sharder is the optional interface of stores that can belong to a shard
// set (the SQLite adapter): they record their place in it, so that a set
// opened with a file missing, added or out of order is refused.
type Sharder interface {
	// ShardGet returns the store's record, and false when the store
	// belongs to no set.
	ShardGet(ctx context.Context) (ShardRecord, bool, error)
	// ShardPut records the store's place in a set, replacing the record
	// of a set whose creation did not finish.
	ShardPut(ctx context.Context, rec ShardRecord) error
}

// SetLocker is the optional interface of a store that can lock, across
// every process, something of the shard set it is shard 0 of: the claims
// of a queue whose global limits count across the set take turns on it
// (engine.SetLimits). A lock a process held is given back when the process
// ends, however it ends.
type SetLocker interface {
	// LockSet waits until this caller holds the lock named name, or ctx
	// ends; unlock gives it back.
	LockSet(ctx context.Context, name string) (unlock func(), err error)
}
