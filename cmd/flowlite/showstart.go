package main

import (
	"maps"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// startJSON is what show --json adds about how a run was started: the
// options an operator asks about when a start did not do what they
// expected (why a second start returned this run, why it was cancelled).
type startJSON struct {
	UniqueKey string    `json:"unique_key,omitempty"`
	ParentID  string    `json:"parent_id,omitempty"`
	Deadline  time.Time `json:"deadline,omitzero"`
	// Timeout is StartOptions.Timeout, in Go's duration syntax.
	Timeout string `json:"timeout,omitempty"`
	// Detached is true for a child its parent's cancellation does not
	// reach.
	Detached bool `json:"detached,omitempty"`
	// Values are the run's context values (flow.WithValue).
	Values map[string]string `json:"values,omitempty"`
}

func newStartJSON(info flow.RunInfo) startJSON {
	s := startJSON{UniqueKey: info.UniqueKey, ParentID: info.ParentID, Deadline: utc(info.Deadline), Detached: info.Detached,
		Values: info.Values}
	if info.Timeout > 0 {
		s.Timeout = info.Timeout.String()
	}
	return s
}

// startRows adds to show's header the start options a run has: its unique
// key (the key later starts were deduplicated on), its deadline, its
// timeout (counted from its first claim), its parent and its context
// values. Rows for options the run lacks are left out.
func startRows(h *table, info flow.RunInfo) {
	if info.UniqueKey != "" {
		h.row("Unique key", cell(info.UniqueKey, 0))
	}
	if !info.Deadline.IsZero() {
		h.row("Deadline", rfcMillis(info.Deadline))
	}
	if info.Timeout > 0 {
		t := info.Timeout.String() + " from its first claim"
		if info.StartedAt.IsZero() {
			t += " (not claimed yet: no deadline from it)"
		}
		h.row("Timeout", t)
	}
	if info.ParentID != "" {
		p := cell(info.ParentID, 0)
		if info.Detached {
			p += " (detached: the parent's cancellation does not reach this run)"
		}
		h.row("Parent", p)
	}
	// One row per value, in key order: the keys follow the naming rules,
	// so each fits a line.
	for i, k := range slices.Sorted(maps.Keys(info.Values)) {
		label := ""
		if i == 0 {
			label = "Values"
		}
		h.row(label, cell(k+"="+info.Values[k], 100))
	}
}
