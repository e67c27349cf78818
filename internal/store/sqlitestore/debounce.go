package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

// Debounce and throttle (store/debounce.go). The writer's transactions take
// turns, so a key's row read in a transaction holds until it commits, and
// DebounceLock has nothing to do.

func (t *tx) DebounceLock(context.Context, string, string) error { return nil }

func (t *tx) DebounceGet(ctx context.Context, workflow, key string) (store.DebounceRecord, bool, error) {
	row, err := t.q.DebounceGet(ctx, sqlitedb.DebounceGetParams{Workflow: workflow, Key: key})
	if errors.Is(err, sql.ErrNoRows) {
		return store.DebounceRecord{}, false, nil
	}
	if err != nil {
		return store.DebounceRecord{}, false, fmt.Errorf("get debounce key %q of %s: %w", key, workflow, interpretError(err))
	}
	return store.DebounceRecord{RunID: row.RunID, FirstAt: row.FirstAt, MaxDelay: row.MaxDelay}, true, nil
}

func (t *tx) DebouncePut(ctx context.Context, p store.DebouncePutParams) error {
	err := t.q.DebouncePut(ctx, sqlitedb.DebouncePutParams{
		Workflow: p.Workflow, Key: p.Key, RunID: p.RunID, FirstAt: p.FirstAt, MaxDelay: p.MaxDelay,
	})
	if err != nil {
		return fmt.Errorf("put debounce key %q of %s for run %s: %w", p.Key, p.Workflow, p.RunID, interpretError(err))
	}
	return nil
}

func (t *tx) RunDebounceReplace(ctx context.Context, p store.RunDebounceReplaceParams) (bool, error) {
	n, err := t.q.RunDebounceReplace(ctx, sqlitedb.RunDebounceReplaceParams{Input: p.Input, RunAt: p.RunAt, Now: p.Now, ID: p.ID})
	if err != nil {
		return false, fmt.Errorf("replace debounced run %s: %w", p.ID, interpretError(err))
	}
	return n == 1, nil
}
