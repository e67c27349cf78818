package flowtype

import "time"

// EngineMetrics is what one engine did since it was opened: runs it
// started, outcomes it recorded by state, the duration of the step and
// compensation attempts it ran, and how late after their due time it
// claimed runs. What the database holds (runs by state, queue depth) is
// read elsewhere (flow's CountRuns and QueueStats). Its JSON form is what
// an engine stores in its Report, so the JSON names are part of the
// database format.
type EngineMetrics struct {
	// RunsStarted counts the runs this engine recorded (Start, StartTx,
	// children, requeued dead letters), not the runs it found existing
	// under the same ID.
	RunsStarted int64 `json:"runs_started"`
	// RunsFinished counts the outcomes this engine recorded, by state
	// (completed, failed, cancelled, suspended).
	RunsFinished map[RunStatus]int64 `json:"runs_finished"`
	// AttemptSeconds is the duration of step and compensation attempts run
	// here, by kind: "step" or "compensation".
	AttemptSeconds map[string]Histogram `json:"attempt_seconds"`
	// ClaimSeconds is, by queue, how long after it became due each run was
	// claimed here, on the engine clock.
	ClaimSeconds map[string]Histogram `json:"claim_seconds"`
	// WriteFailures counts the writes of a run's state (its outcome, a
	// release) that the database refused, e.g. on a full disk; each retry
	// counts. Non-zero means progress waited on the database.
	WriteFailures int64 `json:"write_failures,omitempty"`
	// LastWriteError is the newest of those failures; empty when none
	// happened.
	LastWriteError string `json:"last_write_error,omitempty"`
	// LastWriteAt is when LastWriteError happened, on the engine clock.
	LastWriteAt time.Time `json:"last_write_at,omitzero"`
}

// RunsFinishedTotal counts the outcomes recorded, whatever their state.
func (s EngineMetrics) RunsFinishedTotal() int64 {
	var n int64
	for _, c := range s.RunsFinished {
		n += c
	}
	return n
}

// Histogram is a snapshot of a histogram of seconds. Counts are not
// cumulative, unlike Prometheus buckets, so that snapshots with the same
// bounds add up bucket by bucket.
type Histogram struct {
	// Bounds are the upper bounds of the buckets, in seconds, ascending.
	Bounds []float64 `json:"bounds"`
	// Counts[i] counts the observations at most Bounds[i] and above
	// Bounds[i-1]; the last count, at index len(Bounds), those above every
	// bound.
	Counts []uint64 `json:"counts"`
	// Sum is the sum of the observations, in seconds.
	Sum float64 `json:"sum"`
	// Count is the number of observations.
	Count uint64 `json:"count"`
}

// Report is what one engine wrote to the database about itself, so that
// processes that run no workflows (flowlite serve, the CLI) can show what
// every engine did. Times are on the clock of that engine.
type Report struct {
	// Owner is the engine's worker ID, as in leases.
	Owner string
	// Host is the name of the machine the engine ran on.
	Host string
	// PID is the engine's process ID.
	PID int
	// StartedAt is when the engine was last started (Start).
	StartedAt time.Time
	// ReportedAt is when the engine last wrote this report.
	ReportedAt time.Time
	// Metrics are the engine's metrics at ReportedAt.
	Metrics EngineMetrics
	// Queues are the queues the engine works, sorted.
	Queues []string
	// LiveUntil is when the engine will have rewritten its report if it
	// still runs; past it (or once StoppedAt is set) the engine counts as
	// gone.
	LiveUntil time.Time
	// StoppedAt is when the engine stopped; zero while it runs.
	StoppedAt time.Time
}

// Live reports whether the engine ran at now, as far as its report tells:
// not stopped, and not silent past its LiveUntil.
func (r Report) Live(now time.Time) bool {
	return r.StoppedAt.IsZero() && now.Before(r.LiveUntil)
}
