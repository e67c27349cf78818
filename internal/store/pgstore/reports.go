package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

func (r reader) EngineReportList(ctx context.Context) ([]store.EngineReport, error) {
	rows, err := r.q.EngineReportList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list engine reports: %w", interpretError(ctx, err))
	}
	out := make([]store.EngineReport, len(rows))
	for i, row := range rows {
		var queues []string
		if err := json.Unmarshal([]byte(row.Queues), &queues); err != nil {
			return nil, fmt.Errorf("list engine reports: queues of engine %s: %w", row.Owner, err)
		}
		if len(queues) == 0 {
			queues = nil
		}
		out[i] = store.EngineReport{
			Owner: row.Owner, Host: row.Host, PID: int(row.Pid),
			StartedAt: row.StartedAt, ReportedAt: row.ReportedAt, Metrics: row.Metrics,
			Queues: queues, LiveUntil: row.LiveUntil, StoppedAt: row.StoppedAt,
		}
	}
	return out, nil
}

func (r reader) CheckpointLast(ctx context.Context) (store.CheckpointRecord, error) {
	rows, err := r.q.CheckpointLast(ctx)
	if err != nil {
		return store.CheckpointRecord{}, fmt.Errorf("read last checkpoint: %w", interpretError(ctx, err))
	}
	if len(rows) == 0 {
		return store.CheckpointRecord{}, fmt.Errorf("read last checkpoint: %w", flowtype.ErrRunNotFound)
	}
	row := rows[0]
	return store.CheckpointRecord{
		At: row.At, Owner: row.Owner, Mode: flowtype.CheckpointMode(row.Mode),
		WALBytes: row.WalBytes, Busy: row.Busy, Error: row.Error,
	}, nil
}

func (t *tx) EngineReportSave(ctx context.Context, r store.EngineReport) error {
	queues, err := json.Marshal(append([]string{}, r.Queues...)) // [] rather than null
	if err != nil {
		return fmt.Errorf("save report of engine %s: encode queues: %w", r.Owner, err)
	}
	err = t.q.EngineReportUpsert(ctx, pgdb.EngineReportUpsertParams{
		Owner: r.Owner, Host: r.Host, Pid: int64(r.PID),
		StartedAt: r.StartedAt, ReportedAt: r.ReportedAt, Metrics: r.Metrics,
		Queues: string(queues), LiveUntil: r.LiveUntil, StoppedAt: r.StoppedAt,
	})
	if err != nil {
		return fmt.Errorf("save report of engine %s: %w", r.Owner, interpretError(ctx, err))
	}
	return nil
}

func (t *tx) EngineReportDeleteBefore(ctx context.Context, reportedBefore int64) (int, error) {
	n, err := t.q.EngineReportDeleteBefore(ctx, reportedBefore)
	if err != nil {
		return 0, fmt.Errorf("delete old engine reports: %w", interpretError(ctx, err))
	}
	return int(n), nil
}

func (t *tx) EngineReportDeleteStoppedBefore(ctx context.Context, stoppedBefore int64) (int, error) {
	n, err := t.q.EngineReportDeleteStoppedBefore(ctx, stoppedBefore)
	if err != nil {
		return 0, fmt.Errorf("delete reports of stopped engines: %w", interpretError(ctx, err))
	}
	return int(n), nil
}

func (t *tx) CheckpointSave(ctx context.Context, c store.CheckpointRecord) error {
	err := t.q.CheckpointRecord(ctx, pgdb.CheckpointRecordParams{
		At: c.At, Owner: c.Owner, Mode: string(c.Mode), WalBytes: c.WALBytes,
		Busy: c.Busy, Error: c.Error,
	})
	if err != nil {
		return fmt.Errorf("record checkpoint: %w", interpretError(ctx, err))
	}
	return nil
}
