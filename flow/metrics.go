package flow

import (
	"context"

	"github.com/flowlite/flowlite/internal/engine"
)

// EngineMetrics is what one engine did since it was opened: runs it
// started, outcomes it recorded by state, the duration of the step and
// compensation attempts it ran, and how late after their due time it
// claimed runs. Metrics returns this process's; Reports returns every
// engine's, as they wrote them to the database. What the database holds
// (runs by state, queue depth) is read with CountRuns and QueueStats.
type EngineMetrics = engine.MetricsSnapshot

// Histogram is a snapshot of a histogram of seconds: Counts[i] counts the
// observations in (Bounds[i-1], Bounds[i]], the last one those above every
// bound. Counts are not cumulative.
type Histogram = engine.Histogram

// Metrics returns a snapshot of the engine's in-process instrumentation.
// It is cheap (no database access) and safe to call at any time.
func (e *Engine) Metrics() EngineMetrics { return e.core.Metrics() }

// Report is what one engine wrote to the database about itself: its worker
// ID, host and process, when it started and last reported (on its clock),
// its metrics then, the queues it works, and whether it still runs (Live).
type Report = engine.Report

// Reports returns what every engine working on the database reported, the
// engine started first first, including engines that stopped (until
// Config.ReportRetention passes). A started engine writes its report at
// Start, every Config.ReportInterval while its metrics change, at least
// once a minute (so readers can tell it from a crashed one), and at Stop,
// so a report is at most one interval behind. Add the metrics up
// with SumMetrics.
func (e *Engine) Reports(ctx context.Context) ([]Report, error) { return e.core.Reports(ctx) }

// SumMetrics adds up engine metrics, e.g. those of Reports, into the
// totals of a database. The sums only grow unless a report is deleted (by
// retention) or starts over (an engine restarted under the same
// Config.WorkerID), so they can be exported as Prometheus counters, for
// which either shows as a counter reset.
func SumMetrics(m ...EngineMetrics) EngineMetrics { return engine.SumMetrics(m...) }
