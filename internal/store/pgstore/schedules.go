package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) ScheduleGet(ctx context.Context, name string) (store.Schedule, error) {
	row, err := r.q.ScheduleGet(ctx, name)
	if err != nil {
		return store.Schedule{}, fmt.Errorf("get schedule %s: %w", name, interpretError(ctx, err))
	}
	return scheduleFromRow(row), nil
}

func (r reader) ScheduleList(ctx context.Context) ([]store.Schedule, error) {
	rows, err := r.q.ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", interpretError(ctx, err))
	}
	return schedulesFromRows(rows), nil
}

func (r reader) ScheduleNextDue(ctx context.Context) (int64, bool, error) {
	next, err := r.q.ScheduleNextDue(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("find next due schedule: %w", interpretError(ctx, err))
	}
	if len(next) == 0 {
		return 0, false, nil
	}
	return next[0], true, nil
}

func (t *tx) ScheduleUpsert(ctx context.Context, p store.ScheduleUpsertParams) error {
	err := t.q.ScheduleUpsert(ctx, pgdb.ScheduleUpsertParams{
		Name: p.Name, Workflow: p.Workflow.Name, Version: int64(p.Workflow.Version), Queue: p.Queue,
		Priority: int64(p.Priority), Input: p.Input, Spec: p.Spec, CatchUp: string(p.CatchUp),
		NextAt: p.NextAt, Now: p.Now,
	})
	if err != nil {
		return fmt.Errorf("save schedule %s: %w", p.Name, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) ScheduleListDue(ctx context.Context, now int64, limit int) ([]store.Schedule, error) {
	rows, err := t.q.ScheduleListDue(ctx, pgdb.ScheduleListDueParams{Now: now, MaxSchedules: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("list due schedules: %w", interpretError(ctx, err))
	}
	return schedulesFromRows(rows), nil
}

func (t *tx) ScheduleAdvance(ctx context.Context, p store.ScheduleAdvanceParams) error {
	n, err := t.q.ScheduleAdvance(ctx, pgdb.ScheduleAdvanceParams{
		NextAt: p.NextAt, LastSlot: p.LastSlot, Now: p.Now, Name: p.Name, ExpectedNextAt: p.ExpectedNextAt,
	})
	if err != nil {
		return fmt.Errorf("advance schedule %s: %w", p.Name, interpretError(ctx, err))
	}
	if n == 1 {
		return nil
	}
	// Tell a missing schedule from a moved or paused one.
	if _, err := t.ScheduleGet(ctx, p.Name); err != nil {
		if errors.Is(err, flowtype.ErrRunNotFound) {
			return fmt.Errorf("advance schedule %s: %w", p.Name, flowtype.ErrRunNotFound)
		}
		return err
	}
	return fmt.Errorf("advance schedule %s: %w: next slot is no longer %d or schedule is paused",
		p.Name, flowtype.ErrConflict, p.ExpectedNextAt)
}

func (t *tx) ScheduleSetPaused(ctx context.Context, name string, paused bool, now int64) error {
	n, err := t.q.ScheduleSetPaused(ctx, pgdb.ScheduleSetPausedParams{Paused: paused, Now: now, Name: name})
	if err != nil {
		return fmt.Errorf("pause schedule %s: %w", name, interpretError(ctx, err))
	}
	if n == 0 {
		return fmt.Errorf("pause schedule %s: %w", name, flowtype.ErrRunNotFound)
	}
	return nil
}

func (t *tx) ScheduleDelete(ctx context.Context, name string) error {
	n, err := t.q.ScheduleDelete(ctx, name)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, interpretError(ctx, err))
	}
	if n == 0 {
		return fmt.Errorf("delete schedule %s: %w", name, flowtype.ErrRunNotFound)
	}
	return nil
}

func schedulesFromRows(rows []pgdb.Schedule) []store.Schedule {
	out := make([]store.Schedule, len(rows))
	for i, row := range rows {
		out[i] = scheduleFromRow(row)
	}
	return out
}

func scheduleFromRow(r pgdb.Schedule) store.Schedule {
	return store.Schedule{
		Name: r.Name, Workflow: flowtype.WorkflowKey{Name: r.Workflow, Version: int(r.Version)},
		Queue: r.Queue, Priority: int(r.Priority), Input: r.Input, Spec: r.Spec,
		CatchUp: flowtype.CatchUp(r.CatchUp), Paused: r.Paused, NextAt: r.NextAt, LastSlot: r.LastSlot,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}
