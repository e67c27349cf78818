package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Unique runs. A run started with a unique key is unique among the runs of
// its workflow: while a run of the workflow holds the key, starting another
// returns that run, as starting an existing run ID does. A run holds its
// key while it is unfinished (pending, running, waiting, compensating or
// suspended) and, once finished, while its state is one of its unique
// states (StartParams.UniqueStates), if any. With a unique period, a
// finished run holds its key only for that long after it was started: in
// the finished states of its unique states, or in any state when it has
// none. These rules are enforced by the database (a partial unique index
// and a table of holds), inside the insert, so that two processes starting
// the same key at once start one run.

// uniqueHolder returns the run that holds a unique key at now: the run
// holding it for good, else the run whose hold is current.
func uniqueHolder(ctx context.Context, tx store.Tx, workflow, key string, now int64) (store.Run, error) {
	run, err := tx.RunGetKeyHolder(ctx, workflow, key)
	if !errors.Is(err, flowtype.ErrRunNotFound) {
		return run, err
	}
	id, err := tx.UniqueHoldGet(ctx, workflow, key, now)
	if err != nil {
		return store.Run{}, err
	}
	return tx.RunGet(ctx, id)
}

// insertStates returns the states in which a run holds its unique key for
// good, which the insert records: its unique states, but with a unique
// period only the unfinished ones (the hold covers the finished ones).
func insertStates(p *StartParams) []flowtype.RunStatus {
	if p.UniquePeriod > 0 {
		return nil
	}
	return p.UniqueStates
}

// holdUniqueKey makes a run just inserted hold its unique key for period,
// in its unique states (any state when it has none).
func holdUniqueKey(ctx context.Context, tx store.Tx, p *StartParams, now int64) error {
	if p.UniquePeriod <= 0 {
		return nil
	}
	held, err := tx.UniqueHoldTake(ctx, store.UniqueHoldParams{
		Workflow: p.Workflow.Name, Key: p.UniqueKey, RunID: p.ID,
		HeldUntil: now + p.UniquePeriod.Milliseconds(), States: p.UniqueStates, Now: now,
	})
	if err != nil {
		return err
	}
	if !held {
		// The insert checked the hold in the same transaction, so only a
		// store that does not serialize writers could get here.
		return fmt.Errorf("start run %s: %w: unique key %q was taken meanwhile; try again", p.ID, flowtype.ErrConflict, p.UniqueKey)
	}
	return nil
}

func validUnique(p *StartParams) error {
	switch {
	case p.UniquePeriod < 0:
		return fmt.Errorf("start %s: negative unique period %s", p.Workflow, p.UniquePeriod)
	case p.UniquePeriod > 0 && p.UniqueKey == "":
		return fmt.Errorf("start %s: a unique period needs a unique key", p.Workflow)
	case len(p.UniqueStates) > 0 && p.UniqueKey == "":
		return fmt.Errorf("start %s: unique states need a unique key", p.Workflow)
	case p.OnDuplicate != flowtype.ReturnExisting && p.OnDuplicate != flowtype.RefuseDuplicate:
		return fmt.Errorf("start %s: unknown duplicate policy %d", p.Workflow, int(p.OnDuplicate))
	case p.OnDuplicate == flowtype.RefuseDuplicate && p.UniqueKey == "":
		return fmt.Errorf("start %s: refusing duplicates needs a unique key (a run ID that exists always returns its run)", p.Workflow)
	}
	return ValidUniqueStates(p.UniqueStates)
}

// ValidUniqueStates checks a set of unique states: nil, or known states
// that include every unfinished one (a run always holds its key while
// unfinished, so that it never enters a holding state, which could give the
// key two holders). The error names the unknown or missing states.
func ValidUniqueStates(states []flowtype.RunStatus) error {
	if len(states) == 0 {
		return nil
	}
	var unknown []string
	for _, s := range states {
		if !slices.Contains(store.AllStates(), s) {
			unknown = append(unknown, strconv.Quote(string(s)))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("unknown run state(s) %s in unique states: want some of %s", strings.Join(unknown, ", "), joinStates(store.AllStates()))
	}
	var missing []flowtype.RunStatus
	for _, s := range store.UnfinishedStates() {
		if !slices.Contains(states, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("unique states lack %s: a run always holds its unique key while unfinished (%s)", joinStates(missing), joinStates(store.UnfinishedStates()))
	}
	return nil
}

func joinStates(states []flowtype.RunStatus) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}
