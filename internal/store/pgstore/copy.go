package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

// ErrCopyTargetNotEmpty is returned by CopyIn when the schema already holds
// rows: a copy goes into a freshly migrated schema only.
var ErrCopyTargetNotEmpty = errors.New("copy target is not empty")

// CopyIn writes snap into the store's schema for `flowlite copy`, in one
// transaction: either every row is in, or nothing is. It refuses a schema
// that already holds runs (or any other row of the tables it fills), with
// ErrCopyTargetNotEmpty, before writing anything. Once every row is in, it
// counts the rows of each table in the same transaction and hands the
// counts to verify; an error from verify rolls the copy back. It returns
// those counts. A nil snap copies nothing.
//
// Runs are inserted in snap's order without their parents, which are
// linked once every run is in, so the order of parent and child does not
// matter to the foreign key.
func (s *Store) CopyIn(ctx context.Context, snap *store.Snapshot, verify func(store.CopyCounts) error) (store.CopyCounts, error) {
	if snap == nil {
		snap = &store.Snapshot{}
	}
	var got store.CopyCounts
	err := s.Write(ctx, func(stx store.Tx) error {
		q := stx.(*tx).q
		before, err := q.CopyCounts(ctx)
		if err != nil {
			return fmt.Errorf("copy: count target rows: %w", err)
		}
		if b := store.CopyCounts(before); !b.Empty() {
			var held []string
			for _, t := range b.Tables() {
				if t.Rows > 0 {
					held = append(held, fmt.Sprintf("%d %s", t.Rows, t.Table))
				}
			}
			return fmt.Errorf("%w: schema %s already holds %s; copy into a new schema (--schema) or drop this one first",
				ErrCopyTargetNotEmpty, s.schema, strings.Join(held, ", "))
		}
		if err := copyRows(ctx, q, snap); err != nil {
			return err
		}
		after, err := q.CopyCounts(ctx)
		if err != nil {
			return fmt.Errorf("copy: count copied rows: %w", err)
		}
		got = store.CopyCounts(after)
		if verify != nil {
			return verify(got)
		}
		return nil
	})
	if err != nil {
		return store.CopyCounts{}, err
	}
	return got, nil
}

func copyRows(ctx context.Context, q *pgdb.Queries, snap *store.Snapshot) error {
	for _, r := range snap.Runs {
		err := q.CopyRunInsert(ctx, pgdb.CopyRunInsertParams{
			ID: r.ID, Workflow: r.Workflow, Version: r.Version, Queue: r.Queue, Priority: r.Priority,
			Status: r.Status, Input: r.Input, Output: r.Output, Error: r.Error, Reason: r.Reason,
			CancelRequested: r.CancelRequested, RunAt: r.RunAt, Deadline: ptrInt(r.Deadline),
			WakeSeq: r.WakeSeq, Fence: r.Fence, LeaseOwner: ptrString(r.LeaseOwner),
			LeaseExpiresAt: ptrInt(r.LeaseExpiresAt), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
			FinishedAt: ptrInt(r.FinishedAt), UniqueKey: ptrString(r.UniqueKey), UniqueStates: r.UniqueStates,
			StartedAt: ptrInt(r.StartedAt), RequeuedFrom: ptrString(r.RequeuedFrom), RequeuedAs: ptrString(r.RequeuedAs),
			Timeout: ptrInt(r.Timeout), Detached: r.Detached, ContextValues: r.ContextValues, ConcurrencyKey: r.ConcurrencyKey,
		})
		if err != nil {
			return fmt.Errorf("copy: run %s: %w", r.ID, err)
		}
	}
	for _, r := range snap.Runs {
		if r.ParentID == nil {
			continue
		}
		if _, err := q.CopyRunSetParent(ctx, pgdb.CopyRunSetParentParams{ParentID: *r.ParentID, ID: r.ID}); err != nil {
			return fmt.Errorf("copy: parent of run %s: %w", r.ID, err)
		}
	}
	for _, r := range snap.Steps {
		err := q.CopyStepInsert(ctx, pgdb.CopyStepInsertParams{
			RunID: r.RunID, Name: r.Name, Occurrence: r.Occurrence, Status: r.Status, Attempts: r.Attempts,
			Input: r.Input, Output: r.Output, Error: r.Error, CompletedSeq: ptrInt(r.CompletedSeq),
			Compensable: r.Compensable, Compensation: r.Compensation,
			CompensationAttempts: r.CompensationAttempts, CompensationError: r.CompensationError,
			StartedAt: r.StartedAt, FinishedAt: ptrInt(r.FinishedAt), Position: ptrInt(r.Position),
			ErrorCode: r.ErrorCode, ErrorPermanent: r.ErrorPermanent, ErrorDetails: r.ErrorDetails,
		})
		if err != nil {
			return fmt.Errorf("copy: step %s/%s#%d: %w", r.RunID, r.Name, r.Occurrence, err)
		}
	}
	for _, r := range snap.Events {
		err := q.CopyEventInsert(ctx, pgdb.CopyEventInsertParams{
			RunID: r.RunID, At: r.At, Kind: r.Kind, Step: r.Step,
			Occurrence: r.Occurrence, Attempt: r.Attempt, Detail: r.Detail,
		})
		if err != nil {
			return fmt.Errorf("copy: event of run %s: %w", r.RunID, err)
		}
	}
	for _, r := range snap.Signals {
		err := q.CopySignalInsert(ctx, pgdb.CopySignalInsertParams{
			RunID: r.RunID, Name: r.Name, Payload: r.Payload, Key: ptrString(r.Key),
			SentAt: r.SentAt, ConsumedBy: ptrString(r.ConsumedBy),
		})
		if err != nil {
			return fmt.Errorf("copy: signal %s of run %s: %w", r.Name, r.RunID, err)
		}
	}
	for _, r := range snap.Schedules {
		err := q.CopyScheduleInsert(ctx, pgdb.CopyScheduleInsertParams{
			Name: r.Name, Workflow: r.Workflow, Version: r.Version, Queue: r.Queue, Priority: r.Priority,
			Input: r.Input, Spec: r.Spec, CatchUp: r.CatchUp, Paused: r.Paused,
			NextAt: r.NextAt, LastSlot: r.LastSlot, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
		if err != nil {
			return fmt.Errorf("copy: schedule %s: %w", r.Name, err)
		}
	}
	for _, r := range snap.UniqueHolds {
		err := q.CopyUniqueHoldInsert(ctx, pgdb.CopyUniqueHoldInsertParams{
			Workflow: r.Workflow, Key: r.Key, RunID: r.RunID,
			TakenAt: r.TakenAt, HeldUntil: r.HeldUntil, States: r.States,
		})
		if err != nil {
			return fmt.Errorf("copy: unique hold %s/%s: %w", r.Workflow, r.Key, err)
		}
	}
	for _, r := range snap.Debounces {
		err := q.CopyDebounceInsert(ctx, pgdb.CopyDebounceInsertParams{
			Workflow: r.Workflow, Key: r.Key, RunID: r.RunID, FirstAt: r.FirstAt, MaxDelay: r.MaxDelay,
		})
		if err != nil {
			return fmt.Errorf("copy: debounce key %s/%s: %w", r.Workflow, r.Key, err)
		}
	}
	for _, r := range snap.Executions {
		err := q.CopyExecutionInsert(ctx, pgdb.CopyExecutionInsertParams{RunID: r.RunID, Execution: r.Execution, ContinuedAt: r.ContinuedAt})
		if err != nil {
			return fmt.Errorf("copy: execution of run %s: %w", r.RunID, err)
		}
	}
	// Stream rows before their messages, whose foreign key names them.
	for _, r := range snap.Streams {
		err := q.CopyStreamInsert(ctx, pgdb.CopyStreamInsertParams{RunID: r.RunID, Stream: r.Stream, Length: r.Length, ClosedAt: r.ClosedAt})
		if err != nil {
			return fmt.Errorf("copy: stream %s of run %s: %w", r.Stream, r.RunID, err)
		}
	}
	for _, r := range snap.StreamChunks {
		err := q.CopyStreamChunkInsert(ctx, pgdb.CopyStreamChunkInsertParams{
			RunID: r.RunID, Stream: r.Stream, FirstPosition: r.FirstPosition, Count: r.Count, Messages: r.Messages,
			At: r.At, Step: r.Step, Occurrence: r.Occurrence, Attempt: r.Attempt,
		})
		if err != nil {
			return fmt.Errorf("copy: messages %d.. of stream %s of run %s: %w", r.FirstPosition, r.Stream, r.RunID, err)
		}
	}
	for _, r := range snap.Queues {
		err := q.CopyQueueInsert(ctx, pgdb.CopyQueueInsertParams{
			Name: r.Name, Paused: r.Paused, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
		if err != nil {
			return fmt.Errorf("copy: queue %s: %w", r.Name, err)
		}
	}
	for _, r := range snap.Workflows {
		err := q.CopyWorkflowInsert(ctx, pgdb.CopyWorkflowInsertParams{
			Name: r.Name, Version: r.Version, RegisteredAt: r.RegisteredAt,
		})
		if err != nil {
			return fmt.Errorf("copy: workflow %s v%d: %w", r.Name, r.Version, err)
		}
	}
	for _, r := range snap.Definitions {
		err := q.CopyDefinitionInsert(ctx, pgdb.CopyDefinitionInsertParams{
			Name: r.Name, Version: r.Version, Hash: r.Hash, Body: r.Body, File: r.File,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
		if err != nil {
			return fmt.Errorf("copy: definition %s v%d: %w", r.Name, r.Version, err)
		}
	}
	return nil
}

func ptrInt(p *int64) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *p, Valid: true}
}

func ptrString(p *string) sql.NullString {
	if p == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *p, Valid: true}
}
