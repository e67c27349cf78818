package engine

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Starting a run: the parameters, their checks, and the insert of the
// pending run with its run_started event, alone (StartRun) or in the
// caller's transaction (StartRunTx). Unique keys are in unique.go, batches
// of starts in batch.go.

// StartParams describes a run to start.
type StartParams struct {
	ID       string // empty: a random ID
	Workflow flowtype.WorkflowKey
	Queue    string // empty: "default"
	Priority int
	Input    []byte
	RunAt    time.Time // zero: now
	// Deadline, when set, cancels the run (compensating what it completed)
	// once the engine clock passes it.
	Deadline time.Time
	ParentID string // set by StartChild
	// UniqueKey, when set, makes the run unique among the unfinished runs of
	// its workflow and the finished ones in one of UniqueStates, and
	// UniquePeriod bounds how long a finished run holds it (see unique.go).
	UniqueKey    string
	UniqueStates []flowtype.RunStatus
	UniquePeriod time.Duration
	// OnDuplicate says what a start whose unique key another run holds
	// does: return the holder (the zero value) or fail with a
	// *flowtype.DuplicateError. A taken ID always returns its run.
	OnDuplicate flowtype.DuplicatePolicy
	// Timeout, when set, bounds how long the run may take from its first
	// claim (dequeue), not from its start: the claim sets its deadline
	// (see the start options below).
	Timeout time.Duration
	// IDReuse says whether the start may take the ID of a finished run
	// (see Run ID reuse below); the zero value never does.
	IDReuse flowtype.IDReusePolicy
	// Detached marks a child that outlives its parent's cancellation (see
	// the start options below); set only by StartChild.
	Detached bool
	// Context is the record of the run's context values (see values.go):
	// nil takes those of the context the run is started with.
	Context []byte
	// ConcurrencyKey groups the run with the others of its queue that
	// share it, for per-key limits and fair claims (see limits.go).
	ConcurrencyKey string
	// Debounce, when set, merges the start into the pending run of its
	// key (see debounce.go); StartRun only.
	Debounce *flowtype.Debounce
}

// Started is the outcome of a start: the run, and whether it already
// existed under that ID (in which case nothing was written).
type Started struct {
	Run      store.Run
	Existing bool
}

// StartRun records a pending run and wakes its queue. Starting an ID that
// exists returns the existing run (the ID is an idempotency key) unless it
// belongs to another workflow, which is flowtype.ErrRunExists.
//
// When this engine works the run's queue and has a slot free, the same
// transaction also claims the queue's next ready run, as the claim loop
// would (so a run started here does not jump the queue), and executes it
// here: a run started on an idle engine begins one commit sooner.
func (e *Engine) StartRun(ctx context.Context, p StartParams) (Started, error) {
	setValues(ctx, &p)
	if p.Debounce != nil {
		return e.startDebounced(ctx, &p)
	}
	queue := cmp.Or(p.Queue, DefaultQueue)
	slots := e.trySlot(queue)
	if slots == nil {
		if st, done, err := e.startAlone(ctx, &p); done || err != nil {
			return st, err
		}
	}
	var st Started
	var claimed []store.Run
	l, limited := e.limitsOf(ctx, queue)
	// A start does not take a shard set's lock of a queue whose limits
	// count across the set: its claimer claims the run.
	claim := slots != nil && !(limited && e.countsAcrossSet(l))
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		st, err = e.insertRun(ctx, tx, &p)
		if err != nil || st.Existing || !claim || st.Run.RunAt > e.nowMs() {
			return err
		}
		claimed, err = e.claimIn(ctx, tx, queue, e.Known(), 1, limited, nil)
		return err
	})
	if slots != nil && len(claimed) == 0 {
		slots.Release(1)
	}
	if err != nil {
		e.drop(claimed)
		return Started{}, err
	}
	if len(claimed) == 1 {
		e.claimed(queue, claimed)
		e.launch(claimed[0], slots)
	}
	if !st.Existing {
		e.metrics.runStarted()
		if len(claimed) == 0 || claimed[0].ID != st.Run.ID {
			e.wakeAfter(st.Run.Queue, time.Duration(st.Run.RunAt-e.nowMs())*time.Millisecond)
		}
	}
	return st, nil
}

// StartRunTx records a pending run in the caller's transaction: it exists
// only if that transaction commits. Workers see it at their next poll, or
// as the transaction commits when the store sends wakes (store.Notifier).
func (e *Engine) StartRunTx(ctx context.Context, sqlTx *sql.Tx, p StartParams) (Started, error) {
	if p.Debounce != nil {
		return Started{}, errDebounceHere(&p, "in the caller's transaction")
	}
	setValues(ctx, &p)
	var st Started
	err := e.store.WriteInTx(ctx, sqlTx, func(tx store.Tx) error {
		var err error
		st, err = e.insertRun(ctx, tx, &p)
		return err
	})
	if err == nil && !st.Existing {
		e.metrics.runStarted()
	}
	return st, err
}

// startAlone starts the run p in one statement committed on its own,
// where the store has one (store.Starter) and the run has no unique key:
// a round trip on PostgreSQL where a start in Write takes four. It reports
// done false, having written nothing, when it does not apply or p's ID is
// taken: the caller then starts the run in Write, which reads the run that
// holds the ID. StartRun calls it only when this engine does not claim the
// run at once (no free slot of its queue), which needs a Write anyway.
func (e *Engine) startAlone(ctx context.Context, p *StartParams) (st Started, done bool, err error) {
	starter, ok := e.store.(store.Starter)
	if !ok || p.UniqueKey != "" || !p.startOptions().IsZero() {
		return Started{}, false, nil
	}
	row, started, err := e.startRecord(p)
	if err != nil {
		return Started{}, true, err
	}
	inserted, err := starter.StartAlone(ctx, row, started)
	if err != nil || !inserted {
		return Started{}, err != nil, err
	}
	e.metrics.runStarted()
	e.wakeAfter(row.Queue, time.Duration(row.RunAt-e.nowMs())*time.Millisecond)
	return Started{Run: insertedRun(row)}, true, nil
}

// startRecord checks p and fills in its defaults (a random ID, the
// default queue), and returns the run and the run_started event a start
// of it records.
func (e *Engine) startRecord(p *StartParams) (store.RunInsertParams, store.Event, error) {
	if err := e.prepareStart(p); err != nil {
		return store.RunInsertParams{}, store.Event{}, err
	}
	now := e.nowMs()
	return insertParams(p, now), startedEvent(p, now), nil
}

// insertParams is the row a start of the prepared p records at now: due
// now unless p says when, for a start alone and in a batch.
func insertParams(p *StartParams, now int64) store.RunInsertParams {
	runAt := now
	if !p.RunAt.IsZero() {
		runAt = p.RunAt.UnixMilli()
	}
	var deadline int64
	if !p.Deadline.IsZero() {
		deadline = p.Deadline.UnixMilli()
	}
	return store.RunInsertParams{
		ID: p.ID, Workflow: p.Workflow, Queue: p.Queue, Priority: p.Priority,
		Input: p.Input, RunAt: runAt, Deadline: deadline, ParentID: p.ParentID, UniqueKey: p.UniqueKey,
		UniqueStates: insertStates(p), StartOptions: p.startOptions(), Now: now,
	}
}

// startedEvent is the run_started event of a start of p at now.
func startedEvent(p *StartParams, now int64) store.Event {
	return store.Event{RunID: p.ID, At: now, Kind: flowtype.EventRunStarted, Detail: startedDetail(p)}
}

// prepareStart checks p and fills in its defaults (a random ID, the
// default queue), for a start alone (startRecord) or in a batch
// (prepareBatch).
func (e *Engine) prepareStart(p *StartParams) error {
	if _, ok := e.Lookup(p.Workflow); !ok {
		return fmt.Errorf("start %s: %w: register it with this engine first", p.Workflow, flowtype.ErrUnknownWorkflow)
	}
	if p.ID == "" {
		p.ID = NewRunID()
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if err := validUnique(p); err != nil {
		return err
	}
	if err := validStartOptions(p); err != nil {
		return err
	}
	if err := validReuse(p); err != nil {
		return err
	}
	return e.validValues(p)
}

func (e *Engine) insertRun(ctx context.Context, tx store.Tx, p *StartParams) (Started, error) {
	row, started, err := e.startRecord(p)
	if err != nil {
		return Started{}, err
	}
	now := row.Now
	inserted, err := tx.RunInsert(ctx, row)
	if err != nil {
		return Started{}, fmt.Errorf("start run %s: %w", p.ID, err)
	}
	if !inserted {
		run, again, err := existingOrAgain(ctx, tx, p, now, func() (bool, error) { return tx.RunInsert(ctx, row) })
		if err != nil {
			return Started{}, err
		}
		if !again {
			if inserted, err = reuseID(ctx, tx, p, run, row, &started); err != nil {
				return Started{}, err
			}
			if !inserted {
				return Started{Run: run, Existing: true}, nil
			}
		}
	}
	if err := holdUniqueKey(ctx, tx, p, now); err != nil {
		return Started{}, err
	}
	if err := tx.EventAppend(ctx, started); err != nil {
		return Started{}, err
	}
	return Started{Run: insertedRun(row)}, nil
}

// maxKeyFreedRetries bounds how often one start inserts again after its
// unique key's holder finished between the insert and the look-up.
const maxKeyFreedRetries = 8

// errKeyFreed says that neither a run with a start's ID nor a holder of its
// unique key exists, although the insert found one of them: the holder
// finished in between, which a store whose writers overlap (PostgreSQL's
// READ COMMITTED) lets a start see.
var errKeyFreed = errors.New("the unique key's holder finished meanwhile")

// existingOrAgain returns the run that kept p from being inserted, as
// existingRun does; when the key's holder finished in between, it calls
// insert again, and returns again true once insert recorded the run.
func existingOrAgain(ctx context.Context, tx store.Tx, p *StartParams, now int64, insert func() (bool, error)) (run store.Run, again bool, err error) {
	for range maxKeyFreedRetries {
		run, err = existingRun(ctx, tx, p, now)
		if !errors.Is(err, errKeyFreed) {
			return run, false, err
		}
		inserted, err := insert()
		if err != nil {
			return store.Run{}, false, fmt.Errorf("start run %s: %w", p.ID, err)
		}
		if inserted {
			return store.Run{}, true, nil
		}
	}
	return store.Run{}, false, fmt.Errorf("start run %s: %w: unique key %q changed hands %d times while it started; try again", p.ID, flowtype.ErrConflict, p.UniqueKey, maxKeyFreedRetries)
}

// existingRun returns the run that kept p from being inserted: the run
// with its ID, else the holder of its unique key, which is a
// *flowtype.DuplicateError under RefuseDuplicate. A run of another
// workflow under its ID is flowtype.ErrRunExists, as for StartRun. When
// neither is there any more, it returns errKeyFreed.
func existingRun(ctx context.Context, tx store.Tx, p *StartParams, now int64) (store.Run, error) {
	run, err := tx.RunGet(ctx, p.ID)
	byKey := false
	if errors.Is(err, flowtype.ErrRunNotFound) && p.UniqueKey != "" {
		run, err = uniqueHolder(ctx, tx, p.Workflow.Name, p.UniqueKey, now)
		byKey = true
		if errors.Is(err, flowtype.ErrRunNotFound) {
			return store.Run{}, errKeyFreed
		}
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("start run %s: %w", p.ID, err)
	}
	if byKey && p.OnDuplicate == flowtype.RefuseDuplicate {
		// The ID is free, so this is not the same start tried again: it
		// is another start of what the key says is one run.
		return store.Run{}, &flowtype.DuplicateError{
			RunID: p.ID, Workflow: p.Workflow.Name, UniqueKey: p.UniqueKey, HolderID: run.ID, HolderStatus: run.Status,
		}
	}
	if run.Workflow != p.Workflow.Name {
		return store.Run{}, fmt.Errorf("start run %s of workflow %s: %w (%s)", p.ID, p.Workflow.Name, flowtype.ErrRunExists, run.Workflow)
	}
	return run, nil
}

// insertedRun is the run an insert of r recorded, as RunGet would read it
// back in the same transaction: reading it costs a statement per start,
// and callers only use what they inserted.
func insertedRun(r store.RunInsertParams) store.Run {
	return store.Run{
		ID: r.ID, Workflow: r.Workflow.Name, Version: r.Workflow.Version, Queue: r.Queue, Priority: r.Priority,
		Status: flowtype.StatusPending, Input: r.Input, RunAt: r.RunAt, Deadline: r.Deadline, ParentID: r.ParentID,
		UniqueKey: r.UniqueKey, CreatedAt: r.Now, UpdatedAt: r.Now, StartOptions: r.StartOptions,
	}
}

// startedDetail is the detail of the run_started event of a new run.
func startedDetail(p *StartParams) string {
	d := fmt.Sprintf("%s on %s", p.Workflow, p.Queue)
	if p.UniqueKey != "" {
		d += fmt.Sprintf(", unique key %q", p.UniqueKey)
		if len(p.UniqueStates) > 0 {
			d += " while " + joinStates(p.UniqueStates)
		}
		if p.UniquePeriod > 0 {
			d += " for " + p.UniquePeriod.String()
		}
	}
	return d + startOptionsDetail(p)
}

// Start options a run keeps for its whole life (store.StartOptions).
//
// Timeout. A deadline is absolute: a run still queued when it passes is
// cancelled before it ran. A timeout counts from the run's first claim
// instead (DBOS's WithTimeout on queues): the claim that first leases the
// run sets its deadline to the claim's time plus the timeout, or keeps an
// earlier deadline the run had, in the claim's own statement, so every
// later execution, rescue, release and child sees it as the deadline it
// is. A run that is rescued and claimed again keeps the deadline of its
// first claim.
//
// Detached children. A child is cancelled with its parent: when the parent
// is cancelled, or fails and unwinds, RunCancelChildren requests the
// cancellation of its unfinished children. A detached child is left out
// (DBOS's WithoutCancel): it runs to its own end, and inherits no deadline
// from its parent either. It is still its parent's child: the parent can
// await it, and it is listed with the parent's ID.

// startOptions returns the options of p the store records.
func (p *StartParams) startOptions() store.StartOptions {
	return store.StartOptions{Timeout: p.Timeout.Milliseconds(), Detached: p.Detached, Context: p.Context, ConcurrencyKey: p.ConcurrencyKey}
}

// validStartOptions checks p's start options, before anything is written.
func validStartOptions(p *StartParams) error {
	switch {
	case p.Timeout < 0:
		return fmt.Errorf("start %s: negative timeout %s", p.Workflow, p.Timeout)
	case p.Timeout > 0 && p.Timeout < time.Millisecond:
		return fmt.Errorf("start %s: timeout %s is under the millisecond the engine counts in", p.Workflow, p.Timeout)
	case p.Detached && p.ParentID == "":
		return fmt.Errorf("start %s: only a child can be detached (from its parent)", p.Workflow)
	case len(p.ConcurrencyKey) > MaxConcurrencyKey:
		return fmt.Errorf("start %s: concurrency key of %d bytes, over the %d allowed", p.Workflow, len(p.ConcurrencyKey), MaxConcurrencyKey)
	}
	return nil
}

// startOptionsDetail is what the run_started event says of p's start
// options.
func startOptionsDetail(p *StartParams) string {
	var d string
	if p.Timeout > 0 {
		d += ", timeout " + p.Timeout.String() + " from its first claim"
	}
	if p.Detached {
		d += ", detached from parent " + p.ParentID + " (its cancellation does not reach this run)"
	}
	if p.ConcurrencyKey != "" {
		d += fmt.Sprintf(", concurrency key %q", p.ConcurrencyKey)
	}
	return d + debounceDetail(p) + valuesDetail(p)
}

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
		return false, fmt.Errorf("start run %s: %w: its ID is free to reuse, but unique key %q is held by another run", p.ID, flowtype.ErrConflict, p.UniqueKey)
	}
	started.Detail += fmt.Sprintf(", reusing the ID of a %s run of %s version %d (deleted)", holder.Status, holder.Workflow, holder.Version)
	return true, nil
}
