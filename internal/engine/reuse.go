package engine

import (
	"context"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Run ID reuse. A run ID names one run: by default (flowtype.ReuseNever)
// a start of a taken ID returns its run, or, for a child, fails. Under
// ReuseFinished or ReuseFailed a start may take the ID of a finished run
// its policy allows: in the start's transaction the holder is deleted
// with its steps, events, signals and holds, as DeleteRun deletes a run,
// and the new run inserted under the ID, whose run_started event says
// whose ID it took. A holder that is the child of another, unfinished run
// is kept (that parent may still read its outcome), as is one the policy
// does not allow; the start then goes on as under ReuseNever.

// validReuse checks p's ID reuse policy.
func validReuse(p *StartParams) error {
	switch p.IDReuse {
	case flowtype.ReuseNever, flowtype.ReuseFinished, flowtype.ReuseFailed:
		return nil
	}
	return fmt.Errorf("start %s: unknown run ID reuse policy %d", p.Workflow, int(p.IDReuse))
}

// reuseID deletes holder, the run holding p's ID, when p's policy lets p
// take the ID, and inserts row in its place. It reports whether it did;
// when it reports false nothing changed. started is the new run's
// run_started event, which it amends to name the run it replaced.
func reuseID(ctx context.Context, tx store.Tx, p *StartParams, holder store.Run, row store.RunInsertParams, started *store.Event) (bool, error) {
	if holder.ID != p.ID || !p.IDReuse.Allows(holder.Status) {
		return false, nil
	}
	deleted, err := tx.RunDeleteForReuse(ctx, p.ID, p.ParentID, p.IDReuse == flowtype.ReuseFinished)
	if err != nil || !deleted {
		return false, err
	}
	inserted, err := tx.RunInsert(ctx, row)
	if err != nil {
		return false, fmt.Errorf("start run %s: %w", p.ID, err)
	}
	if !inserted {
		// Only a unique key another run holds can refuse the insert now;
		// the caller's error rolls the deletion back.
		return false, fmt.Errorf("start run %s: %w: its ID is free to reuse, but unique key %q is held by another run", p.ID, store.ErrConflict, p.UniqueKey)
	}
	started.Detail += fmt.Sprintf(", reusing the ID of a %s run of %s version %d (deleted)", holder.Status, holder.Workflow, holder.Version)
	return true, nil
}
