package flow

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/codec"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// StartOptions tune one run. A nil *StartOptions means the defaults.
type StartOptions struct {
	// RunID identifies the run and is its idempotency key: starting an ID
	// that exists returns the existing run and records nothing. Default: a
	// random ID.
	RunID string
	// Queue the run waits in; default DefaultQueue.
	Queue string
	// Priority orders ready runs of a queue, higher first; default 0.
	Priority int
	// Delay postpones the run's first execution.
	Delay time.Duration
	// RunAt sets the run's first execution time; it excludes Delay.
	RunAt time.Time
	// Deadline, when set, cancels the run once the engine clock passes it:
	// running steps see ErrDeadlineExceeded through their context, completed
	// steps are compensated, and the run ends cancelled.
	Deadline time.Time
	// Timeout, when set, bounds how long the run may take counted from its
	// first claim (when a worker first dequeues it), not from Start: a run
	// that waits in its queue longer than Timeout still gets all of it
	// (DBOS's WithTimeout on queues). The first claim sets the run's
	// deadline to its time plus Timeout, or keeps Deadline if that is
	// earlier; from then on it is the run's deadline, with Deadline's
	// effects, and RunInfo.Deadline shows it. Its children inherit it, as
	// they inherit a deadline. A run rescued after a crash keeps the
	// deadline of its first claim. At least a millisecond.
	Timeout time.Duration
	// IDReuse says what a start does when RunID names a finished run.
	// ReuseNever (the default) returns that run: the ID is the start's
	// idempotency key. ReuseFinished deletes a completed, failed or
	// cancelled holder (its steps, history and signals with it, as
	// DeleteRun would) and starts a new run under the ID; ReuseFailed does
	// so for a failed or cancelled holder only, and returns a completed
	// one. An unfinished holder, a holder of another workflow, and a child
	// of another unfinished run (which may still read its outcome) are
	// never replaced. So a retried Start of a run that finished meanwhile
	// starts it again under ReuseFinished: use it for IDs that name a
	// recurring piece of work, not for retries.
	IDReuse IDReusePolicy

	// ConcurrencyKey groups the run with the others of its queue that share
	// it (a customer, a tenant) for the queue's per-key limits and fair
	// claims (see QueueLimits and Engine.SetQueueLimits): at most
	// KeyConcurrency runs with one key execute at once, and a key with a
	// huge backlog takes its turn like the others. Empty: none. At most 256
	// bytes.
	ConcurrencyKey string

	// UniqueKey deduplicates starts of the workflow (DBOS's deduplication
	// ID): while a run of the workflow (any version) holds the key, a start
	// with the same key records nothing and, by OnDuplicate, returns that
	// run or fails with a *DuplicateError. Which runs hold a key, and for
	// how long, is the rule of unique jobs (see EnqueueOptions): every
	// unfinished run, plus finished ones in UniqueStates, bounded by
	// UniquePeriod. The database enforces it inside the insert, as for
	// jobs, so two processes starting one key at once start one run.
	UniqueKey string
	// UniqueStates are the states in which a run holds UniqueKey; see
	// EnqueueOptions.UniqueStates. It needs UniqueKey.
	UniqueStates []RunStatus
	// UniquePeriod bounds how long after its start a finished run holds
	// UniqueKey; see EnqueueOptions.UniquePeriod. It needs UniqueKey.
	UniquePeriod time.Duration
	// OnDuplicate says what a start whose UniqueKey another run holds
	// does: ReturnExisting (the zero value) returns a handle on the holder,
	// RefuseDuplicate fails with a *DuplicateError naming it. A RunID that
	// exists is the same start tried again, and returns its run under
	// either policy: give a RunID when a start may be retried (after
	// ErrUnavailable, say), or a retry of a start that did record its run
	// is refused as its own duplicate. RefuseDuplicate needs UniqueKey.
	OnDuplicate DuplicatePolicy

	// Debounce, when set, merges the start into the workflow's pending run
	// with the same debounce key, if there is one, replacing its input and
	// moving its due time or dropping the start (see Debounce); Existing
	// then reports true. It excludes RunID, Delay, RunAt, IDReuse and
	// UniqueKey, and StartTx and StartMany refuse it.
	Debounce *Debounce
}

// Run is a handle on a run of a workflow whose output type is Out.
type Run[Out any] struct {
	e        *Engine
	id       string
	existing bool
}

// ID returns the run ID.
func (r *Run[Out]) ID() string { return r.id }

// Existing reports whether Start or Enqueue found the run already recorded,
// under its ID or (for a unique job) its unique key, instead of creating it.
func (r *Run[Out]) Existing() bool { return r.existing }

// Result waits until the run settles and returns its output. The error is a
// *RolledBackError when the workflow failed and was compensated, a
// *SuspendedError when the run waits for an operator, a *CancelledError when
// it was cancelled, or ctx's error.
func (r *Run[Out]) Result(ctx context.Context) (Out, error) {
	var zero Out
	run, err := r.e.core.Wait(ctx, r.id)
	if err != nil {
		return zero, fmt.Errorf("wait for run %s: %w", r.id, err)
	}
	switch run.Status {
	case flowtype.StatusCompleted:
		out, err := codec.Decode[Out](run.Output)
		if err != nil {
			return zero, &DecodeError{RunID: r.id, What: "output", Type: codec.TypeName[Out](), Err: err}
		}
		return out, nil
	case flowtype.StatusFailed:
		return zero, r.e.core.RolledBack(ctx, run)
	case flowtype.StatusCancelled:
		return zero, &CancelledError{RunID: r.id, Reason: engine.CancelReason(run)}
	default:
		return zero, &SuspendedError{RunID: r.id, Reason: run.Reason}
	}
}

// Cancel requests cancellation of the run; see Engine.Cancel.
func (r *Run[Out]) Cancel(ctx context.Context) error { return r.e.Cancel(ctx, r.id) }

// Start records a run of wf with input in and returns a handle on it. The
// run is durable when Start returns; an engine working its queue begins it
// at once (in this process) or within its poll interval (in another).
func Start[In, Out any](ctx context.Context, e *Engine, wf Workflow[In, Out], in In, opts *StartOptions) (*Run[Out], error) {
	p, err := startParams(e, wf, in, opts)
	if err != nil {
		return nil, err
	}
	inner, err := e.route.forNewRun(ctx, &p)
	if err != nil {
		return nil, err
	}
	st, err := inner.core.StartRun(ctx, p)
	if err != nil {
		return nil, err
	}
	return &Run[Out]{e: inner, id: st.Run.ID, existing: st.Existing}, nil
}

// StartTx records a run inside the caller's transaction on the engine's
// database: the run exists only if tx commits. Workers see it at their next
// poll after the commit.
//
// A transaction belongs to one file: on a sharded engine, call StartTx on
// the shard's engine, Engine.Shard(Engine.PlaceRun(id, "")), with tx on
// that shard's database; the sharded engine itself refuses with
// ErrSharded, and a shard refuses a run placed in another shard with
// ErrShardSet.
func StartTx[In, Out any](ctx context.Context, e *Engine, tx *sql.Tx, wf Workflow[In, Out], in In, opts *StartOptions) (*Run[Out], error) {
	p, err := startParams(e, wf, in, opts)
	if err != nil {
		return nil, err
	}
	inner, err := e.route.forTx("start "+p.Workflow.Name+" in the caller's transaction", &p)
	if err != nil {
		return nil, err
	}
	st, err := inner.core.StartRunTx(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	return &Run[Out]{e: inner, id: st.Run.ID, existing: st.Existing}, nil
}

func startParams[In, Out any](e *Engine, wf Workflow[In, Out], in In, opts *StartOptions) (engine.StartParams, error) {
	if opts == nil {
		opts = &StartOptions{}
	}
	key := workflowKey(wf.Name, wf.version())
	switch {
	case opts.Delay < 0:
		return engine.StartParams{}, fmt.Errorf("start %s: negative delay %s", key, opts.Delay)
	case opts.Delay > 0 && !opts.RunAt.IsZero():
		return engine.StartParams{}, fmt.Errorf("start %s: set Delay or RunAt, not both", key)
	case opts.Debounce != nil && opts.RunID != "":
		return engine.StartParams{}, fmt.Errorf("start %s: a debounce excludes RunID (a debounced start's run is the key's pending run)", key)
	}
	if opts.Queue != "" {
		if err := engine.CheckName("queue", opts.Queue); err != nil {
			return engine.StartParams{}, fmt.Errorf("start %s: %w", key, err)
		}
	}
	var debounceKey string
	if opts.Debounce != nil {
		debounceKey = opts.Debounce.Key // an empty one is refused with its own error
	}
	if err := checkKeys("run ID", opts.RunID, "unique key", opts.UniqueKey,
		"concurrency key", opts.ConcurrencyKey, "debounce key", debounceKey); err != nil {
		return engine.StartParams{}, fmt.Errorf("start %s: %w", key, err)
	}
	input, err := codec.Encode(in)
	if err != nil {
		return engine.StartParams{}, fmt.Errorf("start %s: %w", key, err)
	}
	if err := e.core.CheckPayload("input", input); err != nil {
		return engine.StartParams{}, fmt.Errorf("start %s: %w", key, err)
	}
	// Start, StartTx, Enqueue and EnqueueTx all pass here: a run in a queue
	// this engine does not work is the README's classic silent hang, so
	// say so in the log, once per queue.
	e.core.WarnIfUnworked(cmp.Or(opts.Queue, DefaultQueue))
	runAt := opts.RunAt
	if opts.Delay > 0 {
		runAt = e.core.Config().Clock.Now().Add(opts.Delay)
	}
	return engine.StartParams{
		ID: opts.RunID, Workflow: key, Queue: opts.Queue, Priority: opts.Priority, Input: input, RunAt: runAt,
		Deadline: opts.Deadline, UniqueKey: opts.UniqueKey, UniqueStates: slices.Clone(opts.UniqueStates),
		UniquePeriod: opts.UniquePeriod, OnDuplicate: opts.OnDuplicate, Timeout: opts.Timeout,
		IDReuse: opts.IDReuse, ConcurrencyKey: opts.ConcurrencyKey, Debounce: cloneDebounce(opts.Debounce),
	}, nil
}

// Lookup returns a handle on the existing run runID of wf, or
// ErrRunNotFound, or an error when the run belongs to another workflow or
// another version of it (whose output type may differ).
func Lookup[In, Out any](ctx context.Context, e *Engine, wf Workflow[In, Out], runID string) (*Run[Out], error) {
	type found struct {
		run   store.Run
		inner *Engine
	}
	f, err := byRun(e, runID, func(inner *Engine) (found, error) {
		run, err := inner.store.Reader().RunGet(ctx, runID)
		return found{run, inner}, err
	})
	if err != nil {
		return nil, err
	}
	if run := f.run; run.Workflow != wf.Name || run.Version != wf.version() {
		return nil, fmt.Errorf("run %s is a run of %s version %d, not of %s version %d",
			runID, run.Workflow, run.Version, wf.Name, wf.version())
	}
	return &Run[Out]{e: f.inner, id: runID, existing: true}, nil
}

func workflowKey(name string, version int) flowtype.WorkflowKey {
	return flowtype.WorkflowKey{Name: name, Version: version}
}

// checkKeys checks the IDs and keys a start was given, in pairs of a kind
// and a value, with the rules of names (engine.CheckKey): a run ID with a
// newline would be ambiguous in every list the CLI prints and in the
// history of its parent. An empty value is not given and not checked.
func checkKeys(kindsAndValues ...string) error {
	for i := 0; i+1 < len(kindsAndValues); i += 2 {
		if v := kindsAndValues[i+1]; v != "" {
			if err := engine.CheckKey(kindsAndValues[i], v); err != nil {
				return err
			}
		}
	}
	return nil
}
