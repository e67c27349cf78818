package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// runQueue claims and executes the runs of one queue, never more than limit
// at once. It claims as many runs as it has free slots in one transaction,
// and sleeps until woken or until the poll interval passes when there is
// nothing to do.
func (e *Engine) runQueue(ctx context.Context, queue string, limit int) {
	e.mu.Lock()
	slots := e.slots[queue]
	wake := e.wake[queue]
	e.mu.Unlock()
	poll := time.NewTimer(e.cfg.PollInterval)
	defer poll.Stop()
	batch := min(limit, e.cfg.ClaimBatch)
	for {
		if err := slots.Acquire(ctx, 1); err != nil {
			return
		}
		free := 1
		for free < batch && slots.TryAcquire(1) {
			free++
		}
		runs, err := e.claim(ctx, queue, free)
		switch {
		case err == nil:
			e.loopOK("claim runs of queue " + queue)
		case ctx.Err() == nil:
			e.loopFailed("claim runs of queue "+queue, "claim runs", err, "queue", queue)
		}
		slots.Release(int64(free - len(runs)))
		for _, run := range runs {
			e.execs.Go(func() error {
				defer e.freed(queue)
				defer slots.Release(1)
				e.execute(run)
				return nil
			})
		}
		if err == nil && len(runs) == free {
			continue // the queue may hold more ready runs
		}
		poll.Reset(e.limits.nextTry(queue, e.cfg.PollInterval, e.nowMs()))
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-poll.C:
		}
	}
}

// freed is called when an execution of queue gave its slot back: a
// limited queue's claimer may now take a run its limits held back.
func (e *Engine) freed(queue string) {
	if e.limits.limited(queue) {
		e.Wake(queue)
	}
}

// claim leases up to max ready runs of queue in one write transaction, or
// in one statement on a store that is a store.Claimer (claimAlone).
func (e *Engine) claim(ctx context.Context, queue string, max int) ([]store.Run, error) {
	known := e.Known()
	if len(known) == 0 {
		return nil, nil
	}
	l, limited := e.limitsOf(ctx, queue)
	if c, ok := e.store.(store.Claimer); ok && !limited {
		return e.claimAlone(ctx, c.ClaimAndBegin, queue, known, max)
	}
	if c, ok := e.store.(store.LimitedClaimer); ok && limited && globalOnly(l) && e.setLimits == nil {
		// No run claimed means the statement could not be sure of its
		// count: claim the careful way below.
		if runs, err := e.claimAlone(ctx, c.ClaimAndBeginLimited, queue, known, max); err != nil || len(runs) > 0 {
			return runs, err
		}
	}
	set, unlock, err := e.lockSetClaim(ctx, queue, limited)
	if err != nil {
		return nil, err
	}
	defer unlock() // after the claim committed
	var runs []store.Run
	err = e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		runs, err = e.claimIn(ctx, tx, queue, known, max, limited, set)
		return err
	})
	if err != nil {
		e.drop(runs)
		return nil, err
	}
	e.claimed(queue, runs)
	return runs, nil
}

// claimAlone is claim on a store that makes a whole claim one statement
// (store.Claimer): the leases, the first attempts beginFirstSteps would
// record and the events of both, committed together. The runs are held
// once the statement returns: a claim that commits on its own has no
// moment before its commit to hold them in, and a lease just taken cannot
// expire before this goroutine holds it.
func (e *Engine) claimAlone(ctx context.Context, claimAndBegin func(context.Context, store.ClaimAndBeginParams) ([]store.ClaimedRun, error), queue string, known []flowtype.WorkflowKey, max int) ([]store.Run, error) {
	now := e.nowMs()
	claimed, err := claimAndBegin(ctx, store.ClaimAndBeginParams{
		RunClaimParams: store.RunClaimParams{
			Queue: queue, Known: known, Owner: e.cfg.WorkerID, Max: max,
			Now: now, LeaseExpiresAt: now + e.cfg.LeaseTimeout.Milliseconds(),
		},
		FirstSteps: e.firstSteps(),
	})
	if err != nil {
		return nil, err
	}
	runs := make([]store.Run, len(claimed))
	for i, r := range claimed {
		runs[i] = r.Run
	}
	e.hold(runs)
	e.noteBegun(claimed)
	e.claimed(queue, runs)
	return runs, nil
}

// noteBegun keeps the first attempts a one-statement claim began, for the
// executions of their runs.
func (e *Engine) noteBegun(claimed []store.ClaimedRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range claimed {
		if r.Begun != "" {
			def := e.workflows[flowtype.WorkflowKey{Name: r.Workflow, Version: r.Version}] // e.mu is held
			e.begun[r.ID] = begunStep{lease: r.Lease(), key: store.StepKey{RunID: r.ID, Name: r.Begun}, attempt: 1, lean: def.FirstStep.Lean}
		}
	}
}

// firstSteps lists the first steps of the registered workflows that
// declare one (Workflow.FirstStep). Register keeps the list, so that a
// claim does not build it again on every poll.
func (e *Engine) firstSteps() []store.FirstStep {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.first
}

// claimIn leases up to max ready runs of queue, of the workflow versions
// known, in tx, and records a run_claimed event for each. A queue this
// engine knows to be limited is claimed as its limits allow
// (claimLimited), which reads them again in tx; set is what the other
// files of a shard set hold of it, read under the set's lock (nil: not
// locked).
func (e *Engine) claimIn(ctx context.Context, tx store.Tx, queue string, known []flowtype.WorkflowKey, max int, limited bool, set *elsewhere) ([]store.Run, error) {
	now := e.nowMs()
	p := store.RunClaimParams{
		Queue: queue, Known: known, Owner: e.cfg.WorkerID, Max: max,
		Now: now, LeaseExpiresAt: now + e.cfg.LeaseTimeout.Milliseconds(),
	}
	var runs []store.Run
	var err error
	if limited {
		c, err := e.claimLimited(ctx, tx, p, set)
		if err != nil {
			return nil, err
		}
		e.limits.holdUntil(queue, c.retryAt)
		now = c.now
		if c.begun != nil { // the claim recorded the events and first attempts
			e.hold(c.runs)
			e.noteBegun(c.begun)
			return c.runs, nil
		}
		runs = c.runs
	} else if runs, err = tx.RunClaim(ctx, p); err != nil {
		return nil, err
	}
	e.hold(runs)
	first := e.firstAttempts(runs, now)
	for _, r := range runs {
		if f, ok := first[r.ID]; ok && f.lean {
			continue // derived on read (see derived.go)
		}
		err := tx.EventAppend(ctx, store.Event{
			RunID: r.ID, At: now, Kind: flowtype.EventRunClaimed,
			Detail: fmt.Sprintf("fence %d, %s", r.Fence, r.LeaseOwner),
		})
		if err != nil {
			return nil, err
		}
	}
	if err := e.beginFirstSteps(ctx, tx, runs, first, now); err != nil {
		return nil, err
	}
	return runs, nil
}

// firstAttempt is the first attempt a claim begins for a run (see
// beginFirstSteps), and whether its workflow keeps a lean record.
type firstAttempt struct {
	params store.StepBeginParams
	lease  store.Lease
	lean   bool
}

// firstAttempts returns, by run ID, the first attempts to begin in the
// claim of runs: of each run claimed for the first time whose workflow
// declares a first step (Workflow.FirstStep). Runs claimed again (their
// steps are to be read and replayed), cancelled runs and runs past their
// deadline are left to runStep.
func (e *Engine) firstAttempts(runs []store.Run, now int64) map[string]firstAttempt {
	var first map[string]firstAttempt
	for _, r := range runs {
		if r.Fence != 1 || r.Status != flowtype.StatusRunning || r.CancelRequested || (r.Deadline > 0 && r.Deadline <= now) {
			continue
		}
		def, ok := e.Lookup(flowtype.WorkflowKey{Name: r.Workflow, Version: r.Version})
		if !ok || def.FirstStep.Name == "" {
			continue
		}
		if first == nil {
			first = make(map[string]firstAttempt)
		}
		// A run claimed for the first time has no step records (steps are
		// written only under a lease).
		key := store.StepKey{RunID: r.ID, Name: def.FirstStep.Name}
		first[r.ID] = firstAttempt{
			params: store.StepBeginParams{Key: key, Input: def.FirstStep.Input, Position: 0, Now: now, New: true},
			lease:  r.Lease(),
			lean:   def.FirstStep.Lean,
		}
	}
	return first
}

// beginFirstSteps records, in the claim's transaction, the first attempts
// firstAttempts chose, in the order of runs: each is then durable before
// the body runs, as runStep would make it, without a transaction of its
// own. They are begun together (StepBeginMany), one statement on
// PostgreSQL for the whole claim, each with its step_started event unless
// its workflow keeps a lean record.
func (e *Engine) beginFirstSteps(ctx context.Context, tx store.Tx, runs []store.Run, first map[string]firstAttempt, now int64) error {
	if len(first) == 0 {
		return nil
	}
	ps := make([]store.StepBeginParams, 0, len(first))
	for _, r := range runs {
		if f, ok := first[r.ID]; ok {
			ps = append(ps, f.params)
		}
	}
	attempts, err := tx.StepBeginMany(ctx, ps)
	if err != nil {
		return err
	}
	for i, p := range ps {
		if first[p.Key.RunID].lean {
			continue // derived on read (see derived.go)
		}
		err := tx.EventAppend(ctx, store.Event{RunID: p.Key.RunID, At: now, Kind: flowtype.EventStepStarted, Step: p.Key.Name, Occurrence: p.Key.Occurrence, Attempt: attempts[i]})
		if err != nil {
			return err
		}
	}
	e.mu.Lock()
	for i, p := range ps {
		f := first[p.Key.RunID]
		e.begun[p.Key.RunID] = begunStep{lease: f.lease, key: p.Key, attempt: attempts[i], lean: f.lean}
	}
	e.mu.Unlock()
	return nil
}

// begunStep is a first attempt a claim recorded (beginFirstStep) that the
// run's execution has not used yet.
type begunStep struct {
	lease   store.Lease
	key     store.StepKey
	attempt int
	lean    bool // the claim stored none of its events (FirstStep.Lean)
}

// takeBegun removes and returns the attempt the claim of run recorded, if
// any.
func (e *Engine) takeBegun(run store.Run) (begunStep, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.begun[run.ID]
	if ok {
		delete(e.begun, run.ID)
	}
	return b, ok && b.lease == run.Lease()
}

// undoBegun gives back, in tx, an attempt a claim recorded but whose body
// never ran because the run is given back or ends first (the engine
// stopping, a cancellation, an unregistered version): the attempt does
// not count, as a snoozed one does not, so a job with one attempt still
// runs its body once.
func undoBegun(ctx context.Context, tx store.Tx, b begunStep, why string, now int64) error {
	return tx.StepSnooze(ctx, store.StepSnoozeParams{Key: b.key, Detail: "attempt not run: " + why, Now: now})
}

// claimed puts the runs a committed claim returned in claim order and
// counts them.
func (e *Engine) claimed(queue string, runs []store.Run) {
	// SQLite returns RETURNING rows in update order, not in claim order.
	slices.SortFunc(runs, func(a, b store.Run) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.RunAt, b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	e.metrics.observeClaims(queue, runs, e.nowMs())
}

// hold registers the leases of runs claimed in a transaction not yet
// committed, so that a rescue committed right after it renews them even if
// this goroutine is slow to start their executions; drop undoes it when the
// transaction failed.
func (e *Engine) hold(runs []store.Run) {
	e.mu.Lock()
	for _, r := range runs {
		e.held[r.ID] = r.Lease()
		delete(e.unwritten, r.ID) // a write failure of an earlier claim is history now
	}
	e.mu.Unlock()
}

// unhold forgets lease l of run id as held here, with a cancellation
// requested of it before its execution began (cancelActive), unless the
// run was claimed here again since. The caller holds e.mu.
func (e *Engine) unhold(id string, l store.Lease) {
	if e.held[id] == l {
		delete(e.held, id)
	}
	if e.cancelReq[id] == l {
		delete(e.cancelReq, id)
	}
}

func (e *Engine) drop(runs []store.Run) {
	e.mu.Lock()
	for _, r := range runs {
		e.unhold(r.ID, r.Lease())
		if e.begun[r.ID].lease == r.Lease() {
			delete(e.begun, r.ID) // rolled back with the claim
		}
	}
	e.mu.Unlock()
}

// trySlot takes a free execution slot of queue, for a run claimed outside
// the claim loop; nil when the engine is not running, does not work queue,
// or has no slot free.
func (e *Engine) trySlot(queue string) *semaphore.Weighted {
	e.mu.Lock()
	running := e.running
	slots := e.slots[queue]
	e.mu.Unlock()
	if !running || slots == nil || !slots.TryAcquire(1) {
		return nil
	}
	return slots
}

// launch executes a run claimed outside the claim loop in the slot it
// holds. If the engine stopped meanwhile, the run is given back at once.
func (e *Engine) launch(run store.Run, slots *semaphore.Weighted) {
	e.mu.Lock()
	if e.running { // Stop clears it under e.mu before it waits for executions
		e.execs.Go(func() error {
			defer slots.Release(1)
			e.execute(run)
			return nil
		})
		e.mu.Unlock()
		return
	}
	e.unhold(run.ID, run.Lease()) // given back below, not executed
	e.mu.Unlock()
	slots.Release(1)
	begun, hasBegun := e.takeBegun(run)
	ctx, cancel := context.WithTimeout(context.Background(), stopWriteTimeout)
	defer cancel()
	now := e.nowMs()
	err := e.store.Write(ctx, func(tx store.Tx) error {
		err := tx.RunRelease(ctx, run.Lease(), store.RunReleaseParams{RunAt: now, WakeSeq: run.WakeSeq, Now: now})
		if err != nil {
			return err
		}
		if hasBegun {
			if err := undoBegun(ctx, tx, begun, "engine stopping", now); err != nil {
				return err
			}
		}
		return tx.EventAppend(ctx, store.Event{RunID: run.ID, At: now, Kind: flowtype.EventRunReleased, Detail: "engine stopping"})
	})
	if err != nil {
		e.log.Warn("give back a run claimed while the engine stopped; it is rescued when its lease expires", "run", run.ID, "err", err)
	}
}
