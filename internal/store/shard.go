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
