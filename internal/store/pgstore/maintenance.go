package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

func (t *tx) RunDeleteFinished(ctx context.Context, p store.RunDeleteFinishedParams) (int, error) {
	if !p.Status.Finished() {
		return 0, fmt.Errorf("delete finished runs: %q is not a finished state", p.Status)
	}
	if p.Max <= 0 {
		return 0, fmt.Errorf("delete finished runs: max must be positive, got %d", p.Max)
	}
	n, err := t.q.RunDeleteFinished(ctx, pgdb.RunDeleteFinishedParams{
		FinishedBefore: p.FinishedBefore, Status: string(p.Status), MaxRuns: int64(p.Max),
		KeepAfter: keepAfter(p),
	})
	if err != nil {
		return 0, fmt.Errorf("delete %s runs: %w", p.Status, interpretError(ctx, err))
	}
	return int(n), nil
}

// pgstore implements no store.FileMaintainer: a PostgreSQL database is no
// file of the application's, and the server checkpoints its WAL, and is
// backed up and checked, by its own tools. Callers that type-assert a store
// to it fall back to flowtype.ErrNotSupported.

// keepAfter is the position after which the delete keeps runs' events.
func keepAfter(p store.RunDeleteFinishedParams) int64 {
	if !p.WaitForFeed {
		return store.NoFeedConsumer
	}
	return p.KeepAfter
}
