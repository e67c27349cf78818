package store

import "context"

// Debounce and throttle of starts (issue 21). A debounce key of a workflow
// names at most one debounced run at a time: the row DebouncePut writes,
// one per (workflow, key) by its primary key. While that run is pending
// and was never claimed (Fence 0, no lease, no cancellation requested), a
// start with the key changes it (RunDebounceReplace) or is dropped; once
// it was claimed, cancelled or deleted, the next start inserts a new run
// and takes the key's row over.
//
// A debounced start happens in Write: DebounceLock, then DebounceGet, then
// RunGetForUpdate of the run it names, then RunDebounceReplace or
// RunInsert and DebouncePut. On a database whose writers take turns
// (SQLite) nothing else debounces the key in between. On one without a
// global write lock (PostgreSQL) DebounceLock must serialize the
// transactions that debounce one key until they commit, and each later
// read of the transaction must see what the previous holder committed, so
// that two processes debouncing one key end with one pending run.

// DebounceRecord is the run a debounce key last debounced into.
type DebounceRecord struct {
	RunID    string
	FirstAt  int64 // the run's first debounced start
	MaxDelay int64 // ms after FirstAt the run's due time never passes; 0: no bound
}

// DebouncePutParams makes RunID the debounced run of a key of a workflow.
type DebouncePutParams struct {
	Workflow string
	Key      string
	DebounceRecord
}

// RunDebounceReplaceParams is the new input and due time of a debounced
// run.
type RunDebounceReplaceParams struct {
	ID    string
	Input []byte
	RunAt int64
	Now   int64
}

// DebounceTx debounces starts inside a write transaction.
type DebounceTx interface {
	// DebounceLock makes the transactions that debounce key of workflow
	// take turns until they commit (a no-op under a global write lock).
	DebounceLock(ctx context.Context, workflow, key string) error
	// DebounceGet returns the key's record, or false when it has none.
	DebounceGet(ctx context.Context, workflow, key string) (DebounceRecord, bool, error)
	// DebouncePut records or replaces the key's record.
	DebouncePut(ctx context.Context, p DebouncePutParams) error
	// RunDebounceReplace sets the input and due time of run p.ID if it is
	// pending, unleased, never claimed (fence 0) and not asked to cancel,
	// in one guarded statement, and reports whether it did.
	RunDebounceReplace(ctx context.Context, p RunDebounceReplaceParams) (bool, error)
}
