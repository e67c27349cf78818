package flow

import (
	"context"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
)

// EngineMetrics is what one engine did since it was opened: runs it
// started, outcomes it recorded by state, the duration of the step and
// compensation attempts it ran, and how late after their due time it
// claimed runs. Metrics returns this process's; Reports returns every
// engine's, as they wrote them to the database. What the database holds
// (runs by state, queue depth) is read with CountRuns and QueueStats. See
// [flowtype.EngineMetrics] for its fields.
type EngineMetrics = flowtype.EngineMetrics

// Histogram is a snapshot of a histogram of seconds. See
// [flowtype.Histogram] for its fields.
type Histogram = flowtype.Histogram

// Metrics returns a snapshot of the engine's in-process instrumentation.
// It is cheap (no database access) and safe to call at any time.
func (e *Engine) Metrics() EngineMetrics {
	return merge(mapAll(e, func(inner *Engine) EngineMetrics { return inner.core.Metrics() }), sumMetrics)
}

// Report is what one engine wrote to the database about itself: its worker
// ID, host and process, when it started and last reported (on its clock),
// its metrics then, the queues it works, and whether it still runs (Live).
// See [flowtype.Report] for its fields.
type Report = flowtype.Report

// Reports returns what every engine working on the database reported, the
// engine started first first, including engines that stopped (until
// Config.ReportRetention passes). A started engine writes its report at
// Start, every Config.ReportInterval while its metrics change, at least
// once a minute (so readers can tell it from a crashed one), and at Stop,
// so a report is at most one interval behind. Add the metrics up
// with SumMetrics.
func (e *Engine) Reports(ctx context.Context) ([]Report, error) {
	// Each shard's engine reports to its own file, under the worker ID its
	// process gave every shard: merged, one report per process again.
	return gather(ctx, e, func(ctx context.Context, inner *Engine) ([]Report, error) { return inner.core.Reports(ctx) }, mergeReports)
}

// SumMetrics adds up engine metrics, e.g. those of Reports, into the
// totals of a database. The sums only grow unless a report is deleted (by
// retention) or starts over (an engine restarted under the same
// Config.WorkerID), so they can be exported as Prometheus counters, for
// which either shows as a counter reset.
func SumMetrics(m ...EngineMetrics) EngineMetrics { return engine.SumMetrics(m...) }
