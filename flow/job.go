package flow

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Job is a one-step workflow for code that only needs a queue: Enqueue
// records a run of it, and an engine working its queue calls Handler with
// the arguments, retrying per the policy until it succeeds or the attempts
// are exhausted. A job that failed for good is a dead letter (see
// DeadLetters and Requeue).
//
// A job is a Workflow[Args, struct{}] named Name (see Workflow) whose body
// calls one step, also named Name, that runs Handler; so it is durable,
// retried, cancellable and inspectable like any run, and Workflow returns
// it for the functions that take a workflow (Lookup, Schedule,
// StartChild…). Its version is always 1: keep Args backward compatible
// (they are stored as JSON), or use a new Name for incompatible ones.
type Job[Args any] struct {
	// Name identifies the job, persisted: never derive it from a Go type
	// name.
	Name string
	// Queue is the queue its runs wait in unless EnqueueOptions says
	// otherwise; default DefaultQueue.
	Queue string
	// Priority orders ready runs of a queue, higher first, unless
	// EnqueueOptions says otherwise; default 0.
	Priority int
	// MaxAttempts is how many times Handler is called at most, the first
	// included; zero takes Retry's, or Config.DefaultRetry's. An attempt
	// that was interrupted (its worker crashed, stopped or lost the lease)
	// counts: a run rescued after its last attempt fails for good instead
	// of calling Handler again.
	MaxAttempts int
	// Retry is the retry policy; nil takes Config.DefaultRetry. MaxAttempts,
	// when set, overrides its MaxAttempts.
	Retry *RetryPolicy
	// Timeout bounds each attempt through its context; zero means no bound.
	Timeout time.Duration
	// RateLimit bounds how many attempts of the job (retries included)
	// begin per period across engines, as Step.RateLimit does; a queue's
	// rate (QueueLimits.Rate) counts first claims only.
	RateLimit *StepRateLimit
	// Record is how much of each run's history is stored: FullRecord (the
	// zero value) stores every event; LeanRecord stores a run that
	// succeeds at its first claim in fewer rows (see LeanRecord).
	Record JobRecord
	// Handler does the work. It may run more than once (a retry, or a crash
	// after it returned but before its success was recorded), so make its
	// side effects idempotent: IdempotencyKey(ctx) and Attempt(ctx) work in
	// it. Returning Permanent(err) stops the retries.
	Handler func(ctx context.Context, args Args) error
}

// JobRecord is how much of a job run's history is stored (Job.Record).
type JobRecord int

const (
	// FullRecord stores every event of the run's history, as for a
	// workflow.
	FullRecord JobRecord = iota
	// LeanRecord leaves out of the stored history the three events of
	// the happy path that the run's and its step's records already hold:
	// the first claim's run_claimed and step_started (the claim that
	// begins the first attempt) and that attempt's step_completed. A drained
	// job then writes 5 rows instead of 8. History, Inspect, the dashboard,
	// the CLI and time travel derive them from the records (with negative
	// Event IDs), so they show the same history; the change feed, which
	// reads only what is stored, sees the run start and end and every
	// failure, retry, rescue, later claim and cancellation between. A job
	// with a RateLimit keeps its full record. See docs/jobs.md.
	LeanRecord
)

// jobVersion is the version of every job's workflow.
const jobVersion = 1

func (j Job[Args]) validate() error {
	if err := engine.CheckName("job", j.Name); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	if j.Queue != "" {
		if err := engine.CheckName("queue", j.Queue); err != nil {
			return fmt.Errorf("job %s: %w", j.Name, err)
		}
	}
	switch {
	case j.Handler == nil:
		return fmt.Errorf("job %s: Handler is nil", j.Name)
	case j.MaxAttempts < 0:
		return fmt.Errorf("job %s: negative MaxAttempts %d", j.Name, j.MaxAttempts)
	case j.Timeout < 0:
		return fmt.Errorf("job %s: negative Timeout %s", j.Name, j.Timeout)
	case j.Record != FullRecord && j.Record != LeanRecord:
		return fmt.Errorf("job %s: unknown Record %d (FullRecord or LeanRecord)", j.Name, j.Record)
	}
	if j.RateLimit != nil {
		if err := j.RateLimit.Validate(j.Name); err != nil {
			return fmt.Errorf("job %s: %w", j.Name, err)
		}
	}
	return nil
}

// Workflow returns the one-step workflow that runs the job.
func (j Job[Args]) Workflow() Workflow[Args, struct{}] {
	var retry *RetryPolicy
	if j.Retry != nil || j.MaxAttempts > 0 {
		r := RetryPolicy{}
		if j.Retry != nil {
			r = *j.Retry
		}
		if j.MaxAttempts > 0 {
			r.MaxAttempts = j.MaxAttempts
		}
		retry = &r
	}
	// The claim begins a job's attempt in its own statement (firstStep),
	// which takes nothing from a rate limiter: a rate-limited job begins
	// its attempts as a workflow's steps do.
	first := j.Name
	if j.RateLimit != nil {
		first = ""
	}
	return Workflow[Args, struct{}]{
		Name:      j.Name,
		Version:   jobVersion,
		firstStep: first,
		leanFirst: j.Record == LeanRecord,
		Run: func(wc Context, args Args) (struct{}, error) {
			// The step's recorded input is empty: the arguments are the
			// run's input already, and the body hands them to the step.
			step := Step[struct{}, struct{}]{
				Name:      j.Name,
				Retry:     retry,
				Timeout:   j.Timeout,
				RateLimit: j.RateLimit,
				Run: func(ctx context.Context, _ struct{}) (struct{}, error) {
					return struct{}{}, j.Handler(ctx, args)
				},
			}
			_, err := Do(wc, step, struct{}{})
			return struct{}{}, err
		},
	}
}

// RegisterJob adds a job to the engine, or panics if it is invalid or
// already registered. See RegisterJobSafely for an error instead.
func RegisterJob[Args any](e *Engine, job Job[Args]) {
	if err := RegisterJobSafely(e, job); err != nil {
		panic(err)
	}
}

// RegisterJobSafely is RegisterJob returning an error instead of panicking.
func RegisterJobSafely[Args any](e *Engine, job Job[Args]) error {
	if err := job.validate(); err != nil {
		return fmt.Errorf("register %w", err)
	}
	return RegisterSafely(e, job.Workflow())
}

// EnqueueOptions tune one run of a job. A nil *EnqueueOptions means the
// defaults.
//
// # Unique jobs
//
// UniqueKey, UniqueByArgs and UniqueByQueue make a job run unique, on the
// model of River's UniqueOpts. They form the run's unique key: UniqueKey,
// and with UniqueByArgs the SHA-256 of the arguments' JSON encoding
// ("args:<hex>"), and with UniqueByQueue the run's queue ("queue:<name>"),
// joined by "#" ("<UniqueKey>#args:<hex>#queue:<name>"). Keys are compared
// within the job (its Name): across its queues, or, with UniqueByQueue,
// within the run's queue only.
//
// While a run of the job holds the key, enqueueing the job with the same
// key returns that run (Existing reports true) and records nothing. Which
// runs hold the key:
//
//   - An unfinished (pending, running, waiting, compensating or suspended)
//     run always holds it.
//   - A finished (completed, failed or cancelled) run holds it when its
//     state is in UniqueStates. River's default, where a completed run keeps
//     its key but a failed or cancelled one frees it, is
//     UniqueStatesExcept(StatusFailed, StatusCancelled). UniqueStates must
//     list every unfinished state; an unknown state is an error naming it.
//   - With UniquePeriod, a finished run holds it only until that long after
//     it was enqueued: in the finished states of UniqueStates, or, when
//     UniqueStates is empty, in any finished state.
//
// So the zero UniqueStates keeps the original behaviour: without a period,
// only unfinished runs hold the key, and the next enqueue after the run
// finished (completed, failed or cancelled) starts a new run; with one, the
// run holds it for the period whatever its state, even if it completed or
// failed. The states and the period are properties of the run that takes
// the key, not of later enqueues: they are returned the holder whatever
// they ask for. (River counts periods from fixed boundaries, e.g. whole
// hours; here they count from the enqueue that took the key.) Deleting a
// finished run (DeleteRun, retention, PurgeDead) frees its key.
//
// The database enforces all of it, inside the insert, so two processes
// enqueueing the same key at once start one run. A RunID that exists wins
// over the key: its run is returned whatever its key; otherwise the run
// returned for a taken key has the holder's ID, not RunID. A requeued dead
// letter passes its key (and its unique states) to the new run (see
// Engine.Requeue).
type EnqueueOptions struct {
	// RunID identifies the run and is its idempotency key: enqueueing an
	// ID that exists returns the existing run. Default: a random ID.
	RunID string
	// Queue overrides Job.Queue.
	Queue string
	// Priority, when not zero, overrides Job.Priority.
	Priority int
	// Delay postpones the run's first attempt.
	Delay time.Duration
	// RunAt sets the run's first attempt time; it excludes Delay.
	RunAt time.Time
	// Deadline, when set, cancels the run once the engine clock passes it.
	Deadline time.Time
	// ConcurrencyKey groups the run with the others of its queue that share
	// it, for per-key limits and fair claims; see StartOptions.
	ConcurrencyKey string
	// UniqueKey makes the run unique among the job's runs with the same key.
	UniqueKey string
	// UniqueByArgs makes the run unique among the job's runs with equal
	// arguments (and the same UniqueKey, if any).
	UniqueByArgs bool
	// UniqueByQueue compares unique keys within the run's queue only: runs
	// of the job in other queues do not hold it. Alone, it makes the run
	// unique in its queue.
	UniqueByQueue bool
	// UniqueStates are the states in which a run holds its unique key: every
	// unfinished state, plus the finished ones that keep the key (see
	// UniqueStatesExcept). Empty: unfinished states, plus every finished
	// state within UniquePeriod. It needs UniqueKey, UniqueByArgs or
	// UniqueByQueue.
	UniqueStates []RunStatus
	// UniquePeriod bounds how long after the enqueue a finished run holds
	// its unique key (see UniqueStates); unfinished runs hold it whatever
	// the period. It needs UniqueKey, UniqueByArgs or UniqueByQueue.
	UniquePeriod time.Duration
	// OnDuplicate says what an enqueue whose unique key another run holds
	// does: ReturnExisting (the zero value) returns the holder, as
	// described above; RefuseDuplicate fails with a *DuplicateError naming
	// it, recording nothing. A RunID that exists returns its run under
	// either policy. It needs UniqueKey, UniqueByArgs or UniqueByQueue.
	OnDuplicate DuplicatePolicy
	// Debounce, when set, merges the enqueue into the job's pending run
	// with the same debounce key, if there is one (see Debounce and
	// StartOptions.Debounce). It excludes RunID, Delay, RunAt and the
	// unique options, and EnqueueTx and EnqueueMany refuse it.
	Debounce *Debounce
}

// UniqueStatesExcept returns every run state but the ones named, for
// EnqueueOptions.UniqueStates: UniqueStatesExcept(StatusFailed,
// StatusCancelled) is River's default, where completed runs keep their
// unique key and failed or cancelled ones free it.
func UniqueStatesExcept(states ...RunStatus) []RunStatus {
	var out []RunStatus
	for _, s := range store.AllStates() {
		if !slices.Contains(states, s) {
			out = append(out, s)
		}
	}
	return out
}

// Enqueue records a run of job with args and returns a handle on it; see
// EnqueueOptions for unique jobs. The run is durable when Enqueue returns.
// Result on the handle returns a nil error once the job succeeded, and a
// *RolledBackError, whose Cause says how the last attempt failed, once it
// failed for good (it is then a dead letter).
func Enqueue[Args any](ctx context.Context, e *Engine, job Job[Args], args Args, opts *EnqueueOptions) (*Run[struct{}], error) {
	p, err := enqueueParams(e, job, args, opts)
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
	return &Run[struct{}]{e: inner, id: st.Run.ID, existing: st.Existing}, nil
}

// EnqueueTx records a run of job inside the caller's transaction on the
// engine's database: the run exists only if tx commits. Unique keys are
// checked within tx. Workers see the run at their next poll after the
// commit, or at the commit on a backend that sends wakes (PostgreSQL).
func EnqueueTx[Args any](ctx context.Context, e *Engine, tx *sql.Tx, job Job[Args], args Args, opts *EnqueueOptions) (*Run[struct{}], error) {
	p, err := enqueueParams(e, job, args, opts)
	if err != nil {
		return nil, err
	}
	inner, err := e.route.forTx("enqueue job "+job.Name+" in the caller's transaction", &p)
	if err != nil {
		return nil, err
	}
	st, err := inner.core.StartRunTx(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	return &Run[struct{}]{e: inner, id: st.Run.ID, existing: st.Existing}, nil
}

func enqueueParams[Args any](e *Engine, job Job[Args], args Args, opts *EnqueueOptions) (engine.StartParams, error) {
	if opts == nil {
		opts = &EnqueueOptions{}
	}
	if err := job.validate(); err != nil {
		return engine.StartParams{}, fmt.Errorf("enqueue %w", err)
	}
	keyed := opts.UniqueKey != "" || opts.UniqueByArgs || opts.UniqueByQueue
	switch {
	case opts.UniquePeriod < 0:
		return engine.StartParams{}, fmt.Errorf("enqueue job %s: negative UniquePeriod %s", job.Name, opts.UniquePeriod)
	case opts.UniquePeriod > 0 && !keyed:
		return engine.StartParams{}, fmt.Errorf("enqueue job %s: UniquePeriod needs UniqueKey, UniqueByArgs or UniqueByQueue", job.Name)
	case len(opts.UniqueStates) > 0 && !keyed:
		return engine.StartParams{}, fmt.Errorf("enqueue job %s: UniqueStates needs UniqueKey, UniqueByArgs or UniqueByQueue", job.Name)
	case opts.OnDuplicate == RefuseDuplicate && !keyed:
		return engine.StartParams{}, fmt.Errorf("enqueue job %s: RefuseDuplicate needs UniqueKey, UniqueByArgs or UniqueByQueue", job.Name)
	}
	if err := engine.ValidUniqueStates(opts.UniqueStates); err != nil {
		return engine.StartParams{}, fmt.Errorf("enqueue job %s: UniqueStates: %w", job.Name, err)
	}
	// The run ID, the concurrency key and the debounce key are checked
	// by startParams; the unique key before it is joined with the rest.
	if err := checkKeys("unique key", opts.UniqueKey); err != nil {
		return engine.StartParams{}, fmt.Errorf("enqueue job %s: %w", job.Name, err)
	}
	queue := job.Queue
	if opts.Queue != "" {
		queue = opts.Queue
	}
	priority := job.Priority
	if opts.Priority != 0 {
		priority = opts.Priority
	}
	p, err := startParams(e, job.Workflow(), args, &StartOptions{
		RunID: opts.RunID, Queue: queue, Priority: priority, Delay: opts.Delay, RunAt: opts.RunAt, Deadline: opts.Deadline,
		ConcurrencyKey: opts.ConcurrencyKey, Debounce: opts.Debounce,
	})
	if err != nil {
		return engine.StartParams{}, err
	}
	p.UniqueKey = uniqueKey(opts.UniqueKey, opts.UniqueByArgs, p.Input)
	if opts.UniqueByQueue {
		p.UniqueKey = joinKey(p.UniqueKey, "queue:"+cmp.Or(p.Queue, DefaultQueue))
	}
	p.UniqueStates = slices.Clone(opts.UniqueStates)
	p.UniquePeriod = opts.UniquePeriod
	p.OnDuplicate = opts.OnDuplicate
	return p, nil
}

// joinKey appends part to a unique key.
func joinKey(key, part string) string {
	if key == "" {
		return part
	}
	return key + "#" + part
}

// uniqueKey returns the unique key of a run: key, or with byArgs the hash
// of the encoded arguments, or both.
func uniqueKey(key string, byArgs bool, input []byte) string {
	if !byArgs {
		return key
	}
	sum := sha256.Sum256(input)
	h := "args:" + hex.EncodeToString(sum[:])
	if key == "" {
		return h
	}
	return key + "#" + h
}
