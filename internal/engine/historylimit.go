package engine

import (
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// History limits (Temporal ends a run at 51,200 events or 50 MB). Every
// execution of a run reads its whole history and replays the body over it,
// so a run whose history grows without end (a loop that sleeps and reacts
// for months) resumes ever slower and holds ever more memory. An engine
// caps the calls a run records (its step records: steps, waits, signals,
// children, races, patch markers) and their bytes (recorded inputs,
// outputs and errors). It warns once per execution past
// historyWarnFraction of either limit, and suspends the run with a
// *flowtype.HistoryLimitError before the call that would pass it: a
// suspended run keeps its history, and an operator can raise the limit and
// resume it, or cancel it, where a failed run would be compensated.
//
// Only new calls count: a replay of recorded ones, a retry of a call
// already recorded and an unwind record nothing new.

const (
	// DefaultMaxHistoryCalls is the default Config.MaxHistoryCalls.
	DefaultMaxHistoryCalls = 50_000
	// DefaultMaxHistoryBytes is the default Config.MaxHistoryBytes (50 MiB).
	DefaultMaxHistoryBytes = 50 << 20
	// historyWarnFraction is the share of a limit past which an execution
	// logs a warning.
	historyWarnFraction = 0.8
)

// historySize is how much a run's history holds; guarded by the
// runState's mutex.
type historySize struct {
	calls  int64
	bytes  int64
	warned bool // this execution warned already
}

// sizeOf returns the size of the recorded history steps.
func sizeOf(steps []store.Step) historySize {
	h := historySize{calls: int64(len(steps))}
	for _, s := range steps {
		h.bytes += int64(len(s.Input) + len(s.Output) + len(s.Error))
	}
	return h
}

// admitCall counts a new call of key with the given input, with st.mu
// held, or returns the *flowtype.HistoryLimitError that stops it.
func (st *runState) admitCall(key store.StepKey, input []byte) error {
	cfg := st.x.e.cfg
	h := &st.size
	if limit := int64(cfg.MaxHistoryCalls); limit > 0 && h.calls >= limit {
		return &flowtype.HistoryLimitError{RunID: key.RunID, What: "calls", Count: h.calls, Limit: limit, Setting: "Config.MaxHistoryCalls"}
	}
	if limit := cfg.MaxHistoryBytes; limit > 0 && h.bytes >= limit {
		return &flowtype.HistoryLimitError{RunID: key.RunID, What: "bytes", Count: h.bytes, Limit: limit, Setting: "Config.MaxHistoryBytes"}
	}
	h.calls++
	h.bytes += int64(len(input))
	st.warnHistory()
	return nil
}

// addOutput counts the recorded output of a new call.
func (st *runState) addOutput(output []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.size.bytes += int64(len(output))
	st.warnHistory()
}

// warnHistory logs, once per execution, that the run's history passed
// historyWarnFraction of a limit, with st.mu held.
func (st *runState) warnHistory() {
	cfg := st.x.e.cfg
	h := &st.size
	if h.warned {
		return
	}
	near := func(n, limit int64) bool { return limit > 0 && float64(n) >= historyWarnFraction*float64(limit) }
	if !near(h.calls, int64(cfg.MaxHistoryCalls)) && !near(h.bytes, cfg.MaxHistoryBytes) {
		return
	}
	h.warned = true
	st.x.e.log.Warn("run history nears its limit; the run is suspended when it reaches it (continue as new with flow.ContinueAsNew, or split the work into child workflows)",
		"run", st.x.run.ID, "calls", h.calls, "max_calls", cfg.MaxHistoryCalls, "bytes", h.bytes, "max_bytes", cfg.MaxHistoryBytes)
}
