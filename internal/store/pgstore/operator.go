package pgstore

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

func (t *tx) RunDeleteOne(ctx context.Context, id string) (bool, error) {
	n, err := t.q.RunDeleteOne(ctx, id)
	if err != nil {
		return false, fmt.Errorf("delete run %s: %w", id, interpretError(ctx, err))
	}
	return n == 1, nil
}

func (t *tx) RunMakeDue(ctx context.Context, id string, now int64) (bool, error) {
	n, err := t.q.RunMakeDue(ctx, pgdb.RunMakeDueParams{Now: now, ID: id})
	if err != nil {
		return false, fmt.Errorf("make run %s due: %w", id, interpretError(ctx, err))
	}
	if n == 0 {
		return false, nil
	}
	if err := t.wakeRuns(ctx, store.WakeReady, id); err != nil {
		return false, fmt.Errorf("make run %s due: %w", id, err)
	}
	return true, nil
}

func (t *tx) StepSnooze(ctx context.Context, p store.StepSnoozeParams) error {
	n, err := t.q.StepSnooze(ctx, pgdb.StepSnoozeParams{
		Error: p.Detail, Now: p.Now, RunID: p.Key.RunID, Name: p.Key.Name, Occurrence: int64(p.Key.Occurrence),
	})
	return stepRows(ctx, "snooze step", p.Key, n, err)
}

// stateBit returns the bit of a run state in a unique-states mask (0 for
// an unknown state); the CASE expressions of runs_unique and of the queries
// on it use the same bits.
func stateBit(s store.RunStatus) int64 {
	switch s {
	case store.RunPending:
		return 1
	case store.RunRunning:
		return 2
	case store.RunWaiting:
		return 4
	case store.RunCompensating:
		return 8
	case store.RunSuspended:
		return 16
	case store.RunCompleted:
		return 32
	case store.RunFailed:
		return 64
	case store.RunCancelled:
		return 128
	}
	return 0
}

// unfinishedMask is the mask of the unfinished states, allMask of all.
const (
	unfinishedMask = 31
	allMask        = 255
)

// statesMask returns the mask of states, or def for none. An unknown state
// is an error.
func statesMask(states []store.RunStatus, def int64) (int64, error) {
	if len(states) == 0 {
		return def, nil
	}
	var mask int64
	for _, s := range states {
		bit := stateBit(s)
		if bit == 0 {
			return 0, fmt.Errorf("unknown run state %q", s)
		}
		mask |= bit
	}
	return mask, nil
}
