package engine

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// The engine's instrumentation: counters and histograms of what this
// process did, kept in memory and read with Metrics. They are hooked in with
// one call each:
//
//	engine.go      Engine.metrics (the field)
//	start.go       StartRun, StartRunTx, startAlone: runStarted
//	batch.go       StartRuns, StartRunsTx: runStarted
//	wait.go        StartChild: runStarted
//	deadletter.go  Requeue, requeueDead: runStarted
//	reset.go       Reset and Revive (wokeAgain), Fork: runStarted
//	outcome.go     finish: runFinished
//	operator.go    Cancel of runs no engine holds: runFinished
//	step.go        callAttempt: observeAttempt
//	claimer.go     claim: observeClaims
//
// Their cost is one short critical section per event, which is small next
// to the database write each event comes with. The reporter (report.go)
// writes snapshots to the database, so other processes can read them.

// StepSecondsBounds returns the upper bounds, in seconds, of the buckets of
// the step attempt duration histogram.
func StepSecondsBounds() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
}

// ClaimSecondsBounds returns the upper bounds, in seconds, of the buckets
// of the claim latency histogram.
func ClaimSecondsBounds() []float64 {
	return []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

func newHistogram(bounds []float64) *flowtype.Histogram {
	return &flowtype.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
}

// observe counts v in h.
func observe(h *flowtype.Histogram, v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += v
	h.Count++
}

// cloneHistogram returns a copy of h that shares no memory with it.
func cloneHistogram(h *flowtype.Histogram) flowtype.Histogram {
	c := *h
	c.Bounds = append([]float64(nil), h.Bounds...)
	c.Counts = append([]uint64(nil), h.Counts...)
	return c
}

// metrics is the engine's instrumentation. Its zero value is ready.
type metrics struct {
	mu       sync.Mutex
	events   uint64 // counts every change, so the reporter can tell nothing happened
	started  int64
	finished map[flowtype.RunStatus]int64
	attempts map[string]*flowtype.Histogram
	claims   map[string]*flowtype.Histogram

	writeFailures  int64
	lastWriteError string
	lastWriteAt    time.Time
}

// writeFailed counts a write of a run's state that the database refused.
func (m *metrics) writeFailed(err error, at time.Time) {
	m.mu.Lock()
	m.writeFailures++
	m.lastWriteError, m.lastWriteAt = err.Error(), at
	m.events++
	m.mu.Unlock()
}

func (m *metrics) runStarted() {
	m.mu.Lock()
	m.started++
	m.events++
	m.mu.Unlock()
}

func (m *metrics) runFinished(status flowtype.RunStatus) {
	m.mu.Lock()
	if m.finished == nil {
		m.finished = make(map[flowtype.RunStatus]int64)
	}
	m.finished[status]++
	m.events++
	m.mu.Unlock()
}

// observeAttempt records the duration of an attempt that began at start
// (wall clock: the engine clock may be a test's manual one).
func (m *metrics) observeAttempt(info flowtype.AttemptInfo, start time.Time) {
	d := time.Since(start).Seconds()
	kind := "step"
	if info.Compensation {
		kind = "compensation"
	}
	m.mu.Lock()
	if m.attempts == nil {
		m.attempts = make(map[string]*flowtype.Histogram)
	}
	h := m.attempts[kind]
	if h == nil {
		h = newHistogram(StepSecondsBounds())
		m.attempts[kind] = h
	}
	observe(h, d)
	m.events++
	m.mu.Unlock()
}

// observeClaims records how late after their due time runs were claimed.
func (m *metrics) observeClaims(queue string, runs []store.Run, nowMs int64) {
	if len(runs) == 0 {
		return
	}
	m.mu.Lock()
	if m.claims == nil {
		m.claims = make(map[string]*flowtype.Histogram)
	}
	h := m.claims[queue]
	if h == nil {
		h = newHistogram(ClaimSecondsBounds())
		m.claims[queue] = h
	}
	for _, r := range runs {
		observe(h, float64(max(nowMs-r.RunAt, 0))/1000)
	}
	m.events++
	m.mu.Unlock()
}

// Metrics returns a snapshot of the engine's instrumentation.
func (e *Engine) Metrics() flowtype.EngineMetrics {
	s, _ := e.metrics.snapshot()
	return s
}

// snapshot returns a copy of the instrumentation and the number of changes
// it counts.
func (m *metrics) snapshot() (flowtype.EngineMetrics, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := flowtype.EngineMetrics{
		RunsStarted:    m.started,
		RunsFinished:   maps.Clone(m.finished),
		WriteFailures:  m.writeFailures,
		LastWriteError: m.lastWriteError,
		LastWriteAt:    m.lastWriteAt,
		AttemptSeconds: make(map[string]flowtype.Histogram, len(m.attempts)),
		ClaimSeconds:   make(map[string]flowtype.Histogram, len(m.claims)),
	}
	if s.RunsFinished == nil {
		s.RunsFinished = map[flowtype.RunStatus]int64{}
	}
	for k, h := range m.attempts {
		s.AttemptSeconds[k] = cloneHistogram(h)
	}
	for q, h := range m.claims {
		s.ClaimSeconds[q] = cloneHistogram(h)
	}
	return s, m.events
}

// SumMetrics adds up snapshots, e.g. the reports of every engine working
// on a database. Histograms with the same bounds add bucket by bucket; a
// histogram with other bounds (written by another version) has each bucket
// counted in the first bucket of the sum whose bound is at least its own.
// The sum always has the "step" and "compensation" attempt histograms,
// empty if no snapshot has them, so that exporters need not make them up.
func SumMetrics(snapshots ...flowtype.EngineMetrics) flowtype.EngineMetrics {
	sum := flowtype.EngineMetrics{
		RunsFinished: map[flowtype.RunStatus]int64{},
		AttemptSeconds: map[string]flowtype.Histogram{
			"step":         cloneHistogram(newHistogram(StepSecondsBounds())),
			"compensation": cloneHistogram(newHistogram(StepSecondsBounds())),
		},
		ClaimSeconds: map[string]flowtype.Histogram{},
	}
	for _, s := range snapshots {
		sum.RunsStarted += s.RunsStarted
		sum.WriteFailures += s.WriteFailures
		if s.LastWriteAt.After(sum.LastWriteAt) {
			sum.LastWriteError, sum.LastWriteAt = s.LastWriteError, s.LastWriteAt
		}
		for st, n := range s.RunsFinished {
			sum.RunsFinished[st] += n
		}
		addHistograms(sum.AttemptSeconds, s.AttemptSeconds, StepSecondsBounds)
		addHistograms(sum.ClaimSeconds, s.ClaimSeconds, ClaimSecondsBounds)
	}
	return sum
}

func addHistograms(into, from map[string]flowtype.Histogram, bounds func() []float64) {
	for k, h := range from {
		acc, ok := into[k]
		if !ok {
			acc = cloneHistogram(newHistogram(bounds()))
		}
		addHistogram(&acc, h)
		into[k] = acc
	}
}

// addHistogram adds the observations of o to h.
func addHistogram(h *flowtype.Histogram, o flowtype.Histogram) {
	h.Sum += o.Sum
	h.Count += o.Count
	if slices.Equal(h.Bounds, o.Bounds) && len(o.Counts) == len(h.Counts) {
		for i, c := range o.Counts {
			h.Counts[i] += c
		}
		return
	}
	for i, c := range o.Counts {
		upper := math.Inf(1)
		if i < len(o.Bounds) {
			upper = o.Bounds[i]
		}
		j, _ := slices.BinarySearch(h.Bounds, upper)
		h.Counts[j] += c // j == len(h.Bounds) is the overflow bucket
	}
}
