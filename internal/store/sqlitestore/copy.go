package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/internal/store"
)

// CopyOut reads the whole database into a snapshot for `flowlite copy`, in
// one read transaction, so the snapshot is consistent even if something
// writes meanwhile. It also returns the row counts the database reports for
// the same tables in the same transaction, which the copy checks against.
func (s *Store) CopyOut(ctx context.Context) (*store.Snapshot, store.CopyCounts, error) {
	sqlTx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: begin read: %w", err)
	}
	defer func() { _ = sqlTx.Rollback() }()
	q := sqlitedb.New(sqlTx)
	snap := &store.Snapshot{}

	runs, err := q.CopyRunList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read runs: %w", err)
	}
	for _, r := range runs {
		snap.Runs = append(snap.Runs, store.CopyRun{
			ID: r.ID, Workflow: r.Workflow, Queue: r.Queue, Status: r.Status,
			Version: r.Version, Priority: r.Priority, Input: r.Input, Output: r.Output,
			Error: r.Error, Reason: r.Reason, CancelRequested: r.CancelRequested != 0,
			RunAt: r.RunAt, Deadline: r.Deadline, ParentID: r.ParentID,
			WakeSeq: r.WakeSeq, Fence: r.Fence, LeaseOwner: r.LeaseOwner, LeaseExpiresAt: r.LeaseExpiresAt,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt,
			UniqueKey: r.UniqueKey, UniqueStates: r.UniqueStates, StartedAt: r.StartedAt,
			RequeuedFrom: r.RequeuedFrom, RequeuedAs: r.RequeuedAs,
			Timeout: r.Timeout, Detached: r.Detached != 0, ContextValues: r.ContextValues, ConcurrencyKey: r.ConcurrencyKey,
		})
	}
	steps, err := q.CopyStepList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read steps: %w", err)
	}
	for _, r := range steps {
		snap.Steps = append(snap.Steps, store.CopyStep{
			RunID: r.RunID, Name: r.Name, Occurrence: r.Occurrence, Status: r.Status,
			Attempts: r.Attempts, Input: r.Input, Output: r.Output, Error: r.Error,
			CompletedSeq: r.CompletedSeq, Compensable: r.Compensable != 0, Compensation: r.Compensation,
			CompensationAttempts: r.CompensationAttempts, CompensationError: r.CompensationError,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Position: r.Position,
			ErrorCode: r.ErrorCode, ErrorPermanent: r.ErrorPermanent != 0, ErrorDetails: r.ErrorDetails,
		})
	}
	events, err := q.CopyEventList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read events: %w", err)
	}
	for _, r := range events {
		snap.Events = append(snap.Events, store.CopyEvent{
			RunID: r.RunID, At: r.At, Kind: r.Kind, Step: r.Step,
			Occurrence: r.Occurrence, Attempt: r.Attempt, Detail: r.Detail,
		})
	}
	signals, err := q.CopySignalList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read signals: %w", err)
	}
	for _, r := range signals {
		snap.Signals = append(snap.Signals, store.CopySignal{
			RunID: r.RunID, Name: r.Name, Payload: r.Payload, Key: r.Key,
			SentAt: r.SentAt, ConsumedBy: r.ConsumedBy,
		})
	}
	schedules, err := q.CopyScheduleList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read schedules: %w", err)
	}
	for _, r := range schedules {
		snap.Schedules = append(snap.Schedules, store.CopySchedule{
			Name: r.Name, Workflow: r.Workflow, Version: r.Version, Queue: r.Queue,
			Priority: r.Priority, Input: r.Input, Spec: r.Spec, CatchUp: r.CatchUp,
			Paused: r.Paused != 0, NextAt: r.NextAt, LastSlot: r.LastSlot,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
	}
	holds, err := q.CopyUniqueHoldList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read unique holds: %w", err)
	}
	for _, r := range holds {
		snap.UniqueHolds = append(snap.UniqueHolds, store.CopyUniqueHold{
			Workflow: r.Workflow, Key: r.Key, RunID: r.RunID,
			TakenAt: r.TakenAt, HeldUntil: r.HeldUntil, States: r.States,
		})
	}
	debounces, err := q.CopyDebounceList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read debounce keys: %w", err)
	}
	for _, r := range debounces {
		snap.Debounces = append(snap.Debounces, store.CopyDebounce{
			Workflow: r.Workflow, Key: r.Key, RunID: r.RunID, FirstAt: r.FirstAt, MaxDelay: r.MaxDelay,
		})
	}
	executions, err := q.CopyExecutionList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read execution numbers: %w", err)
	}
	for _, r := range executions {
		snap.Executions = append(snap.Executions, store.CopyExecution{RunID: r.RunID, Execution: r.Execution, ContinuedAt: r.ContinuedAt})
	}
	streams, err := q.CopyStreamList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read streams: %w", err)
	}
	for _, r := range streams {
		snap.Streams = append(snap.Streams, store.CopyStream{RunID: r.RunID, Stream: r.Stream, Length: r.Length, ClosedAt: r.ClosedAt})
	}
	chunks, err := q.CopyStreamChunkList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read stream messages: %w", err)
	}
	for _, r := range chunks {
		snap.StreamChunks = append(snap.StreamChunks, store.CopyStreamChunk{
			RunID: r.RunID, Stream: r.Stream, FirstPosition: r.FirstPosition, Count: r.Count, Messages: r.Messages,
			At: r.At, Step: r.Step, Occurrence: r.Occurrence, Attempt: r.Attempt,
		})
	}
	queues, err := q.CopyQueueList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read queues: %w", err)
	}
	for _, r := range queues {
		snap.Queues = append(snap.Queues, store.CopyQueue{
			Name: r.Name, Paused: r.Paused != 0, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
	}
	workflows, err := q.CopyWorkflowList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read workflows: %w", err)
	}
	for _, r := range workflows {
		snap.Workflows = append(snap.Workflows, store.CopyWorkflow{
			Name: r.Name, Version: r.Version, RegisteredAt: r.RegisteredAt,
		})
	}
	definitions, err := q.CopyDefinitionList(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: read definitions: %w", err)
	}
	for _, r := range definitions {
		snap.Definitions = append(snap.Definitions, store.CopyDefinition{
			Name: r.Name, Version: r.Version, Hash: r.Hash, Body: r.Body, File: r.File,
			CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
	}
	c, err := q.CopyCounts(ctx)
	if err != nil {
		return nil, store.CopyCounts{}, fmt.Errorf("copy: count rows: %w", err)
	}
	return snap, store.CopyCounts(c), nil
}
