package store

import "context"

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
	// returns ErrConflict when the step is not running.
	StepSnooze(ctx context.Context, p StepSnoozeParams) error
}
