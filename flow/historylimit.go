package flow

import (
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
)

// HistoryLimitError is the reason of a run suspended because its history
// reached Config.MaxHistoryCalls or Config.MaxHistoryBytes; see
// [flowtype.HistoryLimitError].
type HistoryLimitError = flowtype.HistoryLimitError

const (
	// DefaultMaxHistoryCalls is the default of Config.MaxHistoryCalls.
	DefaultMaxHistoryCalls = engine.DefaultMaxHistoryCalls
	// DefaultMaxHistoryBytes is the default of Config.MaxHistoryBytes:
	// 50 MiB.
	DefaultMaxHistoryBytes = engine.DefaultMaxHistoryBytes
)
