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

// StartParams describes a run to start.
type StartParams struct {
	ID       string // empty: a random ID
	Workflow store.WorkflowKey
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
	// UniquePeriod bounds how long a finished run holds it (see queue.go).
	UniqueKey    string
	UniqueStates []store.RunStatus
	UniquePeriod time.Duration
	// OnDuplicate says what a start whose unique key another run holds
	// does: return the holder (the zero value) or fail with a
	// *flowtype.DuplicateError. A taken ID always returns its run.
	OnDuplicate flowtype.DuplicatePolicy
	// Timeout, when set, bounds how long the run may take from its first
	// claim (dequeue), not from its start: the claim sets its deadline
	// (see startoptions.go).
	Timeout time.Duration
	// IDReuse says whether the start may take the ID of a finished run
	// (see reuse.go); the zero value never does.
	IDReuse flowtype.IDReusePolicy
	// Detached marks a child that outlives its parent's cancellation (see
	// startoptions.go); set only by StartChild.
	Detached bool
	// Context is the record of the run's context values (see values.go):
	// nil takes those of the context the run is started with.
	Context []byte
}

// Started is the outcome of a start: the run, and whether it already
// existed under that ID (in which case nothing was written).
type Started struct {
	Run      store.Run
	Existing bool
}

// StartRun records a pending run and wakes its queue. Starting an ID that
// exists returns the existing run (the ID is an idempotency key) unless it
// belongs to another workflow, which is ErrRunExists.
//
// When this engine works the run's queue and has a slot free, the same
// transaction also claims the queue's next ready run, as the claim loop
// would (so a run started here does not jump the queue), and executes it
// here: a run started on an idle engine begins one commit sooner.
func (e *Engine) StartRun(ctx context.Context, p StartParams) (Started, error) {
	setValues(ctx, &p)
	queue := cmp.Or(p.Queue, DefaultQueue)
	slots := e.trySlot(queue)
	if slots == nil {
		if st, done, err := e.startAlone(ctx, &p); done || err != nil {
			return st, err
		}
	}
	var st Started
	var claimed []store.Run
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		st, err = e.insertRun(ctx, tx, &p)
		if err != nil || st.Existing || slots == nil || st.Run.RunAt > e.nowMs() {
			return err
		}
		claimed, err = e.claimIn(ctx, tx, queue, e.Known(), 1)
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
	runAt := now
	if !p.RunAt.IsZero() {
		runAt = p.RunAt.UnixMilli()
	}
	var deadline int64
	if !p.Deadline.IsZero() {
		deadline = p.Deadline.UnixMilli()
	}
	row := store.RunInsertParams{
		ID: p.ID, Workflow: p.Workflow, Queue: p.Queue, Priority: p.Priority,
		Input: p.Input, RunAt: runAt, Deadline: deadline, ParentID: p.ParentID, UniqueKey: p.UniqueKey,
		UniqueStates: insertStates(p), StartOptions: p.startOptions(), Now: now,
	}
	started := store.Event{RunID: p.ID, At: now, Kind: EventRunStarted, Detail: startedDetail(p)}
	return row, started, nil
}

// prepareStart checks p and fills in its defaults (a random ID, the
// default queue), for a start alone (startRecord) or in a batch
// (prepareBatch).
func (e *Engine) prepareStart(p *StartParams) error {
	if _, ok := e.Lookup(p.Workflow); !ok {
		return fmt.Errorf("start %s: %w: register it with this engine first", p.Workflow, ErrUnknownWorkflow)
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
		run, err := existingRun(ctx, tx, p, now)
		if err != nil {
			return Started{}, err
		}
		if inserted, err = reuseID(ctx, tx, p, run, row, &started); err != nil {
			return Started{}, err
		}
		if !inserted {
			return Started{Run: run, Existing: true}, nil
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

// insertedRun is the run an insert of r recorded, as RunGet would read it
// back in the same transaction: reading it costs a statement per start,
// and callers only use what they inserted.
func insertedRun(r store.RunInsertParams) store.Run {
	return store.Run{
		ID: r.ID, Workflow: r.Workflow.Name, Version: r.Workflow.Version, Queue: r.Queue, Priority: r.Priority,
		Status: store.RunPending, Input: r.Input, RunAt: r.RunAt, Deadline: r.Deadline, ParentID: r.ParentID,
		UniqueKey: r.UniqueKey, CreatedAt: r.Now, UpdatedAt: r.Now, StartOptions: r.StartOptions,
	}
}

// RolledBack returns the error of the failed run, naming the step that
// failed for good if one did.
func (e *Engine) RolledBack(ctx context.Context, run store.Run) *RolledBackError {
	rb := &RolledBackError{RunID: run.ID, Cause: run.Error}
	steps, err := e.store.Reader().StepList(ctx, run.ID)
	if err != nil {
		e.log.Warn("read the steps of a rolled back run", "run", run.ID, "err", err)
		return rb
	}
	var last *store.Step
	for i, st := range steps {
		if st.Status == store.StepFailed && (last == nil || st.FinishedAt >= last.FinishedAt) {
			last = &steps[i]
		}
	}
	if last != nil {
		rb.Step, rb.Attempts = last.Name, last.Attempts
	}
	return rb
}

// Wait blocks until the run is completed, failed, cancelled or suspended,
// and returns it.
//
// A read that finds the database unavailable (store.ErrUnavailable: a
// server restarting, a broken connection) does not end the wait: the run
// goes on once the database is back, and so does the wait, polling, until
// ctx ends; its error then matches both ctx's error and the last
// store.ErrUnavailable.
func (e *Engine) Wait(ctx context.Context, id string) (store.Run, error) {
	var last store.Run
	var away error // the last read's store.ErrUnavailable, while it lasts
	for {
		signal := e.settledSignal()
		run, err := e.store.Reader().RunGet(ctx, id)
		switch {
		case errors.Is(err, store.ErrUnavailable):
			if ctx.Err() != nil {
				return last, fmt.Errorf("%w: %w", ctx.Err(), err)
			}
			if away == nil {
				e.log.Warn("database unavailable while waiting for a run; still waiting", "run", id, "err", err)
			}
			away = err
		case err != nil:
			return store.Run{}, err
		default:
			if away != nil {
				e.log.Info("database available again; waiting for the run goes on", "run", id)
			}
			last, away = run, nil
			if run.Status.Finished() || run.Status == store.RunSuspended {
				return run, nil
			}
			if err := e.unwrittenError(run); err != nil {
				return run, err
			}
		}
		timer := time.NewTimer(e.cfg.PollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			if away != nil {
				return last, fmt.Errorf("%w: %w", ctx.Err(), away)
			}
			return last, ctx.Err()
		case <-signal:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Cancel requests cancellation of a run. Running code sees it through its
// context; completed steps are compensated and the run ends cancelled. A
// suspended run is cancelled at once, leaving its unwind where it stopped.
// Cancelling a finished run is ErrRunFinished.
func (e *Engine) Cancel(ctx context.Context, id string) error {
	var queues []string
	var children []string
	var finished int
	err := e.store.Write(ctx, func(tx store.Tx) error {
		now := e.nowMs()
		// The run is held from this read to the commit, so that what it
		// says (does a worker execute the run?) still holds when the
		// guarded updates below run: a claim in between, possible where
		// writes do not serialize (PostgreSQL), would make them find the
		// run changed and fail the call. With the row held, a claim either
		// committed first, and the cancel becomes a request to the engine
		// that holds the run, or waits, and claims a cancelled run no
		// more.
		run, err := tx.RunGetForUpdate(ctx, id)
		if err != nil {
			return err
		}
		queues = append(queues, run.Queue)
		if run.Status == store.RunSuspended {
			err := tx.RunSetStatus(ctx, store.RunSetStatusParams{
				ID: id, Expected: store.RunSuspended, Status: store.RunCancelled,
				Reason: run.Reason, RunAt: run.RunAt, FinishedAt: now, Now: now,
			})
			if err != nil {
				return err
			}
			return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: EventRunCancelled, Detail: "cancelled while suspended"})
		}
		if run.Status.Finished() {
			return fmt.Errorf("%w: run %s is %s", ErrRunFinished, id, run.Status)
		}
		if run.LeaseOwner == "" && (run.Status == store.RunPending || run.Status == store.RunWaiting) {
			// No worker executes it: nobody would see a request, so the run
			// is cancelled (or set to unwind) here.
			var err error
			children, finished, err = e.cancelIdle(ctx, tx, run, now, "")
			return err
		}
		ok, err := tx.RunRequestCancel(ctx, id, now)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: run %s is %s", ErrRunFinished, id, run.Status)
		}
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: EventCancelRequested})
	})
	if err != nil {
		return fmt.Errorf("cancel run %s: %w", id, err)
	}
	e.cancelActive(append(children, id))
	for range finished {
		e.metrics.runFinished(store.RunCancelled)
	}
	e.settled()
	for _, q := range queues {
		e.Wake(q)
	}
	if len(children) > 0 {
		e.WakeAll()
	}
	return nil
}

// cancelIdle cancels a run that no worker executes, inside tx. With nothing
// to undo it ends cancelled at once; with completed steps to compensate it
// becomes compensating, and the next engine to claim it runs the
// compensations and ends it cancelled (not before: until then the effects
// of its steps stand, which a cancelled status would hide). Its unfinished
// children are cancelled too: idle ones in the same way, executing ones by
// request. It returns the IDs of the children that were asked to cancel,
// and how many runs it cancelled at once.
func (e *Engine) cancelIdle(ctx context.Context, tx store.Tx, run store.Run, now int64, why string) (children []string, cancelled int, err error) {
	msg := ErrCancelled.Error()
	detail := "cancelled while " + string(run.Status)
	if why != "" {
		detail = why
	}
	done, err := tx.RunCancelIdle(ctx, run.ID, msg, now)
	if err != nil {
		return nil, 0, err
	}
	if done {
		cancelled++
		if err := tx.EventAppend(ctx, store.Event{RunID: run.ID, At: now, Kind: EventRunCancelled, Detail: detail}); err != nil {
			return nil, 0, err
		}
		if run.ParentID != "" {
			if _, err := tx.RunWake(ctx, run.ParentID, now); err != nil {
				return nil, 0, err
			}
		}
	} else {
		ok, err := tx.RunCancelToUnwind(ctx, run.ID, msg, now)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, 0, fmt.Errorf("%w: run %s changed while being cancelled", store.ErrConflict, run.ID)
		}
		if err := tx.StepCompensationArm(ctx, run.ID); err != nil {
			return nil, 0, err
		}
		ev := store.Event{RunID: run.ID, At: now, Kind: EventCancelRequested, Detail: detail + "; compensations run when an engine claims it"}
		if err := tx.EventAppend(ctx, ev); err != nil {
			return nil, 0, err
		}
	}
	children, err = tx.RunCancelChildren(ctx, run.ID, now)
	if err != nil {
		return nil, 0, err
	}
	all := children
	for _, id := range children {
		child, err := tx.RunGet(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		if child.LeaseOwner != "" || (child.Status != store.RunPending && child.Status != store.RunWaiting) {
			ev := store.Event{RunID: id, At: now, Kind: EventCancelRequested, Detail: "parent " + run.ID + " was cancelled"}
			if err := tx.EventAppend(ctx, ev); err != nil {
				return nil, 0, err
			}
			continue
		}
		grandchildren, n, err := e.cancelIdle(ctx, tx, child, now, "parent "+run.ID+" was cancelled")
		if err != nil {
			return nil, 0, err
		}
		all = append(all, grandchildren...)
		cancelled += n
	}
	return all, cancelled, nil
}

// Resume puts a suspended run back to work: failed compensations get a fresh
// set of attempts, and a run suspended before its workflow failed (e.g. on a
// value it could not decode) runs its body again.
func (e *Engine) Resume(ctx context.Context, id string) error {
	return e.operate(ctx, id, "resume", func(tx store.Tx, run store.Run, now int64) error {
		target := store.RunPending
		if run.Error != "" {
			target = store.RunCompensating
			if _, err := tx.StepCompensationRetryFailed(ctx, id); err != nil {
				return err
			}
		}
		err := tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: id, Expected: store.RunSuspended, Status: target, RunAt: now, Now: now})
		if err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: EventRunResumed, Detail: "was: " + run.Reason})
	})
}

// Skip marks the failed compensations of a suspended run as skipped (an
// operator decided their effects need no undo) and resumes the unwind.
func (e *Engine) Skip(ctx context.Context, id string) error {
	return e.operate(ctx, id, "skip compensation of", func(tx store.Tx, run store.Run, now int64) error {
		n, err := tx.StepCompensationSkipFailed(ctx, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("%w: no failed compensation to skip (suspended because: %s)", store.ErrConflict, run.Reason)
		}
		err = tx.RunSetStatus(ctx, store.RunSetStatusParams{ID: id, Expected: store.RunSuspended, Status: store.RunCompensating, RunAt: now, Now: now})
		if err != nil {
			return err
		}
		return tx.EventAppend(ctx, store.Event{RunID: id, At: now, Kind: EventCompensationSkipped, Detail: run.Reason})
	})
}

// operate applies an operator action to a suspended run.
func (e *Engine) operate(ctx context.Context, id, verb string, fn func(store.Tx, store.Run, int64) error) error {
	var queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, id)
		if err != nil {
			return err
		}
		if run.Status != store.RunSuspended {
			return fmt.Errorf("%w: run is %s, not suspended", store.ErrConflict, run.Status)
		}
		queue = run.Queue
		return fn(tx, run, e.nowMs())
	})
	if err != nil {
		return fmt.Errorf("%s run %s: %w", verb, id, err)
	}
	e.Wake(queue)
	return nil
}

// Signal sends a signal to a run: the run receives it the next time it waits
// for that name, or at once if it already waits. A non-empty key makes the
// send idempotent: a second signal with the same key to the same run is
// ignored, and Signal reports false. Signalling an unknown run is
// store.ErrNotFound; a finished one, ErrRunFinished.
func (e *Engine) Signal(ctx context.Context, runID, name string, payload []byte, key string) (bool, error) {
	if err := CheckName("signal", name); err != nil {
		return false, fmt.Errorf("signal to run %s: %w", runID, err)
	}
	if err := e.CheckPayload("payload", payload); err != nil {
		return false, fmt.Errorf("signal %s to run %s: %w", name, runID, err)
	}
	var sent bool
	var queue string
	err := e.store.Write(ctx, func(tx store.Tx) error {
		run, err := tx.RunGet(ctx, runID)
		if err != nil {
			return err
		}
		if run.Status.Finished() {
			return fmt.Errorf("%w: run %s is %s", ErrRunFinished, runID, run.Status)
		}
		queue = run.Queue
		now := e.nowMs()
		if sent, err = tx.SignalSend(ctx, store.Signal{RunID: runID, Name: name, Payload: payload, Key: key, SentAt: now}); err != nil || !sent {
			return err
		}
		if _, err := tx.RunWake(ctx, runID, now); err != nil {
			return err
		}
		detail := "signal " + name
		if key != "" {
			detail += ", key " + key
		}
		return tx.EventAppend(ctx, store.Event{RunID: runID, At: now, Kind: EventSignalSent, Detail: detail})
	})
	if err != nil {
		return false, fmt.Errorf("signal %s to run %s: %w", name, runID, err)
	}
	if sent {
		e.Wake(queue)
	}
	return sent, nil
}
