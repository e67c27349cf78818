package engine

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// StartRuns records the pending runs of ps in one write transaction, with
// a few multi-row statements instead of several statements per run, and
// wakes their queues once it committed. Each item is started as StartRun
// would start it alone, in the order of ps: an ID or a unique key that is
// taken, by a recorded run or by an earlier item of ps, makes the item's
// Started the run holding it, with Existing set, and records nothing for
// that item; the other items are recorded. An item that cannot be started
// (an unregistered workflow, bad unique options, two items with one run
// ID, an ID taken by a run of another workflow) fails the whole batch with
// an *ItemError naming it, and nothing is recorded.
//
// Unlike StartRun, it claims nothing in its transaction: the queues' claim
// loops, woken after the commit, take the runs in their order.
func (e *Engine) StartRuns(ctx context.Context, ps []StartParams) ([]Started, error) {
	for i := range ps {
		setValues(ctx, &ps[i])
	}
	if err := e.prepareBatch(ps); err != nil {
		return nil, err
	}
	var out []Started
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		out, err = e.insertRuns(ctx, tx, ps)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.startedBatch(out)
	return out, nil
}

// StartRunsTx is StartRuns in the caller's transaction: the runs exist only
// if that transaction commits. Workers see them at their next poll, or as
// the transaction commits when the store sends wakes (store.Notifier).
func (e *Engine) StartRunsTx(ctx context.Context, sqlTx *sql.Tx, ps []StartParams) ([]Started, error) {
	for i := range ps {
		setValues(ctx, &ps[i])
	}
	if err := e.prepareBatch(ps); err != nil {
		return nil, err
	}
	var out []Started
	err := e.store.WriteInTx(ctx, sqlTx, func(tx store.Tx) error {
		var err error
		out, err = e.insertRuns(ctx, tx, ps)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, st := range out {
		if !st.Existing {
			e.metrics.runStarted()
		}
	}
	return out, nil
}

// prepareBatch checks every item of a batch and fills in its defaults
// before anything is written, so that a bad item changes nothing.
func (e *Engine) prepareBatch(ps []StartParams) error {
	ids := make(map[string]int, len(ps))
	for i := range ps {
		p := &ps[i]
		if p.Debounce != nil {
			return &flowtype.ItemError{Index: i, RunID: p.ID, Err: errDebounceHere(p, "in a batch")}
		}
		if err := e.prepareStart(p); err != nil {
			return &flowtype.ItemError{Index: i, RunID: p.ID, Err: err}
		}
		if j, dup := ids[p.ID]; dup {
			return &flowtype.ItemError{Index: i, RunID: p.ID, Err: fmt.Errorf("run ID %s is item %d's too", p.ID, j)}
		}
		ids[p.ID] = i
	}
	return nil
}

// insertRuns records the runs of a prepared batch in tx: one RunInsertMany
// for the runs, one EventAppendMany for their run_started events, and
// statements of their own only for the items that were not inserted (to
// find the run that holds their ID or key) and for unique holds with a
// period.
func (e *Engine) insertRuns(ctx context.Context, tx store.Tx, ps []StartParams) ([]Started, error) {
	now := e.nowMs()
	rows := make([]store.RunInsertParams, len(ps))
	for i := range ps {
		rows[i] = insertParams(&ps[i], now)
	}
	inserted, err := tx.RunInsertMany(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("start %d runs: %w", len(ps), err)
	}
	out := make([]Started, len(ps))
	events := make([]store.Event, 0, len(ps))
	for i := range ps {
		p := &ps[i]
		started := startedEvent(p, now)
		if !inserted[i] {
			row := rows[i]
			run, again, err := existingOrAgain(ctx, tx, p, now, func() (bool, error) {
				inserted, err := tx.RunInsertMany(ctx, []store.RunInsertParams{row})
				return err == nil && inserted[0], err
			})
			if err != nil {
				return nil, &flowtype.ItemError{Index: i, RunID: p.ID, Err: err}
			}
			if !again {
				reused, err := reuseID(ctx, tx, p, run, rows[i], &started)
				if err != nil {
					return nil, &flowtype.ItemError{Index: i, RunID: p.ID, Err: err}
				}
				if !reused {
					out[i] = Started{Run: run, Existing: true}
					continue
				}
			}
		}
		if err := holdUniqueKey(ctx, tx, p, now); err != nil {
			return nil, &flowtype.ItemError{Index: i, RunID: p.ID, Err: err}
		}
		events = append(events, started)
		out[i] = Started{Run: insertedRun(rows[i])}
	}
	if err := tx.EventAppendMany(ctx, events); err != nil {
		return nil, fmt.Errorf("start %d runs: %w", len(ps), err)
	}
	return out, nil
}

// startedBatch counts the runs a committed batch recorded and wakes their
// queues: once per queue for the runs due now, and at the due time for a
// run delayed by less than a poll (a later one is found by a poll).
func (e *Engine) startedBatch(out []Started) {
	now := e.nowMs()
	woken := make(map[string]bool)
	for _, st := range out {
		if st.Existing {
			continue
		}
		e.metrics.runStarted()
		delay := time.Duration(st.Run.RunAt-now) * time.Millisecond
		switch {
		case delay <= 0:
			if !woken[st.Run.Queue] {
				woken[st.Run.Queue] = true
				e.Wake(st.Run.Queue)
			}
		case delay <= e.cfg.PollInterval:
			e.wakeAfter(st.Run.Queue, delay)
		}
	}
}
