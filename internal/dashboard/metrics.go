package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/metrics"
)

// healthTimeout bounds the database reads of /healthz and /metrics.
const healthTimeout = 5 * time.Second

// metrics serves /metrics in the Prometheus text format, read from the
// database at each scrape: every engine's work shows, though this process
// runs none. The counters and histograms (runs started and finished, attempt
// durations, claim latency) are the sums of the reports the engines write
// every report interval (flow.Reports), so they lag by up to one interval,
// and they reset when the cleaner deletes the report of a long-gone engine.
func (d *Dashboard) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	var buf bufferWriter
	mw := metrics.NewWriter(&buf)
	d.WriteMetrics(ctx, mw)
	if err := mw.Flush(); err != nil {
		d.log.Error("metrics: write", "err", err)
	}
	w.Header().Set("Content-Type", metrics.ContentType)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.b)
}

// MetricsSink receives metric families: *metrics.Writer writes them in the
// Prometheus text format; flow/flowprom turns them into Prometheus
// collector metrics, so both expose the same series.
type MetricsSink interface {
	// Family starts a family; the samples that follow belong to it.
	Family(name string, typ metrics.Type, help string)
	// Sample adds a gauge or counter sample of the current family.
	Sample(name string, labels []metrics.Label, v float64)
	// HistogramSample adds a histogram of the current family: counts per
	// bucket, the last one above every bound.
	HistogramSample(labels []metrics.Label, bounds []float64, counts []uint64, sum float64, count uint64)
}

// WriteMetrics reads the database and writes every family /metrics serves
// to mw. Reads that fail are logged and leave their families out, except
// flowlite_up, which says whether the database could be read.
func (d *Dashboard) WriteMetrics(ctx context.Context, mw MetricsSink) {
	start := time.Now()
	up := 1.0
	counts, err := d.e.CountRuns(ctx)
	if err != nil {
		d.log.Warn("metrics: count runs", "err", err)
		up = 0
	}
	mw.Family("flowlite_up", metrics.Gauge, "Whether the database could be read (1) or not (0).")
	mw.Sample("flowlite_up", nil, up)
	if err == nil {
		mw.Family("flowlite_runs", metrics.Gauge, "Runs in the database by state.")
		for _, st := range statuses() {
			mw.Sample("flowlite_runs", metrics.L("status", string(st)), float64(counts[st]))
		}
		for _, st := range sortedExtra(counts) {
			mw.Sample("flowlite_runs", metrics.L("status", string(st)), float64(counts[st]))
		}
	}
	d.queueMetrics(ctx, mw)
	d.unworkedMetrics(ctx, mw)

	if h, err := d.fileHealth(ctx); err == nil {
		mw.Family("flowlite_database_bytes", metrics.Gauge, "Size of the database file.")
		mw.Sample("flowlite_database_bytes", nil, float64(h.DBBytes))
		mw.Family("flowlite_wal_bytes", metrics.Gauge, "Size of the write-ahead log file.")
		mw.Sample("flowlite_wal_bytes", nil, float64(h.WALBytes))
		if h.WALLimit > 0 {
			mw.Family("flowlite_wal_limit_bytes", metrics.Gauge, "Size the WAL file should stay under (flowsqlite.Options.WALLimit).")
			mw.Sample("flowlite_wal_limit_bytes", nil, float64(h.WALLimit))
		}
		if !h.LastCheckpoint.IsZero() {
			mw.Family("flowlite_last_checkpoint_timestamp_seconds", metrics.Gauge, "When the last recorded WAL checkpoint ran, by any engine (Unix time).")
			mw.Sample("flowlite_last_checkpoint_timestamp_seconds", nil, float64(h.LastCheckpoint.UnixMilli())/1000)
		}
		if h.Checkpointer != "" {
			mw.Family("flowlite_wal_checkpointer", metrics.Gauge, "Who checkpoints the WAL (1 for the one that does): flowlite, litestream, or sqlite (its automatic checkpoints only).")
			mw.Sample("flowlite_wal_checkpointer", metrics.L("by", string(h.Checkpointer)), 1)
		}
		if h.Replication != nil {
			replicationMetrics(mw, h)
		}
	} else if !errors.Is(err, flow.ErrNotSupported) { // PostgreSQL keeps no file
		d.log.Warn("metrics: file health", "err", err)
	}

	d.engineMetrics(ctx, mw)
	mw.Family("flowlite_scrape_duration_seconds", metrics.Gauge, "How long this scrape's database reads took.")
	mw.Sample("flowlite_scrape_duration_seconds", nil, time.Since(start).Seconds())
}

// unworkedMetrics writes, for each queue with pending runs that no live
// engine works, how many and how old the oldest is: runs that will not
// start, which no other metric tells apart from a slow queue.
func (d *Dashboard) unworkedMetrics(ctx context.Context, mw MetricsSink) {
	list, err := d.e.UnworkedQueues(ctx)
	if err != nil {
		d.log.Warn("metrics: unworked queues", "err", err)
		return
	}
	mw.Family("flowlite_queue_unworked_pending", metrics.Gauge, "Pending runs of a queue that no live engine works, by queue.")
	for _, q := range list {
		mw.Sample("flowlite_queue_unworked_pending", metrics.L("queue", q.Queue), float64(q.Pending))
	}
	mw.Family("flowlite_queue_unworked_oldest_age_seconds", metrics.Gauge, "Age of the oldest pending run of a queue that no live engine works, by queue.")
	for _, q := range list {
		mw.Sample("flowlite_queue_unworked_oldest_age_seconds", metrics.L("queue", q.Queue), q.OldestAge.Seconds())
	}
}

// engineMetrics writes the sums of the engines' reports.
func (d *Dashboard) engineMetrics(ctx context.Context, mw MetricsSink) {
	reports, err := d.e.Reports(ctx)
	if err != nil {
		d.log.Warn("metrics: engine reports", "err", err)
		return
	}
	snaps := make([]flow.EngineMetrics, len(reports))
	for i, r := range reports {
		snaps[i] = r.Metrics
	}
	sum := flow.SumMetrics(snaps...)
	mw.Family("flowlite_engines", metrics.Gauge, "Engines whose reports are kept, running or stopped.")
	mw.Sample("flowlite_engines", nil, float64(len(reports)))
	mw.Family("flowlite_runs_started_total", metrics.Counter, "Runs started (Start, StartTx, children, requeues), by every engine.")
	mw.Sample("flowlite_runs_started_total", nil, float64(sum.RunsStarted))
	mw.Family("flowlite_write_failures_total", metrics.Counter, "Writes of a run's state (outcome, release) the database refused, e.g. on a full disk; retries count.")
	mw.Sample("flowlite_write_failures_total", nil, float64(sum.WriteFailures))
	mw.Family("flowlite_runs_finished_total", metrics.Counter, "Run outcomes recorded by every engine, by state.")
	for _, st := range []flow.RunStatus{flow.StatusCompleted, flow.StatusFailed, flow.StatusCancelled, flow.StatusSuspended} {
		mw.Sample("flowlite_runs_finished_total", metrics.L("status", string(st)), float64(sum.RunsFinished[st]))
	}
	mw.Family("flowlite_attempt_duration_seconds", metrics.Histogram, "Duration of step and compensation attempts, by kind.")
	for _, kind := range []string{"step", "compensation"} {
		h := sum.AttemptSeconds[kind] // SumMetrics always has both
		mw.HistogramSample(metrics.L("kind", kind), h.Bounds, h.Counts, h.Sum, h.Count)
	}
	mw.Family("flowlite_claim_latency_seconds", metrics.Histogram, "How long after becoming due runs were claimed, by queue.")
	for _, q := range sortedKeys(sum.ClaimSeconds) {
		h := sum.ClaimSeconds[q]
		mw.HistogramSample(metrics.L("queue", q), h.Bounds, h.Counts, h.Sum, h.Count)
	}
}

// healthz answers 200 when the database can be read, 503 otherwise.
func (d *Dashboard) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if _, err := d.e.CountRuns(ctx); err != nil {
		d.log.Warn("health check failed", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: database not readable: %v\n", err)
		return
	}
	if _, err := d.fileHealth(ctx); err != nil && !errors.Is(err, flow.ErrNotSupported) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: database file: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

type bufferWriter struct{ b []byte }

func (b *bufferWriter) Write(p []byte) (int, error) {
	b.b = append(b.b, p...)
	return len(p), nil
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
		if !slices.Contains(statuses(), st) {
			out = append(out, st)
		}
	}
	slices.Sort(out)
	return out
}

// replicationMetrics writes the state of the file's Litestream replica, as
// the engine that replicates it last saw it.
func replicationMetrics(mw MetricsSink, h flow.FileHealth) {
	r := h.Replication
	mw.Family("flowlite_replication_lag_seconds", metrics.Gauge, "How long the Litestream replica has been behind the newest transaction copied out of the WAL; 0 in sync.")
	mw.Sample("flowlite_replication_lag_seconds", nil, r.Lag.Seconds())
	mw.Family("flowlite_replication_sync_interval_seconds", metrics.Gauge, "The replication's configured recovery point (flowsqlite.Replication.SyncInterval).")
	mw.Sample("flowlite_replication_sync_interval_seconds", nil, r.SyncInterval.Seconds())
	if !r.LastSync.IsZero() {
		mw.Family("flowlite_replication_last_sync_timestamp_seconds", metrics.Gauge, "When the replica last acknowledged a write (Unix time).")
		mw.Sample("flowlite_replication_last_sync_timestamp_seconds", nil, float64(r.LastSync.UnixMilli())/1000)
	}
	mw.Family("flowlite_replication_errors_total", metrics.Counter, "Writes to the replica that failed since the replicating engine started.")
	mw.Sample("flowlite_replication_errors_total", nil, float64(r.Errors))
	mw.Family("flowlite_replication_reported_timestamp_seconds", metrics.Gauge, "When these replication figures were taken (Unix time): now in the replicating process, older when read from the status it leaves beside the file.")
	mw.Sample("flowlite_replication_reported_timestamp_seconds", nil, float64(r.ReportedAt.UnixMilli())/1000)
}
