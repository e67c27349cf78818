package sqlitestore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

var _ store.FileMaintainer = (*Store)(nil)

func (t *tx) RunDeleteFinished(ctx context.Context, p store.RunDeleteFinishedParams) (int, error) {
	if !p.Status.Finished() {
		return 0, fmt.Errorf("delete finished runs: %q is not a finished state", p.Status)
	}
	if p.Max <= 0 {
		return 0, fmt.Errorf("delete finished runs: max must be positive, got %d", p.Max)
	}
	n, err := t.q.RunDeleteFinished(ctx, sqlitedb.RunDeleteFinishedParams{
		FinishedBefore: &p.FinishedBefore, Status: string(p.Status), MaxRuns: int64(p.Max),
		KeepAfter: keepAfter(p),
	})
	if err != nil {
		return 0, fmt.Errorf("delete %s runs: %w", p.Status, interpretError(err))
	}
	return int(n), nil
}

// keepAfter is the position after which the delete keeps runs' events.
func keepAfter(p store.RunDeleteFinishedParams) int64 {
	if !p.WaitForFeed {
		return store.NoFeedConsumer
	}
	return p.KeepAfter
}
