package metrics

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// The families below are flowlite's metrics, read from a database through
// flow's public API: `flowlite serve` (internal/dashboard, flow/flowui)
// writes them in the text format at /metrics, and flow/flowprom hands
// them to a Prometheus registry. Both take them from Write, so the two
// cannot drift apart.

// Sink receives metric families: *Writer writes them in the Prometheus
// text format; flow/flowprom turns them into Prometheus collector metrics,
// so both expose the same series.
type Sink interface {
	// Family starts a family; the samples that follow belong to it.
	Family(name string, typ Type, help string)
	// Sample adds a gauge or counter sample of the current family.
	Sample(name string, labels []Label, v float64)
	// HistogramSample adds a histogram of the current family: counts per
	// bucket, the last one above every bound.
	HistogramSample(labels []Label, bounds []float64, counts []uint64, sum float64, count uint64)
}

var _ Sink = (*Writer)(nil)

// Write reads the database of e and writes every family /metrics serves
// to mw. Reads that fail are logged to log (nil: nowhere) and leave their
// families out, except flowlite_up, which says whether the database could
// be read.
func Write(ctx context.Context, e *flow.Engine, mw Sink, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	up := 1.0
	counts, err := e.CountRuns(ctx)
	if err != nil {
		log.Warn("metrics: count runs", "err", err)
		up = 0
	}
	mw.Family("flowlite_up", Gauge, "Whether the database could be read (1) or not (0).")
	mw.Sample("flowlite_up", nil, up)
	if err == nil {
		mw.Family("flowlite_runs", Gauge, "Runs in the database by state.")
		for _, st := range runStatuses() {
			mw.Sample("flowlite_runs", L("status", string(st)), float64(counts[st]))
		}
		for _, st := range sortedExtra(counts) {
			mw.Sample("flowlite_runs", L("status", string(st)), float64(counts[st]))
		}
	}
	queueMetrics(ctx, e, mw, log)
	limitMetrics(ctx, e, mw, log)
	unworkedMetrics(ctx, e, mw, log)

	if h, err := FileHealth(ctx, e); err == nil {
		mw.Family("flowlite_database_bytes", Gauge, "Size of the database file.")
		mw.Sample("flowlite_database_bytes", nil, float64(h.DBBytes))
		mw.Family("flowlite_wal_bytes", Gauge, "Size of the write-ahead log file.")
		mw.Sample("flowlite_wal_bytes", nil, float64(h.WALBytes))
		if h.WALLimit > 0 {
			mw.Family("flowlite_wal_limit_bytes", Gauge, "Size the WAL file should stay under (flowsqlite.Options.WALLimit).")
			mw.Sample("flowlite_wal_limit_bytes", nil, float64(h.WALLimit))
		}
		if !h.LastCheckpoint.IsZero() {
			mw.Family("flowlite_last_checkpoint_timestamp_seconds", Gauge, "When the last recorded WAL checkpoint ran, by any engine (Unix time).")
			mw.Sample("flowlite_last_checkpoint_timestamp_seconds", nil, float64(h.LastCheckpoint.UnixMilli())/1000)
		}
		if h.Checkpointer != "" {
			mw.Family("flowlite_wal_checkpointer", Gauge, "Who checkpoints the WAL (1 for the one that does): flowlite, litestream, or sqlite (its automatic checkpoints only).")
			mw.Sample("flowlite_wal_checkpointer", L("by", string(h.Checkpointer)), 1)
		}
		if h.Replication != nil {
			replicationMetrics(mw, h)
		}
	} else if !errors.Is(err, flow.ErrNotSupported) { // PostgreSQL keeps no file
		log.Warn("metrics: file health", "err", err)
	}

	standbyMetrics(ctx, e, mw, log)
	engineMetrics(ctx, e, mw, log)
	mw.Family("flowlite_scrape_duration_seconds", Gauge, "How long this scrape's database reads took.")
	mw.Sample("flowlite_scrape_duration_seconds", nil, time.Since(start).Seconds())
}

// queueMetrics writes the statistics of every queue.
func queueMetrics(ctx context.Context, e *flow.Engine, mw Sink, log *slog.Logger) {
	stats, err := e.QueueStats(ctx)
	if err != nil {
		log.Warn("metrics: queue stats", "err", err)
		return
	}
	mw.Family("flowlite_queue_runs", Gauge, "Runs per queue and state that the database keeps (pending and waiting are the queue's depth).")
	for _, q := range stats {
		for _, st := range runStatuses() {
			mw.Sample("flowlite_queue_runs", L("queue", q.Queue, "status", string(st)), float64(q.Counts[st]))
		}
	}
	gauge := func(name, help string, v func(flow.QueueStats) float64) {
		mw.Family(name, Gauge, help)
		for _, q := range stats {
			mw.Sample(name, L("queue", q.Queue), v(q))
		}
	}
	gauge("flowlite_queue_ready", "Runs an engine could claim now.", func(q flow.QueueStats) float64 { return float64(q.Ready) })
	gauge("flowlite_queue_lag_seconds", "How long the oldest ready run has been due.", func(q flow.QueueStats) float64 { return q.OldestReadyAge.Seconds() })
	gauge("flowlite_queue_paused", "Whether the queue is paused (1) or not (0).", func(q flow.QueueStats) float64 {
		if q.Paused {
			return 1
		}
		return 0
	})
	gauge("flowlite_dead_letters", "Failed runs not requeued, per queue.", func(q flow.QueueStats) float64 { return float64(q.DeadLetters) })
	gauge("flowlite_queue_finished_last_hour", "Runs of the queue that finished in the last hour.", func(q flow.QueueStats) float64 { return float64(q.FinishedLastHour) })
	gauge("flowlite_queue_run_duration_p95_seconds", "95th percentile duration of the runs completed in the last hour (claim to completion).", func(q flow.QueueStats) float64 { return q.P95Duration.Seconds() })
}

// limitMetrics writes, for each queue with limits (flow control), its
// global limits and what they hold now; no family when no queue has any.
func limitMetrics(ctx context.Context, e *flow.Engine, mw Sink, log *slog.Logger) {
	uses, err := e.QueueLimits(ctx)
	if err != nil {
		log.Warn("metrics: queue limits", "err", err)
		return
	}
	if len(uses) == 0 {
		return
	}
	gauge := func(name, help string, v func(flow.QueueLimitUse) float64) {
		mw.Family(name, Gauge, help)
		for _, u := range uses {
			mw.Sample(name, L("queue", u.Queue), v(u))
		}
	}
	gauge("flowlite_queue_limit_concurrency", "The most runs of the queue executing at once across engines (QueueLimits.Concurrency; 0: no limit).",
		func(u flow.QueueLimitUse) float64 { return float64(u.Limits.Concurrency) })
	gauge("flowlite_queue_limit_rate", "The most runs of the queue starting per rate period (QueueLimits.Rate.Limit; 0: no limit).",
		func(u flow.QueueLimitUse) float64 { return float64(u.Limits.Rate.Limit) })
	gauge("flowlite_queue_limit_rate_period_seconds", "The length of the queue's rate window (QueueLimits.Rate.Period; 0: no rate).",
		func(u flow.QueueLimitUse) float64 { return u.Limits.Rate.Period.Seconds() })
	gauge("flowlite_queue_limit_running", "Runs of a limited queue executing now.",
		func(u flow.QueueLimitUse) float64 { return float64(u.Running) })
	gauge("flowlite_queue_limit_started", "Runs of a limited queue started within its rate window (0 without a rate).",
		func(u flow.QueueLimitUse) float64 { return float64(u.Started) })
	gauge("flowlite_queue_limit_held_back", "Ready runs of a limited queue that its global limits keep from starting now.",
		func(u flow.QueueLimitUse) float64 { return float64(u.HeldBack) })
}

// unworkedMetrics writes, for each queue with pending runs that no live
// engine works, how many and how old the oldest is: runs that will not
// start, which no other metric tells apart from a slow queue.
func unworkedMetrics(ctx context.Context, e *flow.Engine, mw Sink, log *slog.Logger) {
	list, err := e.UnworkedQueues(ctx)
	if err != nil {
		log.Warn("metrics: unworked queues", "err", err)
		return
	}
	mw.Family("flowlite_queue_unworked_pending", Gauge, "Pending runs of a queue that no live engine works, by queue.")
	for _, q := range list {
		mw.Sample("flowlite_queue_unworked_pending", L("queue", q.Queue), float64(q.Pending))
	}
	mw.Family("flowlite_queue_unworked_oldest_age_seconds", Gauge, "Age of the oldest pending run of a queue that no live engine works, by queue.")
	for _, q := range list {
		mw.Sample("flowlite_queue_unworked_oldest_age_seconds", L("queue", q.Queue), q.OldestAge.Seconds())
	}
}

// engineMetrics writes the sums of the engines' reports.
func engineMetrics(ctx context.Context, e *flow.Engine, mw Sink, log *slog.Logger) {
	reports, err := e.Reports(ctx)
	if err != nil {
		log.Warn("metrics: engine reports", "err", err)
		return
	}
	snaps := make([]flow.EngineMetrics, len(reports))
	for i, r := range reports {
		snaps[i] = r.Metrics
	}
	sum := flow.SumMetrics(snaps...)
	mw.Family("flowlite_engines", Gauge, "Engines whose reports are kept, running or stopped.")
	mw.Sample("flowlite_engines", nil, float64(len(reports)))
	mw.Family("flowlite_runs_started_total", Counter, "Runs started (Start, StartTx, children, requeues), by every engine.")
	mw.Sample("flowlite_runs_started_total", nil, float64(sum.RunsStarted))
	mw.Family("flowlite_write_failures_total", Counter, "Writes of a run's state (outcome, release) the database refused, e.g. on a full disk; retries count.")
	mw.Sample("flowlite_write_failures_total", nil, float64(sum.WriteFailures))
	mw.Family("flowlite_runs_finished_total", Counter, "Run outcomes recorded by every engine, by state.")
	for _, st := range []flow.RunStatus{flow.StatusCompleted, flow.StatusFailed, flow.StatusCancelled, flow.StatusSuspended} {
		mw.Sample("flowlite_runs_finished_total", L("status", string(st)), float64(sum.RunsFinished[st]))
	}
	mw.Family("flowlite_attempt_duration_seconds", Histogram, "Duration of step and compensation attempts, by kind.")
	for _, kind := range []string{"step", "compensation"} {
		h := sum.AttemptSeconds[kind] // SumMetrics always has both
		mw.HistogramSample(L("kind", kind), h.Bounds, h.Counts, h.Sum, h.Count)
	}
	mw.Family("flowlite_claim_latency_seconds", Histogram, "How long after becoming due runs were claimed, by queue.")
	for _, q := range sortedKeys(sum.ClaimSeconds) {
		h := sum.ClaimSeconds[q]
		mw.HistogramSample(L("queue", q), h.Bounds, h.Counts, h.Sum, h.Count)
	}
}

// standbyMetrics writes whether the PostgreSQL server read is a streaming
// standby and, on one, how far its replay stands: every other family of a
// scrape off a standby is as old as that replay, which an alert on it
// (flowlite_replica_replay_age_seconds while flowlite_replica_caught_up is
// 0) tells apart from a quiet system. No family on SQLite.
func standbyMetrics(ctx context.Context, e *flow.Engine, mw Sink, log *slog.Logger) {
	st, err := e.StandbyStatus(ctx)
	if err != nil {
		if !errors.Is(err, flow.ErrNotSupported) {
			log.Warn("metrics: standby status", "err", err)
		}
		return
	}
	mw.Family("flowlite_replica_standby", Gauge, "Whether the PostgreSQL server read is a standby in recovery, a read replica (1), or not (0).")
	mw.Sample("flowlite_replica_standby", nil, bit(st.Standby))
	if !st.Standby {
		return
	}
	mw.Family("flowlite_replica_caught_up", Gauge, "Whether the standby replayed all the WAL it received (1) or is replaying (0).")
	mw.Sample("flowlite_replica_caught_up", nil, bit(st.CaughtUp))
	mw.Family("flowlite_replica_replay_age_seconds", Gauge, "How long ago the last transaction the standby replayed committed on the primary: its lag while replaying; once caught up, how long the primary has sent nothing newer.")
	mw.Sample("flowlite_replica_replay_age_seconds", nil, st.ReplayAge.Seconds())
}

// bit is a boolean gauge's value.
func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// replicationMetrics writes the state of the file's Litestream replica, as
// the engine that replicates it last saw it.
func replicationMetrics(mw Sink, h flow.FileHealth) {
	r := h.Replication
	mw.Family("flowlite_replication_lag_seconds", Gauge, "How long the Litestream replica has been behind the newest transaction copied out of the WAL; 0 in sync.")
	mw.Sample("flowlite_replication_lag_seconds", nil, r.Lag.Seconds())
	mw.Family("flowlite_replication_sync_interval_seconds", Gauge, "The replication's configured recovery point (flowsqlite.Replication.SyncInterval).")
	mw.Sample("flowlite_replication_sync_interval_seconds", nil, r.SyncInterval.Seconds())
	if !r.LastSync.IsZero() {
		mw.Family("flowlite_replication_last_sync_timestamp_seconds", Gauge, "When the replica last acknowledged a write (Unix time).")
		mw.Sample("flowlite_replication_last_sync_timestamp_seconds", nil, float64(r.LastSync.UnixMilli())/1000)
	}
	mw.Family("flowlite_replication_errors_total", Counter, "Writes to the replica that failed since the replicating engine started.")
	mw.Sample("flowlite_replication_errors_total", nil, float64(r.Errors))
	mw.Family("flowlite_replication_reported_timestamp_seconds", Gauge, "When these replication figures were taken (Unix time): now in the replicating process, older when read from the status it leaves beside the file.")
	mw.Sample("flowlite_replication_reported_timestamp_seconds", nil, float64(r.ReportedAt.UnixMilli())/1000)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sortedExtra lists states written by a newer flowlite, which statuses
// does not know.
func sortedExtra(counts map[flow.RunStatus]int64) []flow.RunStatus {
	var out []flow.RunStatus
	for st := range counts {
		if !slices.Contains(runStatuses(), st) {
			out = append(out, st)
		}
	}
	slices.Sort(out)
	return out
}

// runStatuses are the run states every scrape reports, zero or not, so
// that a series does not vanish while no run is in its state.
func runStatuses() []flow.RunStatus {
	return []flow.RunStatus{
		flow.StatusPending, flow.StatusRunning, flow.StatusWaiting, flow.StatusCompensating,
		flow.StatusCompleted, flow.StatusFailed, flow.StatusSuspended, flow.StatusCancelled,
	}
}
