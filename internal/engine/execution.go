package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// execution is one claim of one run by this engine: the lease, the
// contexts that end with it, and the fenced writes made under it.
type execution struct {
	e     *Engine
	run   store.Run
	def   Workflow
	lease store.Lease

	// leaseCtx ends when the lease is lost or the engine stops; compensations
	// run under it. runCtx also ends when the run is cancelled; workflow
	// bodies and steps run under it.
	leaseCtx    context.Context
	cancelLease context.CancelCauseFunc
	runCtx      context.Context
	cancelRun   context.CancelCauseFunc

	// deferred holds checkpoints that commit with the execution's next
	// transaction: a step's checkpoint rides along with the start of the
	// next step (or the run's outcome), halving the transactions per step.
	// This is safe because nothing outside the body observes a step's
	// output before that next transaction commits.
	deferredMu sync.Mutex
	deferred   []checkpoint
	// carryMu orders the writes that carry deferred checkpoints: one holds
	// it from taking them to its commit, so checkpoints commit in the order
	// the steps completed, which is the order their compensations reverse
	// (the store numbers completions as they commit). Without it, two
	// branches' writes could take their checkpoints in one order and commit
	// them in the other.
	carryMu sync.Mutex

	// begun is the first attempt the claim recorded (beginFirstSteps), until
	// runStep uses it or an ending write gives it back (undoBegun).
	begunMu  sync.Mutex
	begun    begunStep
	hasBegun bool

	// ending is set while the execution gives its lease up (finish,
	// release) and stays set once it did: a write that fails for the lease
	// then, such as a heartbeat racing the finish, lost nothing to another
	// worker and is not worth a warning.
	ending atomic.Bool

	// superseded is set when this engine claimed the run again while this
	// execution still ran (see supersede): its writes fail from then on
	// without reaching the database. done is closed once execute returned.
	superseded atomic.Bool
	done       chan struct{}
}

// errSuperseded is the cause that ends an execution superseded by a later
// claim of its run in the same engine.
var errSuperseded = fmt.Errorf("%w: the run was claimed again by this engine", store.ErrLeaseLost)

// supersede ends x, an execution of a run this engine just claimed again,
// and waits until it returned, so that the new claim's execution never
// runs beside it.
//
// A database can hand a run this engine executes back to it: a failover to
// an asynchronous standby that had not received the claim loses it, the
// run is ready again on the new primary, and this engine's claimer takes
// it. The fence is a per-run counter, so the new claim may carry the very
// fence and owner of the lost one, and both executions' writes would then
// pass every lease check: the run would run twice at once, its steps
// twice, and the older execution would write over the newer one's
// record. The older one's in-memory state rests on commits the database
// no longer has, so it is the one to go; the newer one replays from what
// the database holds.
//
// More often the earlier execution gave the run back itself (a release, a
// wait) and is only returning: then its lease had another fence, nothing
// was lost, and the wait is short.
func (x *execution) supersede(by store.Lease) {
	if by == x.lease {
		x.e.log.Warn("run claimed again while this engine still executed an earlier claim of it with the same fence (the database lost that claim, as a failover to a standby that was behind does); ending the earlier execution first",
			"run", x.run.ID, "fence", by.Fence)
	}
	x.superseded.Store(true)
	x.cancelLease(errSuperseded)
	<-x.done
}

// execute drives one claimed run until it settles, waits for its next
// attempt, or loses its lease.
func (e *Engine) execute(run store.Run) {
	def, ok := e.Lookup(flowtype.WorkflowKey{Name: run.Workflow, Version: run.Version})
	leaseCtx, cancelLease := context.WithCancelCause(withRunValues(e.baseCtx, run))
	runCtx, cancelRun := context.WithCancelCause(leaseCtx)
	x := &execution{
		e: e, run: run, def: def, lease: run.Lease(),
		leaseCtx: leaseCtx, cancelLease: cancelLease, runCtx: runCtx, cancelRun: cancelRun,
		done: make(chan struct{}),
	}
	defer close(x.done) // deferred first: runs after every other deferred call
	e.mu.Lock()
	prev := e.active[run.ID]
	e.mu.Unlock()
	if prev != nil {
		prev.supersede(x.lease)
		// The earlier execution forgot its lease as it ended; when the new
		// claim has the same fence and owner, that was this one's.
		e.mu.Lock()
		e.held[run.ID] = x.lease
		e.mu.Unlock()
	}
	x.begun, x.hasBegun = e.takeBegun(run)
	defer cancelLease(nil)
	defer func() {
		e.mu.Lock()
		e.unhold(run.ID, x.lease)
		e.mu.Unlock()
	}()
	if !ok {
		// Claims only select registered versions; this is a registration
		// racing the claim. Give the run back untouched.
		x.release(0, "workflow version not registered here")
		return
	}

	e.mu.Lock()
	e.active[run.ID] = x
	cancelled := e.cancelReq[run.ID] == x.lease
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.active[run.ID] == x {
			delete(e.active, run.ID)
		}
		e.mu.Unlock()
	}()

	stopHeartbeat := x.startHeartbeat()
	defer stopHeartbeat()

	if run.CancelRequested || cancelled {
		cancelRun(flowtype.ErrCancelled)
	}
	if run.Deadline > 0 {
		if left := time.Duration(run.Deadline-e.nowMs()) * time.Millisecond; left <= 0 {
			cancelRun(flowtype.ErrDeadlineExceeded)
		} else {
			timer := time.AfterFunc(left, func() { cancelRun(flowtype.ErrDeadlineExceeded) })
			defer timer.Stop()
		}
	}
	// Steps are written only under a lease, so a run claimed for the first
	// time (fence 1) has none to replay: skip the read.
	var steps []store.Step
	if run.Fence > 1 {
		var err error
		if steps, err = e.store.Reader().StepList(leaseCtx, run.ID); err != nil {
			e.log.Error("load steps", "run", run.ID, "err", err)
			x.release(e.cfg.PollInterval, "could not load steps: "+err.Error())
			return
		}
	}
	rc := newRunContext(x, steps)
	if run.Fence > 1 {
		// A run that continued as new was claimed before.
		ex, err := e.store.Reader().ExecutionGet(leaseCtx, run.ID)
		if err != nil {
			e.log.Error("load execution", "run", run.ID, "err", err)
			x.release(e.cfg.PollInterval, "could not load its execution number: "+err.Error())
			return
		}
		rc.st.execution = ex.Number
	}
	switch run.Status {
	case flowtype.StatusRunning:
		x.forward(rc)
	case flowtype.StatusCompensating:
		x.unwind(rc, false)
	default:
		e.log.Error("claimed run in unexpected status", "run", run.ID, "status", run.Status)
	}
}

// startHeartbeat renews the lease until the returned func is called. A lost
// lease cancels the execution; a cancellation request cancels the run.
func (x *execution) startHeartbeat() (stop func()) {
	done := make(chan struct{})
	finished := beatEvery(x.leaseCtx, done, x.e.cfg.HeartbeatInterval, func() {
		if err := x.writeTx(leaseHeartbeat, false, func(context.Context, store.Tx, int64) error { return nil }); err != nil &&
			!errors.Is(err, store.ErrLeaseLost) {
			x.e.log.Warn("heartbeat", "run", x.run.ID, "err", err)
		}
	})
	return func() { close(done); <-finished }
}

// beatEvery calls beat every interval, on a goroutine of its own, until
// done is closed or ctx ends; the returned channel is closed once it
// stopped.
func beatEvery(ctx context.Context, done <-chan struct{}, interval time.Duration, beat func()) <-chan struct{} {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				// A tick and done can be ready together, as when a beat
				// took longer than the interval (a slow or unreachable
				// database): select picks either, and a beat after done
				// would hold up the execution's end, and the engine's
				// Stop, for one more write.
				select {
				case <-done:
					return
				default:
				}
				beat()
			}
		}
	}()
	return finished
}

// takeBegun returns the attempt of the step key the claim recorded, and
// marks it used, when there is one.
func (x *execution) takeBegun(key store.StepKey) (int, bool) {
	x.begunMu.Lock()
	defer x.begunMu.Unlock()
	if !x.hasBegun || x.begun.key != key {
		return 0, false
	}
	x.hasBegun = false
	return x.begun.attempt, true
}

// undoBegun gives the attempt the claim recorded back in tx when no body
// used it (see the function undoBegun). It leaves it marked unused, so that
// a later write gives it back if this transaction rolls back.
func (x *execution) undoBegun(ctx context.Context, tx store.Tx, why string, now int64) error {
	x.begunMu.Lock()
	b, ok := x.begun, x.hasBegun
	x.begunMu.Unlock()
	if !ok {
		return nil
	}
	return undoBegun(ctx, tx, b, why, now)
}

// checkpoint is a step's completion: its output, and the attempt that
// made it, for its history event.
type checkpoint struct {
	step    store.StepCompleteParams
	attempt int
	// progress is the attempt's last progress, not written yet (see
	// progressSlot.end), recorded before its completion; a checkpoint of
	// progress alone (after a failed attempt) has no step.
	progress *store.Event
	// streams are the attempt's stream writes still pending when its body
	// returned, appended before its completion (stream.go).
	streams stepStreams
}

// progressOnly reports whether c carries only an attempt's last progress.
func (c checkpoint) progressOnly() bool { return c.step.Key.RunID == "" }

// writeCheckpoint records c in tx, with its event dated when the step
// completed.
func (x *execution) writeCheckpoint(ctx context.Context, tx store.Tx, c checkpoint) error {
	if c.progress != nil {
		if err := x.event(ctx, tx, c.step.Now, *c.progress); err != nil {
			return err
		}
	}
	if c.progressOnly() {
		return nil
	}
	if err := x.writeCheckpointStreams(ctx, tx, c); err != nil {
		return err
	}
	if err := tx.StepComplete(ctx, c.step); err != nil {
		return err
	}
	return x.completedEvent(ctx, tx, c)
}

// completedEvent appends the step_completed event of c, dated when the
// step completed, unless c completes the attempt a lean claim began (its
// happy path): reads derive that event from the step's row (derived.go).
// A later attempt's completion is stored, as its start was.
func (x *execution) completedEvent(ctx context.Context, tx store.Tx, c checkpoint) error {
	x.begunMu.Lock()
	b := x.begun
	x.begunMu.Unlock()
	if b.lean && b.key == c.step.Key && b.attempt == c.attempt {
		return nil
	}
	return x.event(ctx, tx, c.step.Now, c.event())
}

// writeCheckpointStreams appends the stream writes c carries, before its
// completion event. The transaction is shared (the run's next write, or a
// batch of outcomes), so a stream closed meanwhile does not fail it.
func (x *execution) writeCheckpointStreams(ctx context.Context, tx store.Tx, c checkpoint) error {
	if len(c.streams.order) == 0 {
		return nil
	}
	key := streamBufferKey{runID: c.step.Key.RunID, step: c.step.Key.Name, occurrence: c.step.Key.Occurrence, attempt: c.attempt}
	return x.writeStepStreams(ctx, tx, key, c.streams, c.step.Now, true)
}

// event is the history event of c, without its run and time.
func (c checkpoint) event() store.Event {
	return store.Event{Kind: flowtype.EventStepCompleted, Step: c.step.Key.Name, Occurrence: c.step.Key.Occurrence, Attempt: c.attempt}
}

// later queues c to commit with the execution's next write transaction.
func (x *execution) later(c checkpoint) {
	x.deferredMu.Lock()
	x.deferred = append(x.deferred, c)
	x.deferredMu.Unlock()
}

// takeDeferred removes and returns the checkpoints waiting for a write.
func (x *execution) takeDeferred() []checkpoint {
	x.deferredMu.Lock()
	defer x.deferredMu.Unlock()
	d := x.deferred
	x.deferred = nil
	return d
}

// restoreDeferred puts back checkpoints whose write rolled back, ahead of
// any queued since, for the next write to carry.
func (x *execution) restoreDeferred(d []checkpoint) {
	if len(d) == 0 {
		return
	}
	x.deferredMu.Lock()
	x.deferred = append(d, x.deferred...)
	x.deferredMu.Unlock()
}

// write runs fn in a write transaction fenced by the execution's lease: the
// transaction first checks the lease (a read: the transaction holds the
// write lock until it commits) and fails with store.ErrLeaseLost if another
// worker took the run over. It also observes cancellation requests, and
// commits the deferred writes first. The lease is extended by the
// heartbeat, not by every write: an update of the run per step would cost
// more than the step's own writes.
func (x *execution) write(fn func(ctx context.Context, tx store.Tx, now int64) error) error {
	return x.writeTx(leaseCheck, false, fn)
}

// writeOnce is write for the transaction a RunTx step's body runs in: the
// store calls fn at most once (store.OnlyOnce), since what the body does
// outside the transaction would repeat with it. A store may still report
// ErrBusy after fn ran (a COMMIT that waited out the busy timeout), which
// write retries: fn must refuse a second call itself (see runStep).
func (x *execution) writeOnce(fn func(ctx context.Context, tx store.Tx, now int64) error) error {
	return x.writeTx(leaseCheck, true, fn)
}

// writeFenced is write for an fn that makes a fenced write itself (e.g.
// RunFinish or RunRelease), whose store.ErrLeaseLost rolls the whole
// transaction back, deferred writes included: the lease needs no check
// first. Cancellation requests are not observed; the writes that use it end
// the execution anyway.
func (x *execution) writeFenced(fn func(ctx context.Context, tx store.Tx, now int64) error) error {
	return x.writeTx(leaseInFn, false, fn)
}

// How a write transaction of an execution proves its lease.
type leaseProof int

const (
	leaseCheck     leaseProof = iota // RunLeaseCheck, a read
	leaseHeartbeat                   // RunHeartbeat, which also extends it
	leaseInFn                        // a fenced write of fn
)

func (x *execution) writeTx(proof leaseProof, once bool, fn func(ctx context.Context, tx store.Tx, now int64) error) error {
	if x.superseded.Load() {
		// The database would take the write: it checks the same fence
		// and owner as the claim that superseded this execution.
		return errSuperseded
	}
	// Writes must land even after the run was cancelled (to record what
	// happened); the fence, not the context, stops a stale writer.
	ctx := context.WithoutCancel(x.leaseCtx)
	if once {
		ctx = store.OnlyOnce(ctx)
	}
	if proof == leaseInFn {
		x.ending.Store(true)
	}
	// The deferred checkpoints ride with the execution's own next write, in
	// the order the body made them. A heartbeat runs beside the body, on
	// its own goroutine: were it to carry them and fail after the run's
	// outcome committed without them (the lease is gone by then), the run
	// would be finished with a step never checkpointed.
	var deferred []checkpoint
	if proof != leaseHeartbeat {
		x.carryMu.Lock()
		deferred = x.takeDeferred()
		if len(deferred) == 0 {
			x.carryMu.Unlock()
		} else {
			defer x.carryMu.Unlock()
		}
	}
	err := x.writeRetryingBusy(ctx, func(tx store.Tx) error {
		now := x.e.nowMs()
		var cancelRequested bool
		var err error
		switch proof {
		case leaseCheck:
			cancelRequested, err = tx.RunLeaseCheck(ctx, x.lease)
		case leaseHeartbeat:
			cancelRequested, err = tx.RunHeartbeat(ctx, x.lease, now+x.e.cfg.LeaseTimeout.Milliseconds(), now)
		}
		if err != nil {
			return err
		}
		if cancelRequested {
			x.cancelRun(flowtype.ErrCancelled)
		}
		for _, c := range deferred {
			if err := x.writeCheckpoint(ctx, tx, c); err != nil {
				return err
			}
		}
		return fn(ctx, tx, now)
	})
	if err != nil {
		// Rolled back with the transaction: keep them for the next one.
		x.restoreDeferred(deferred)
	}
	if err != nil && proof == leaseInFn {
		x.ending.Store(false)
	}
	if errors.Is(err, store.ErrLeaseLost) {
		if !x.ending.Load() {
			x.warnLeaseLost(ctx)
		}
		x.cancelLease(store.ErrLeaseLost)
	}
	return err
}

// writeRetryingBusy is store.Write for the writes of an execution, which
// retries a write that waited out the busy timeout (flowtype.ErrBusy:
// another process held the lock that long) for as long as the execution
// holds its lease. Failing would abort the run and, once its lease expired,
// run its current step again; retrying is safe because every write is
// fenced: if the lease lapsed meanwhile and another worker took the run, the
// write fails with store.ErrLeaseLost instead. Stopping the engine or losing
// the lease ends the retries.
func (x *execution) writeRetryingBusy(ctx context.Context, fn func(store.Tx) error) error {
	if x.superseded.Load() {
		return errSuperseded // see writeTx
	}
	warned := false
	return store.RetryBusy(x.leaseCtx, func() error { return x.e.store.Write(ctx, fn) }, func(err error) {
		if !warned {
			x.e.log.Warn("database locked past the busy timeout; retrying the run's write", "run", x.run.ID, "err", err)
			warned = true
		}
	})
}

// warnLeaseLost logs that a write found the run's lease gone, saying what
// the run's row shows instead: another worker's lease, or none (the lease
// expired and the run was rescued, and waits to be claimed again).
func (x *execution) warnLeaseLost(ctx context.Context) {
	run, err := x.e.store.Reader().RunGet(ctx, x.run.ID)
	switch {
	case err != nil:
		x.e.log.Warn("lease lost; the run's row could not be read", "run", x.run.ID, "fence", x.lease.Fence, "err", err)
	case run.LeaseOwner != "":
		x.e.log.Warn("lease lost; another worker owns the run now", "run", x.run.ID, "fence", x.lease.Fence,
			"owner", run.LeaseOwner, "owner_fence", run.Fence)
	default:
		x.e.log.Warn("lease lost; the lease expired and the run was rescued", "run", x.run.ID, "fence", x.lease.Fence,
			"status", run.Status)
	}
}

func (x *execution) event(ctx context.Context, tx store.Tx, now int64, ev store.Event) error {
	ev.RunID, ev.At = x.run.ID, now
	return tx.EventAppend(ctx, ev)
}

// release gives the lease back; the run is due again after delay.
func (x *execution) release(delay time.Duration, why string) {
	x.releaseUntil(x.e.nowMs()+delay.Milliseconds(), false, why)
}

// releaseUntil gives the lease back; the run is due again at runAt (Unix
// ms, capped at its deadline), or at once if it was woken meanwhile. A
// waiting run waits for a timer, a signal or a child; otherwise it waits
// for the next attempt of a step.
func (x *execution) releaseUntil(runAt int64, waiting bool, why string) {
	if x.run.Deadline > 0 && runAt > x.run.Deadline {
		runAt = x.run.Deadline
	}
	kind := flowtype.EventRunReleased
	if waiting {
		kind = flowtype.EventRunWaiting
	}
	var now int64
	err := x.writeRetried("release", func(ctx context.Context, tx store.Tx, at int64) error {
		now = at
		p := store.RunReleaseParams{RunAt: runAt, Waiting: waiting, WakeSeq: x.run.WakeSeq, Now: now}
		if err := tx.RunRelease(ctx, x.lease, p); err != nil {
			return err
		}
		if err := x.undoBegun(ctx, tx, why, now); err != nil {
			return err
		}
		return x.event(ctx, tx, now, store.Event{Kind: kind, Detail: why})
	})
	if err != nil {
		if !errors.Is(err, store.ErrLeaseLost) {
			x.gaveUp("release", err)
		}
		return
	}
	// Polling finds the run when it is due; a timer only helps runs due
	// sooner than the next poll, and would pile up for long waits.
	if delay := time.Duration(runAt-now) * time.Millisecond; delay <= x.e.cfg.PollInterval {
		x.e.wakeAfter(x.run.Queue, delay)
	}
}

// interrupted ends an execution whose write failed, as abort does for the
// workflow body: unless the lease is gone (nothing is ours to write), the
// run is given back, to resume from its last record at the next poll. A
// write that fails because the database went away for a moment (a
// restart, a broken connection) would otherwise leave the run leased to
// this engine, with no execution and no heartbeat, until the lease
// expired and another worker rescued it.
func (x *execution) interrupted(what string, err error) {
	if errors.Is(err, store.ErrLeaseLost) {
		return
	}
	x.e.log.Error(what+"; giving the run back", "run", x.run.ID, "err", err)
	x.release(x.e.cfg.PollInterval, what+" failed: "+err.Error())
}

// heldLeases returns the leases of the runs this engine claimed and has not
// finished executing.
func (e *Engine) heldLeases() []store.Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	ls := make([]store.Lease, 0, len(e.held))
	for _, l := range e.held {
		ls = append(ls, l)
	}
	return ls
}

// cancelActive cancels the contexts of the runs of ids that this engine is
// executing, as Cancel does for one run.
//
// A run claimed here whose execution has not begun yet (its claim
// committed, its goroutine not yet registered in active) read its
// cancellation flag with the claim, before the request: it is marked in
// cancelReq, and its execution cancels itself as it begins, rather than
// at its first heartbeat (a third of the lease timeout later).
func (e *Engine) cancelActive(ids []string) {
	var xs []*execution
	e.mu.Lock()
	for _, id := range ids {
		if x := e.active[id]; x != nil {
			xs = append(xs, x)
		} else if l, ok := e.held[id]; ok {
			e.cancelReq[id] = l
		}
	}
	e.mu.Unlock()
	for _, x := range xs {
		x.cancelRun(flowtype.ErrCancelled)
	}
}

// expireDeadlines cancels the runs executing here whose deadline the engine
// clock has passed. Their deadline timers count real time, so this is what
// cancels them when the clock jumps, as a test's manual clock does.
func (e *Engine) expireDeadlines() {
	now := e.nowMs()
	var xs []*execution
	e.mu.Lock()
	for _, x := range e.active {
		if x.run.Deadline > 0 && now >= x.run.Deadline {
			xs = append(xs, x)
		}
	}
	e.mu.Unlock()
	for _, x := range xs {
		x.cancelRun(flowtype.ErrDeadlineExceeded)
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// callWithRecover turns a panic in user code into an error.
func callWithRecover(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", what, r)
		}
	}()
	return fn()
}
