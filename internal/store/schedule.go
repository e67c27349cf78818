package store

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// Schedule is a stored cron schedule. Times are Unix milliseconds.
type Schedule struct {
	Name     string
	Workflow flowtype.WorkflowKey
	Queue    string
	Priority int
	Input    []byte
	Spec     string
	CatchUp  flowtype.CatchUp
	Paused   bool
	// NextAt is the earliest slot not yet handled.
	NextAt int64
	// LastSlot is the most recent slot a run was started for; 0 for none.
	LastSlot  int64
	CreatedAt int64
	UpdatedAt int64
}

// ScheduleUpsertParams creates or updates a schedule. An update keeps the
// pause state and LastSlot, and keeps the stored NextAt unless Spec changed.
type ScheduleUpsertParams struct {
	Name     string
	Workflow flowtype.WorkflowKey
	Queue    string
	Priority int
	Input    []byte
	Spec     string
	CatchUp  flowtype.CatchUp
	NextAt   int64 // the first slot, used when the schedule is new or its spec changed
	Now      int64
}

// ScheduleAdvanceParams moves a schedule's next slot forward, provided it is
// still ExpectedNextAt and the schedule is not paused.
type ScheduleAdvanceParams struct {
	Name           string
	ExpectedNextAt int64
	NextAt         int64
	LastSlot       int64
	Now            int64
}

// ScheduleReader reads schedules.
type ScheduleReader interface {
	// ScheduleGet returns a schedule or flowtype.ErrRunNotFound.
	ScheduleGet(ctx context.Context, name string) (Schedule, error)
	// ScheduleList returns every schedule, by name.
	ScheduleList(ctx context.Context) ([]Schedule, error)
	// ScheduleNextDue returns the earliest NextAt of the unpaused schedules;
	// ok is false when there is none.
	ScheduleNextDue(ctx context.Context) (nextAt int64, ok bool, err error)
}

// ScheduleTx writes schedules inside a write transaction.
type ScheduleTx interface {
	ScheduleUpsert(ctx context.Context, p ScheduleUpsertParams) error
	// ScheduleListDue returns up to limit unpaused schedules whose NextAt is
	// at or before now, the most overdue first.
	ScheduleListDue(ctx context.Context, now int64, limit int) ([]Schedule, error)
	// ScheduleAdvance is a compare-and-set of NextAt: it returns
	// flowtype.ErrConflict when NextAt is no longer p.ExpectedNextAt or the
	// schedule is paused, and flowtype.ErrRunNotFound when the schedule does
	// not exist.
	ScheduleAdvance(ctx context.Context, p ScheduleAdvanceParams) error
	// ScheduleSetPaused pauses or resumes a schedule, or returns
	// flowtype.ErrRunNotFound.
	ScheduleSetPaused(ctx context.Context, name string, paused bool, now int64) error
	// ScheduleDelete deletes a schedule (not its runs), or returns
	// flowtype.ErrRunNotFound.
	ScheduleDelete(ctx context.Context, name string) error
}
