package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

// Debounce and throttle (store/debounce.go). PostgreSQL has no global write
// lock, so the transactions debouncing one key take turns on a
// transaction-level advisory lock of the key (DebounceLock), taken before
// the key's row is read: under READ COMMITTED every later statement of the
// transaction sees what the previous holder committed. The debounced run
// itself is locked by RunGetForUpdate (FOR NO KEY UPDATE, which a claim's
// FOR UPDATE SKIP LOCKED skips), and RunDebounceReplace is a guarded update
// besides.

// debounceLockID returns the advisory lock of a debounce key of a workflow
// in a schema (see DebounceLock in db/queries/postgres/debounce.sql).
func debounceLockID(schema, workflow, key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("flowlite\x00debounce\x00" + schema + "\x00" + workflow + "\x00" + key))
	return int64(h.Sum64())
}

func (t *tx) DebounceLock(ctx context.Context, workflow, key string) error {
	if err := t.q.DebounceLock(ctx, debounceLockID(t.s.schema, workflow, key)); err != nil {
		return fmt.Errorf("lock debounce key %q of %s: %w", key, workflow, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) DebounceGet(ctx context.Context, workflow, key string) (store.DebounceRecord, bool, error) {
	row, err := t.q.DebounceGet(ctx, pgdb.DebounceGetParams{Workflow: workflow, Key: key})
	if errors.Is(err, sql.ErrNoRows) {
		return store.DebounceRecord{}, false, nil
	}
	if err != nil {
		return store.DebounceRecord{}, false, fmt.Errorf("get debounce key %q of %s: %w", key, workflow, interpretError(ctx, err))
	}
	return store.DebounceRecord{RunID: row.RunID, FirstAt: row.FirstAt, MaxDelay: row.MaxDelay}, true, nil
}

func (t *tx) DebouncePut(ctx context.Context, p store.DebouncePutParams) error {
	err := t.q.DebouncePut(ctx, pgdb.DebouncePutParams{
		Workflow: p.Workflow, Key: p.Key, RunID: p.RunID, FirstAt: p.FirstAt, MaxDelay: p.MaxDelay,
	})
	if err != nil {
		return fmt.Errorf("put debounce key %q of %s for run %s: %w", p.Key, p.Workflow, p.RunID, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) RunDebounceReplace(ctx context.Context, p store.RunDebounceReplaceParams) (bool, error) {
	n, err := t.q.RunDebounceReplace(ctx, pgdb.RunDebounceReplaceParams{Input: p.Input, RunAt: p.RunAt, Now: p.Now, ID: p.ID})
	if err != nil {
		return false, fmt.Errorf("replace debounced run %s: %w", p.ID, interpretError(ctx, err))
	}
	return n == 1, nil
}
