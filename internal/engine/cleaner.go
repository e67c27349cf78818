package engine

import (
	"context"
	"fmt"
	"math"
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
	total, grace, err := e.dropHistoryPartitions(ctx, now)
	if err != nil {
		return total, err
	}
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
			Status: c.status, FinishedBefore: now.Add(-c.keep - grace).UnixMilli(), Max: e.cfg.CleanBatch,
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

// dropHistoryPartitions, on a store whose history is partitioned
// (store.HistoryPartitioner), makes the partitions ahead of now and drops
// the old ones whose every run retention no longer keeps, with those runs.
// It returns the runs deleted and the grace the row deletes give the
// partitions: two spans, so that a run is deleted row by row only when its
// partition could not go whole since it passed its retention (a run still
// kept has history there); the runs of such a partition are kept up to
// that much longer than their retention.
func (e *Engine) dropHistoryPartitions(ctx context.Context, now time.Time) (int, time.Duration, error) {
	hp, ok := e.store.(store.HistoryPartitioner)
	if !ok {
		return 0, 0, nil
	}
	span, err := hp.HistorySpan(ctx)
	if err != nil || span <= 0 {
		return 0, 0, err
	}
	before := func(keep time.Duration) int64 {
		if keep < 0 {
			return math.MinInt64 // kept for good: such runs keep their partitions
		}
		return now.Add(-keep).UnixMilli()
	}
	r := e.cfg.Retention
	start := time.Now()
	res, err := hp.DropHistoryPartitions(ctx, store.HistoryDropParams{
		// Partitions are made on these passes only: they cover the next
		// two passes and three spans more, or new events would go to the
		// default partition meanwhile (and move out of it later).
		Until:           now.Add(2 * max(e.cfg.CleanInterval, 0)).UnixMilli(),
		CompletedBefore: before(r.Completed), FailedBefore: before(r.Failed), CancelledBefore: before(r.Cancelled),
		WaitForFeed: e.cfg.RetentionWaitsForConsumers, Max: historyDropsPerPass,
	})
	if err != nil {
		return res.Runs, 0, fmt.Errorf("clean history partitions: %w", err)
	}
	if res.Dropped > 0 {
		e.log.Info("dropped history partitions past their retention", "partitions", res.Dropped, "runs", res.Runs, "took", time.Since(start))
	}
	return res.Runs, 2 * span, nil
}

// historyDropsPerPass bounds the partitions one pass of the cleaner drops:
// each is tested with a scan of its rows, and a backlog (the option just
// turned on over a long history) is worked off over several passes.
const historyDropsPerPass = 4
