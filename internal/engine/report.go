package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The reporter makes what this engine did visible to other processes.
//
// An engine's counters (metrics.go) live in its memory, and SQLite keeps no
// record of checkpoints, yet the operator looks at a database from
// processes that run no workflows: flowlite serve and the CLI. So every
// engine writes its metrics snapshot to its own row of the database (a few
// hundred bytes), at Start, every ReportInterval when something changed,
// and at Stop; and a store with a file records every checkpoint it runs
// (the SQLite adapter's walwatch.go). Readers add the rows up (SumMetrics).
//
// A report also lists the queues the engine works and says whether it is
// alive (LiveUntil, StoppedAt), so that readers can name the queues whose
// pending runs no live engine will claim (unworked.go).
//
// An idle engine writes almost nothing: a report is skipped when no metric
// moved since the last one, except once every reportRefresh, so that
// readers can tell a quiet engine from a crashed one. The rows of engines
// that stopped reporting longer than ReportRetention ago are deleted by the
// cleaner, and so are, sooner, those of engines that stopped cleanly more
// than StoppedReportRetention ago (also at every Start): each short-lived
// process leaves a stopped report, and they must not pile up.

// reportRefresh is how often, at least, a running engine rewrites its
// report even when nothing changed: its liveness beat.
const reportRefresh = time.Minute

// liveMisses is how many rewrites a running engine may miss (a busy
// writer, a slow disk) before readers count it as gone.
const liveMisses = 3

// runReporter writes the engine's report every ReportInterval while its
// metrics change.
func (e *Engine) runReporter(ctx context.Context) {
	if e.cfg.ReportInterval < 0 {
		return
	}
	every(ctx, e.cfg.ReportInterval, func() {
		if err := e.report(ctx, false); err != nil && ctx.Err() == nil {
			e.log.Warn("write engine report", "err", err)
		}
	})
}

// report writes the engine's report, unless force is false, no metric
// moved since the last report and the last one is less than reportRefresh
// old (in real time: a test clock may stand still).
func (e *Engine) report(ctx context.Context, force bool) error {
	return e.writeReport(ctx, force, time.Time{})
}

// writeReport writes the report; a non-zero stopped marks the engine as
// stopped at that time, and is always written.
func (e *Engine) writeReport(ctx context.Context, force bool, stopped time.Time) error {
	e.reportMu.Lock()
	defer e.reportMu.Unlock()
	snap, events := e.metrics.snapshot()
	if !force && stopped.IsZero() && events == e.reportedEvents && time.Since(e.reportedAt) < reportRefresh {
		return nil
	}
	encoded, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("write report of engine %s: encode metrics: %w", e.cfg.WorkerID, err)
	}
	now := e.now()
	r := store.EngineReport{
		Owner: e.cfg.WorkerID, Host: e.host, PID: os.Getpid(),
		StartedAt: e.startedAt.UnixMilli(), ReportedAt: now.UnixMilli(), Metrics: encoded,
		Queues:    e.queueNames(),
		LiveUntil: now.Add(liveMisses * max(e.cfg.ReportInterval, reportRefresh)).UnixMilli(),
	}
	if !stopped.IsZero() {
		r.StoppedAt, r.LiveUntil = stopped.UnixMilli(), 0
	}
	if err := e.store.Write(ctx, func(tx store.Tx) error { return tx.EngineReportSave(ctx, r) }); err != nil {
		return fmt.Errorf("write report of engine %s: %w", e.cfg.WorkerID, err)
	}
	e.reportedEvents = events
	e.reportedAt = time.Now()
	return nil
}

// lastReport writes the report of an engine that stopped working, marked
// stopped, bounded by its own timeout: the context of Stop may be done
// already.
func (e *Engine) lastReport() {
	if e.cfg.ReportInterval < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopWriteTimeout)
	defer cancel()
	if err := e.writeReport(ctx, false, e.now()); err != nil {
		e.log.Warn("write engine report", "err", err)
	}
}

// Reports returns what every engine working on the database reported, the
// engine started first first.
func (e *Engine) Reports(ctx context.Context) ([]flowtype.Report, error) {
	rows, err := e.store.Reader().EngineReportList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]flowtype.Report, len(rows))
	for i, row := range rows {
		r := flowtype.Report{
			Owner: row.Owner, Host: row.Host, PID: row.PID,
			StartedAt: time.UnixMilli(row.StartedAt), ReportedAt: time.UnixMilli(row.ReportedAt),
			Queues: row.Queues, LiveUntil: optionalTime(row.LiveUntil), StoppedAt: optionalTime(row.StoppedAt),
		}
		if err := json.Unmarshal(row.Metrics, &r.Metrics); err != nil {
			return nil, fmt.Errorf("report of engine %s: malformed metrics: %w", row.Owner, err)
		}
		out[i] = r
	}
	return out, nil
}

// cleanReports deletes the reports of engines silent for longer than
// ReportRetention.
func (e *Engine) cleanReports(ctx context.Context) (int, error) {
	if e.cfg.ReportRetention < 0 {
		return 0, nil
	}
	before := e.now().Add(-e.cfg.ReportRetention).UnixMilli()
	var n int
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		n, err = tx.EngineReportDeleteBefore(ctx, before)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("clean engine reports: %w", err)
	}
	return n, nil
}

// cleanStoppedReports deletes the reports of engines stopped longer than
// StoppedReportRetention ago.
func (e *Engine) cleanStoppedReports(ctx context.Context) (int, error) {
	if e.cfg.StoppedReportRetention < 0 {
		return 0, nil
	}
	before := e.now().Add(-e.cfg.StoppedReportRetention).UnixMilli()
	var n int
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		n, err = tx.EngineReportDeleteStoppedBefore(ctx, before)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("clean reports of stopped engines: %w", err)
	}
	return n, nil
}

// optionalTime returns the time of ms, or the zero time for 0.
func optionalTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
