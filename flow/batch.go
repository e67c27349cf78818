package flow

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
)

// ItemError reports the item of a batch (EnqueueMany, StartMany and their
// Tx forms) that made the whole batch fail, by its index in the caller's
// slice; nothing of the batch was recorded. See [flowtype.ItemError].
type ItemError = flowtype.ItemError

// EnqueueItem is one run of a job in a batch: its arguments and its
// options (nil: the defaults), as Enqueue takes them.
type EnqueueItem[Args any] struct {
	Args Args
	Opts *EnqueueOptions
}

// StartItem is one run of a workflow in a batch: its input and its
// options (nil: the defaults), as Start takes them.
type StartItem[In any] struct {
	In   In
	Opts *StartOptions
}

// EnqueueMany records a run of job for each item, in one transaction and
// a few multi-row statements, and returns a handle on each, in the order
// of items. It is Enqueue for many runs at once, and much cheaper per run:
// use it to load a backlog, or wherever runs are made in groups.
//
// Each item is enqueued as Enqueue would enqueue it, in order. An item
// whose RunID or unique key is taken, by a recorded run or by an earlier
// item of the same call, records nothing and gets a handle on the run that
// holds it (Existing reports true), while the other items are recorded:
// when item 7 of 100 collides with a unique key, 99 runs are recorded and
// handle 7 is the holder's. An item that cannot be enqueued (a bad option,
// a payload over Config.MaxPayloadBytes, two items with one RunID, a RunID
// taken by a run of another workflow) fails the whole call with an
// *ItemError naming its index, and records nothing. An empty items records
// nothing and returns no handles.
//
// The runs are durable when EnqueueMany returns; the engine's claimers
// are woken then. Unlike Enqueue, the call never begins a run itself.
//
// A call is one transaction, and on SQLite every other write (heartbeats,
// checkpoints, other processes' claims) waits while it writes, at some
// tens of thousands of runs a second: load a large backlog in calls of a
// few thousand items rather than in one.
func EnqueueMany[Args any](ctx context.Context, e *Engine, job Job[Args], items []EnqueueItem[Args]) ([]*Run[struct{}], error) {
	ps, err := enqueueManyParams(e, job, items)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	sts, at, err := startRuns(ctx, e, ps)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d runs of job %s: %w", len(ps), job.Name, err)
	}
	return handles[struct{}](at, sts), nil
}

// EnqueueManyTx is EnqueueMany inside the caller's transaction on the
// engine's database: the runs exist only if tx commits, and unique keys
// are checked within tx. Workers see the runs at their next poll after the
// commit, or at the commit on a backend that sends wakes (PostgreSQL).
// Items are checked before anything is written, but an error found while
// writing (a RunID taken by another workflow's run, a database error) may
// leave part of the batch written in tx: roll tx back when it returns an
// error.
func EnqueueManyTx[Args any](ctx context.Context, e *Engine, tx *sql.Tx, job Job[Args], items []EnqueueItem[Args]) ([]*Run[struct{}], error) {
	ps, err := enqueueManyParams(e, job, items)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	inner, err := e.route.forTxBatch(ps)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d runs of job %s in the caller's transaction: %w", len(ps), job.Name, err)
	}
	sts, err := inner.core.StartRunsTx(ctx, tx, ps)
	if err != nil {
		return nil, fmt.Errorf("enqueue %d runs of job %s: %w", len(ps), job.Name, err)
	}
	return handles[struct{}](same(inner, len(sts)), sts), nil
}

// StartMany records a run of wf for each item, in one transaction and a
// few multi-row statements, and returns a handle on each, in the order of
// items. Items are started as Start would start them, in order; taken IDs
// and failures are handled as EnqueueMany handles them.
func StartMany[In, Out any](ctx context.Context, e *Engine, wf Workflow[In, Out], items []StartItem[In]) ([]*Run[Out], error) {
	ps, err := startManyParams(e, wf, items)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	sts, at, err := startRuns(ctx, e, ps)
	if err != nil {
		return nil, fmt.Errorf("start %d runs of %s: %w", len(ps), workflowKey(wf.Name, wf.version()), err)
	}
	return handles[Out](at, sts), nil
}

// StartManyTx is StartMany inside the caller's transaction, as
// EnqueueManyTx is EnqueueMany.
func StartManyTx[In, Out any](ctx context.Context, e *Engine, tx *sql.Tx, wf Workflow[In, Out], items []StartItem[In]) ([]*Run[Out], error) {
	ps, err := startManyParams(e, wf, items)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	inner, err := e.route.forTxBatch(ps)
	if err != nil {
		return nil, fmt.Errorf("start %d runs of %s in the caller's transaction: %w", len(ps), workflowKey(wf.Name, wf.version()), err)
	}
	sts, err := inner.core.StartRunsTx(ctx, tx, ps)
	if err != nil {
		return nil, fmt.Errorf("start %d runs of %s: %w", len(ps), workflowKey(wf.Name, wf.version()), err)
	}
	return handles[Out](same(inner, len(sts)), sts), nil
}

// same returns n times e.
func same(e *Engine, n int) []*Engine {
	at := make([]*Engine, n)
	for i := range at {
		at[i] = e
	}
	return at
}

func enqueueManyParams[Args any](e *Engine, job Job[Args], items []EnqueueItem[Args]) ([]engine.StartParams, error) {
	ps := make([]engine.StartParams, len(items))
	for i, it := range items {
		p, err := enqueueParams(e, job, it.Args, it.Opts)
		if err != nil {
			return nil, fmt.Errorf("enqueue %d runs of job %s: %w", len(items), job.Name, &ItemError{Index: i, RunID: runIDOf(it.Opts), Err: err})
		}
		ps[i] = p
	}
	return ps, nil
}

func startManyParams[In, Out any](e *Engine, wf Workflow[In, Out], items []StartItem[In]) ([]engine.StartParams, error) {
	ps := make([]engine.StartParams, len(items))
	for i, it := range items {
		p, err := startParams(e, wf, it.In, it.Opts)
		if err != nil {
			var id string
			if it.Opts != nil {
				id = it.Opts.RunID
			}
			return nil, fmt.Errorf("start %d runs of %s: %w", len(items), workflowKey(wf.Name, wf.version()), &ItemError{Index: i, RunID: id, Err: err})
		}
		ps[i] = p
	}
	return ps, nil
}

func runIDOf(opts *EnqueueOptions) string {
	if opts == nil {
		return ""
	}
	return opts.RunID
}

// handles returns a handle on each run, on the engine at[i] that holds it.
func handles[Out any](at []*Engine, sts []engine.Started) []*Run[Out] {
	runs := make([]*Run[Out], len(sts))
	for i, st := range sts {
		runs[i] = &Run[Out]{e: at[i], id: st.Run.ID, existing: st.Existing}
	}
	return runs
}

// startRuns records a batch, and returns what each item started and the
// engine that holds it. On a sharded engine the batch is split by shard
// and each shard's part is one transaction, written at once with the
// others' (each file has its own writer); an error in one part leaves the
// parts of the other shards recorded.
func startRuns(ctx context.Context, e *Engine, ps []engine.StartParams) ([]engine.Started, []*Engine, error) {
	at, parts, err := e.route.splitStarts(ctx, ps)
	if err != nil {
		return nil, nil, err
	}
	sts := make([]engine.Started, len(ps))
	_, err = each(ctx, e, func(ctx context.Context, inner *Engine) (struct{}, error) {
		idx := parts[inner]
		if len(idx) == 0 {
			return struct{}{}, nil
		}
		got, err := inner.core.StartRuns(ctx, partOf(ps, idx))
		if err != nil {
			var ie *ItemError
			if errors.As(err, &ie) && ie.Index >= 0 && ie.Index < len(idx) {
				ie.Index = idx[ie.Index] // the caller's index, not the part's
			}
			return struct{}{}, err
		}
		for j, i := range idx {
			sts[i] = got[j]
		}
		return struct{}{}, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return sts, at, nil
}

// partOf returns the items idx of ps, in that order: ps itself when idx
// holds every item, as it does on a plain engine.
func partOf(ps []engine.StartParams, idx []int) []engine.StartParams {
	if len(idx) == len(ps) {
		return ps
	}
	part := make([]engine.StartParams, len(idx))
	for j, i := range idx {
		part[j] = ps[i]
	}
	return part
}
