package store

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Run is a stored run. Times are Unix milliseconds.
type Run struct {
	ID              string
	Workflow        string
	Version         int
	Queue           string
	Priority        int
	Status          flowtype.RunStatus
	Input           []byte
	Output          []byte
	Error           string
	Reason          string
	CancelRequested bool
	RunAt           int64
	Deadline        int64  // zero: none
	ParentID        string // the run that started this one as a child
	WakeSeq         int64
	Fence           int64
	LeaseOwner      string
	LeaseExpiresAt  int64
	CreatedAt       int64
	UpdatedAt       int64
	FinishedAt      int64
	UniqueKey       string // empty: none
	StartedAt       int64  // first claim; zero until then
	RequeuedFrom    string // the dead letter this run requeues
	RequeuedAs      string // the run that requeued this dead letter
	StartOptions           // timeout, detachment, context values, concurrency key
}

// Lease returns the lease the run was claimed with.
func (r Run) Lease() Lease { return Lease{RunID: r.ID, Owner: r.LeaseOwner, Fence: r.Fence} }

// Lease identifies one claim of a run: the owner and the fence token the
// claim produced. Writes made under a lease apply only while it is current.
type Lease struct {
	RunID string
	Owner string
	Fence int64
}

// UnrunnableCount counts ready runs of a workflow version a process lacks.
type UnrunnableCount struct {
	Workflow flowtype.WorkflowKey
	Runs     int64
}

// RescuedRun is a run whose expired lease the rescuer removed.
type RescuedRun struct {
	ID             string
	LeaseExpiresAt int64
	Fence          int64
}

// RunInsertParams describes a new run.
type RunInsertParams struct {
	ID       string
	Workflow flowtype.WorkflowKey
	Queue    string
	Priority int
	Input    []byte
	RunAt    int64
	Deadline int64  // zero: none
	ParentID string // empty: not a child
	// UniqueKey, when set, makes the insert do nothing while a run of the
	// workflow holds the same key (see QueueReader.RunGetKeyHolder), or a
	// hold of it is current.
	UniqueKey string
	// UniqueStates are the states in which the run holds UniqueKey for
	// good; nil means the unfinished ones (pending, running, waiting,
	// compensating, suspended), which it must include.
	UniqueStates []flowtype.RunStatus
	// StartOptions, when any is set, are recorded with the run.
	StartOptions
	Now int64
}

// RunReleaseParams says when a released run is due again.
type RunReleaseParams struct {
	RunAt   int64
	Waiting bool  // waiting for a timer, signal or child (else pending)
	WakeSeq int64 // the run's wake_seq when the worker claimed it
	Now     int64
}

// RunClaimParams selects runs to lease.
type RunClaimParams struct {
	Queue          string
	Known          []flowtype.WorkflowKey
	Owner          string
	Max            int
	Now            int64
	LeaseExpiresAt int64
}

// Claimer is implemented by an adapter that can make a whole claim one
// statement, committed on its own: the leases RunClaim takes, the first
// attempts the engine records for fresh runs (StepBeginMany), and the
// events of both (run_claimed for every run, then step_started for every
// attempt, in claim order, at p.Now). A claim in Write takes six round
// trips on PostgreSQL for the same (BEGIN, the queue's priorities, the
// claim, the attempts, the events, COMMIT). The engine claims through it
// when the store has it, and through RunClaim in Write otherwise.
type Claimer interface {
	ClaimAndBegin(ctx context.Context, p ClaimAndBeginParams) ([]ClaimedRun, error)
}

// Starter is implemented by an adapter that can make a whole start of a
// run one statement, committed on its own: RunInsert of p and EventAppend
// of e (its run_started event, of run p.ID; its At, Kind and Detail are
// recorded), where a start in Write takes four round trips on PostgreSQL
// (BEGIN, the run, its event, COMMIT). It is for a run
// without a unique key (p.UniqueKey is empty: a key needs its holds read
// and written), and it reports false, having written nothing, when p.ID is
// taken. The store wakes the run's queue once it committed, as after a
// Write. The engine starts through it a run no caller transaction holds
// and this engine does not claim at once (no free slot of the queue).
type Starter interface {
	StartAlone(ctx context.Context, p RunInsertParams, e Event) (inserted bool, err error)
}

// ClaimAndBeginParams is a claim, and the first step of each workflow
// version that declares one (of versions not in Known, none is claimed).
type ClaimAndBeginParams struct {
	RunClaimParams
	FirstSteps []FirstStep
}

// FirstStep is the step every run of Workflow calls first. A claim begins
// its first attempt (occurrence 0, position 0, attempt 1, input Input) for
// each run it leases for the first time (fence 1) that is running, has no
// cancellation requested and is not past its deadline: the runs whose
// execution would begin that step as its first write.
type FirstStep struct {
	Workflow flowtype.WorkflowKey
	Name     string
	Input    []byte
	// Lean leaves out the run_claimed and step_started events of the runs
	// whose first attempt the claim begins (the engine's lean record:
	// reads derive them); the other runs' events are appended as always.
	Lean bool
}

// ClaimedRun is a run a claim leased. Begun names the step whose first
// attempt the claim began, or is empty.
type ClaimedRun struct {
	Run
	Begun string
}

// RunFinishParams records the outcome of a run. FinishedAt is zero for a
// suspended run, which is not finished.
type RunFinishParams struct {
	Status     flowtype.RunStatus
	Output     []byte
	Error      string
	Reason     string
	FinishedAt int64
	Now        int64
}

// RunFinishItem is one run of RunFinishMany: the outcome RunFinish would
// record under Lease, and the step checkpoint that commits with it, if
// any (the execution's last step, whose checkpoint rides with the
// outcome).
type RunFinishItem struct {
	Lease  Lease
	Finish RunFinishParams
	Step   *StepCompleteParams
}

// RunSetStatusParams is a guarded state change of an unleased run.
type RunSetStatusParams struct {
	ID         string
	Expected   flowtype.RunStatus
	Status     flowtype.RunStatus
	Reason     string
	RunAt      int64
	FinishedAt int64
	Now        int64
}

// RunListParams filters runs; empty fields match everything.
type RunListParams struct {
	Status   flowtype.RunStatus
	Workflow string
	Queue    string
	Since    int64 // created at or after, Unix ms; zero: no bound
	Before   int64 // created before, Unix ms; zero: no bound
	// IDPrefix matches the runs whose ID starts with it.
	IDPrefix string
	// ErrorText matches the runs whose error or reason holds it, ignoring
	// ASCII case.
	ErrorText string
	// InputField and InputValue match the runs whose input is a JSON
	// object with the top-level field InputField, whose text is
	// InputValue: a string's own text, a number as written, true, false
	// or null. InputField must hold no quote or backslash.
	InputField, InputValue string
	Limit                  int
}

// UnfinishedStates returns the states of an unfinished run, in which a run
// with a unique key always holds it.
func UnfinishedStates() []flowtype.RunStatus {
	return []flowtype.RunStatus{flowtype.StatusPending, flowtype.StatusRunning, flowtype.StatusWaiting, flowtype.StatusCompensating, flowtype.StatusSuspended}
}

// AllStates returns the states of a run, in lifecycle order.
func AllStates() []flowtype.RunStatus {
	return []flowtype.RunStatus{flowtype.StatusPending, flowtype.StatusRunning, flowtype.StatusWaiting, flowtype.StatusCompensating, flowtype.StatusSuspended, flowtype.StatusCompleted, flowtype.StatusFailed, flowtype.StatusCancelled}
}

// RunReader reads runs.
type RunReader interface {
	RunGet(ctx context.Context, id string) (Run, error)
	RunList(ctx context.Context, p RunListParams) ([]Run, error)
	RunCountByStatus(ctx context.Context) (map[flowtype.RunStatus]int64, error)
	RunCountUnrunnable(ctx context.Context, known []flowtype.WorkflowKey) ([]UnrunnableCount, error)
}

// RunTx writes runs inside a write transaction: their insertion, the
// leases workers claim them with, and their state changes. Methods that
// take a Lease are fenced: they return ErrLeaseLost when the lease no
// longer belongs to the caller.
type RunTx interface {
	// RunInsert inserts a pending run; it reports false (changing nothing)
	// when a run with that ID already exists, or when p.UniqueKey is taken
	// (see QueueReader).
	RunInsert(ctx context.Context, p RunInsertParams) (bool, error)
	// RunInsertMany inserts the runs of ps in order, each as RunInsert
	// would, in a few statements rather than one per run, and reports for
	// each whether it was inserted. A run is skipped, changing nothing for
	// it, for the reasons RunInsert reports false, which include an ID or a
	// unique key an earlier run of ps took. It writes nothing when it
	// returns an error.
	RunInsertMany(ctx context.Context, ps []RunInsertParams) ([]bool, error)
	RunClaim(ctx context.Context, p RunClaimParams) ([]Run, error)
	// RunHeartbeat extends a lease and reports whether cancellation of the
	// run was requested.
	RunHeartbeat(ctx context.Context, l Lease, expiresAt, now int64) (cancelRequested bool, err error)
	// RunLeaseCheck proves, without writing, that the lease still belongs
	// to the caller (until the transaction commits), and reports whether
	// cancellation of the run was requested.
	RunLeaseCheck(ctx context.Context, l Lease) (cancelRequested bool, err error)
	RunStartCompensating(ctx context.Context, l Lease, errMsg string, now int64) error
	// RunRelease gives the lease back; the run is due again at p.RunAt, or
	// at once if it was woken after the worker read p.WakeSeq.
	RunRelease(ctx context.Context, l Lease, p RunReleaseParams) error
	// RunWake tells an unfinished run that something it may wait for
	// happened; it reports false for a finished or unknown run.
	RunWake(ctx context.Context, id string, now int64) (bool, error)
	// RunCancelChildren requests cancellation of the unfinished children of
	// a run and returns their IDs.
	RunCancelChildren(ctx context.Context, parentID string, now int64) ([]string, error)
	RunFinish(ctx context.Context, l Lease, p RunFinishParams) error
	// RunFinishMany records the outcomes of many runs at once, in set-based
	// statements where the adapter has them: each item as RunFinish and then
	// StepComplete of its Step would record it, the lease checked on each
	// run's own row. A run whose lease is lost is left untouched, its step
	// with it, and its index is returned in lost; the others are recorded.
	// Any other failure (a Step that is not running: flowtype.ErrConflict)
	// fails the call, and the caller rolls the transaction back.
	RunFinishMany(ctx context.Context, items []RunFinishItem) (lost []int, err error)
	RunRescue(ctx context.Context, now int64, limit int) ([]RescuedRun, error)
	// RunCancelIdle cancels, at once and with error errMsg, a run that no
	// worker executes (pending or waiting, unleased) and that has no
	// completed step with a compensation; it reports false, changing
	// nothing, for any other run.
	RunCancelIdle(ctx context.Context, id, errMsg string, now int64) (bool, error)
	// RunCancelToUnwind moves a run that no worker executes (pending or
	// waiting, unleased) to compensating with its cancellation requested,
	// due now; it reports false, changing nothing, for any other run.
	RunCancelToUnwind(ctx context.Context, id, errMsg string, now int64) (bool, error)
	// RunGetForUpdate reads a run as RunGet does and holds it until the
	// transaction ends, for a write whose next statements depend on what
	// it read: Cancel decides between cancelling a run no worker executes
	// and asking the worker that does, and a claim committed between its
	// read and its guarded update would make the update find the run
	// changed. SQLite's write lock holds every row already; on PostgreSQL
	// the row lock keeps claims (FOR UPDATE SKIP LOCKED) off the run until
	// the commit, and a claim that locked it first is waited for, and the
	// claimed row returned. flowtype.ErrRunNotFound for an unknown run.
	RunGetForUpdate(ctx context.Context, id string) (Run, error)
	// RunRequestCancel marks an unfinished run for cancellation and reports
	// false when the run is not pending, running or compensating.
	RunRequestCancel(ctx context.Context, id string, now int64) (bool, error)
	// RunSetStatus moves an unleased run from expected to status, or returns
	// flowtype.ErrConflict.
	RunSetStatus(ctx context.Context, p RunSetStatusParams) error
}
