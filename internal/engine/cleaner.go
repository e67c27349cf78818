package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Maintenance defaults.
const (
	DefaultCleanInterval   = time.Minute
	DefaultCleanBatch      = 500
	DefaultReportInterval  = 10 * time.Second
	DefaultReportRetention = 7 * 24 * time.Hour
	// DefaultStoppedReportRetention is how long the report of an engine
	// that stopped is kept: long enough to see what yesterday's processes
	// did, short enough that short-lived processes do not pile up.
	DefaultStoppedReportRetention = 24 * time.Hour
)

// retentionWithDefaults returns r with its zero fields set to the defaults.
func retentionWithDefaults(r flowtype.Retention) flowtype.Retention {
	if r.Completed == 0 {
		r.Completed = flowtype.DefaultRetainCompleted
	}
	if r.Failed == 0 {
		r.Failed = flowtype.DefaultRetainFailed
	}
	if r.Cancelled == 0 {
		r.Cancelled = flowtype.DefaultRetainCancelled
	}
	return r
}

// withMaintenanceDefaults fills the zero fields of the cleaner's and the
// reporter's settings. Negative intervals stay negative: that loop is off.
func (c Config) withMaintenanceDefaults() Config {
	c.Retention = retentionWithDefaults(c.Retention)
	if c.CleanInterval == 0 {
		c.CleanInterval = DefaultCleanInterval
	}
	if c.CleanBatch <= 0 {
		c.CleanBatch = DefaultCleanBatch
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = DefaultReportInterval
	}
	if c.ReportRetention == 0 {
		c.ReportRetention = DefaultReportRetention
	}
	if c.StoppedReportRetention == 0 {
		c.StoppedReportRetention = DefaultStoppedReportRetention
	}
	return c
}

// runCleaner deletes, every CleanInterval, the finished runs their retention
// no longer keeps. The first pass runs one interval after Start.
func (e *Engine) runCleaner(ctx context.Context) {
	if e.cfg.CleanInterval < 0 {
		return
	}
	r := e.cfg.Retention
	if r.Completed < 0 && r.Failed < 0 && r.Cancelled < 0 && e.cfg.ReportRetention < 0 && e.cfg.StoppedReportRetention < 0 {
		return
	}
	every(ctx, e.cfg.CleanInterval, func() {
		start := time.Now()
		n, err := e.Clean(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			e.log.Error("delete finished runs past their retention", "deleted", n, "err", err)
		case n > 0:
			e.log.Info("deleted finished runs past their retention", "runs", n, "took", time.Since(start))
		}
	})
}

// Clean deletes the finished runs older than their state's retention, with
// their steps, events and signals, and returns how many runs it deleted.
// Ages are measured on the engine's clock.
//
// It deletes at most CleanBatch runs per write transaction and goes through
// the store's single writer like every other write, so workers' writes wait
// at most one batch; it loops until nothing is left. Each delete re-checks
// the run's state in its WHERE clause, so a run that is pending, running,
// waiting, compensating or suspended is never deleted, and neither is a
// finished child whose parent has not finished.
//
// The cleaners of engines sharing a PostgreSQL database delete separate
// batches, none waiting for another's (store.MaintenanceTx.RunDeleteFinished).
//
// It also deletes the reports of engines silent for longer than
// ReportRetention and of engines stopped for longer than
// StoppedReportRetention (report.go); they are not counted in the result.
func (e *Engine) Clean(ctx context.Context) (int, error) {
	now := e.now()
	r := e.cfg.Retention
	total := 0
	for _, c := range []struct {
		status flowtype.RunStatus
		keep   time.Duration
	}{
		{flowtype.StatusCompleted, r.Completed},
		{flowtype.StatusFailed, r.Failed},
		{flowtype.StatusCancelled, r.Cancelled},
	} {
		if c.keep < 0 {
			continue
		}
		p := store.RunDeleteFinishedParams{
			Status: c.status, FinishedBefore: now.Add(-c.keep).UnixMilli(), Max: e.cfg.CleanBatch,
		}
		for {
			var n int
			start := time.Now()
			err := e.store.Write(ctx, func(tx store.Tx) error {
				var err error
				if e.cfg.RetentionWaitsForConsumers {
					// Read in the delete's transaction: positions only move
					// forward, so a consumer acknowledging meanwhile keeps
					// no less than this.
					if p.KeepAfter, err = tx.FeedConsumerMinPosition(ctx); err != nil {
						return err
					}
					p.WaitForFeed = true
				}
				n, err = tx.RunDeleteFinished(ctx, p)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("clean %s runs: %w", c.status, err)
			}
			total += n
			if n > 0 {
				e.log.Debug("deleted a batch of finished runs", "status", c.status, "runs", n, "took", time.Since(start))
			}
			if n < p.Max {
				break
			}
		}
	}
	n, err := e.cleanReports(ctx)
	if err != nil {
		return total, err
	}
	if n > 0 {
		e.log.Info("deleted the reports of engines silent past their retention", "reports", n)
	}
	if n, err = e.cleanStoppedReports(ctx); err != nil {
		return total, err
	}
	if n > 0 {
		e.log.Info("deleted the reports of engines stopped past their retention", "reports", n)
	}
	return total, nil
}
