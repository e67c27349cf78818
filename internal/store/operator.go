package store

import (
	"context"
	"strconv"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// The operator and handler side of the store: deleting one finished run,
// making a delayed run due now, and snoozing a step.

// StepSnoozeParams records an attempt of a step that snoozed it: the step is
// retried later and the attempt does not count.
type StepSnoozeParams struct {
	Key    StepKey
	Detail string // why, e.g. "snoozed for 5s"
	Now    int64
}

// OperatorTx writes the operator actions on one run and the snoozes of
// steps inside a write transaction.
type OperatorTx interface {
	// RunDeleteOne deletes the finished (completed, failed or cancelled) run
	// id with its steps, events, signals and unique holds, and reports
	// false, changing nothing, when id is unknown, unfinished, or the child
	// of an unfinished parent (which may still read its outcome).
	RunDeleteOne(ctx context.Context, id string) (bool, error)
	// RunMakeDue makes the pending, unleased run id due at now (a delayed
	// run, or one waiting out a retry backoff), and reports false,
	// changing nothing, for any other run or one due already.
	RunMakeDue(ctx context.Context, id string, now int64) (bool, error)
	// StepSnooze records that the running attempt of a step snoozed it: the
	// step is retrying again and its attempt count goes back to what it was
	// before StepBegin, so the next attempt gets the same number. It
	// returns flowtype.ErrConflict when the step is not running.
	StepSnooze(ctx context.Context, p StepSnoozeParams) error
}

// The operator actions that move a run back in its history or in the
// queue (runops.sql): a new due time, a reset in place, a fork. Each guard
// is a compare-and-set on the run's status and claim fence, as the
// engine's own state changes are, so that an operator's write racing a
// claim either applies before it (and the claim sees it) or does nothing.

// RunRescheduleParams gives the pending run ID, as read at claim Fence, a
// new due time.
type RunRescheduleParams struct {
	ID    string
	Fence int64
	RunAt int64
	Now   int64
}

// RunResetParams puts the unleased run ID, as read in state Expected at
// claim Fence, back to pending and due at Now, with no outcome.
type RunResetParams struct {
	ID       string
	Expected flowtype.RunStatus
	Fence    int64
	Deadline int64 // zero: none
	Now      int64
}

// RunForkParams inserts run ID as a pending copy of run FromID.
type RunForkParams struct {
	FromID string
	ID     string
	Now    int64
}

// RunOpsTx writes resets, forks and new due times inside a write
// transaction. Calls are named "name#occurrence" (StepKey.Call).
type RunOpsTx interface {
	// RunReschedule makes a pending, unleased run due at RunAt and reports
	// false, changing nothing, when the run is unknown, not pending, leased
	// or no longer at Fence.
	RunReschedule(ctx context.Context, p RunRescheduleParams) (bool, error)
	// RunReset puts an unleased run that is still Expected at Fence, and
	// not a requeued dead letter, back to pending, due at Now, with no
	// output, error, reason, finish time or cancellation request, and the
	// given deadline; it reports false, changing nothing, otherwise. Its
	// step records are left to StepDiscard and StepCompensationClear.
	RunReset(ctx context.Context, p RunResetParams) (bool, error)
	// StepDiscard deletes the step records of runID named in calls and
	// returns how many it deleted.
	StepDiscard(ctx context.Context, runID string, calls []string) (int64, error)
	// StepCompensationClear sets the compensation of every step of runID
	// back to none, with no attempts or error.
	StepCompensationClear(ctx context.Context, runID string) error
	// SignalRedeliver makes the signals of runID that the waits (the
	// StepKey.String of receives) received unreceived again, and returns
	// how many.
	SignalRedeliver(ctx context.Context, runID string, waits []string) (int64, error)
	// RunForkInsert inserts run ID as a pending copy of FromID (same
	// workflow version, queue, priority and input; no parent, no unique
	// key; the deadline moved as RunRequeue moves it), due at Now, with
	// fence 1 so that its first claim reads its steps. It reports false,
	// inserting nothing, when FromID is unknown or ID taken.
	RunForkInsert(ctx context.Context, p RunForkParams) (bool, error)
	// StepCopy copies the step records of fromID named in calls to toID, as
	// they are but with no compensation, and returns how many it copied.
	StepCopy(ctx context.Context, fromID, toID string, calls []string) (int64, error)
}

// Call names the step occurrence k within its run: "name#occurrence", the
// form RunOpsTx takes and the CLI prints.
func (k StepKey) Call() string { return k.Name + "#" + strconv.Itoa(k.Occurrence) }
