package flow

import "github.com/flowlite/flowlite/internal/engine"

// EngineMetrics is what one engine did since it was opened: runs it
// started, outcomes it recorded by state, the duration of the step and
// compensation attempts it ran, and how late after their due time it
// claimed runs. It covers this process only; what the database holds (runs
// by state, queue depth) is read with CountRuns and ListRuns.
type EngineMetrics = engine.MetricsSnapshot

// Histogram is a snapshot of a histogram of seconds: Counts[i] counts the
// observations in (Bounds[i-1], Bounds[i]], the last one those above every
// bound. Counts are not cumulative.
type Histogram = engine.Histogram

// Metrics returns a snapshot of the engine's in-process instrumentation.
// It is cheap (no database access) and safe to call at any time.
func (e *Engine) Metrics() EngineMetrics { return e.core.Metrics() }
