package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

var _ store.Starter = (*Store)(nil)

// StartAlone starts a run without a unique key in one statement committed
// on its own (RunStartAlone): the run and its run_started event e, a
// round trip where a start in Write takes four. The ready wake of the run
// follows the commit, sent by the store's sender as after a Write
// (notify.go), and the change feed is told of the event.
func (s *Store) StartAlone(ctx context.Context, p store.RunInsertParams, e store.Event) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if s.closed.Load() {
		return false, flowtype.ErrClosed
	}
	if p.UniqueKey != "" {
		return false, fmt.Errorf("start run %s alone: it has unique key %q, which needs a start in Write", p.ID, p.UniqueKey)
	}
	if e.RunID != p.ID {
		return false, fmt.Errorf("start run %s alone: its event is of run %s", p.ID, e.RunID)
	}
	states, err := store.UniqueStatesMask(p)
	if err != nil {
		return false, err
	}
	var n int64
	err = s.alone(ctx, func(q *pgdb.Queries) error {
		n, err = q.RunStartAlone(ctx, pgdb.RunStartAloneParams{
			ID: p.ID, Workflow: p.Workflow.Name, Version: int64(p.Workflow.Version), Queue: p.Queue,
			Priority: int64(p.Priority), Input: nonNil(p.Input), RunAt: p.RunAt, Deadline: nullInt(p.Deadline),
			ParentID: nullString(p.ParentID), UniqueStates: states, CreatedAt: p.Now,
			At: e.At, Kind: e.Kind, Detail: e.Detail,
		})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("start run %s: %w", p.ID, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil
	}
	var wakes []wakeReq
	if !s.noWakes {
		wakes = []wakeReq{{kind: store.WakeReady, ids: []string{p.ID}}}
	}
	s.afterCommit(wakes, true)
	return true, nil
}
