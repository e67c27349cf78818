package store

import (
	"encoding/hex"
	"fmt"

	"github.com/flowlite/flowlite/flow/flowtype"
)

// The run states as bits, the encoding both adapters store in a run's
// unique_states column and filter queue statistics with: the CASE
// expressions of the runs_unique index and of the queries on it use the
// same bits, so the numbers belong to the schema, not to one dialect.
const (
	// UnfinishedMask is the mask of the unfinished states (pending,
	// running, waiting, compensating, suspended): the unique states a run
	// always holds its key in.
	UnfinishedMask int64 = 31
	// AllMask is the mask of every state.
	AllMask int64 = 255
)

// StateBit returns the bit of a run state (0 for an unknown state).
func StateBit(s flowtype.RunStatus) int64 {
	switch s {
	case flowtype.StatusPending:
		return 1
	case flowtype.StatusRunning:
		return 2
	case flowtype.StatusWaiting:
		return 4
	case flowtype.StatusCompensating:
		return 8
	case flowtype.StatusSuspended:
		return 16
	case flowtype.StatusCompleted:
		return 32
	case flowtype.StatusFailed:
		return 64
	case flowtype.StatusCancelled:
		return 128
	}
	return 0
}

// StatesMask returns the mask of states, or def for none. An unknown state
// is an error.
func StatesMask(states []flowtype.RunStatus, def int64) (int64, error) {
	if len(states) == 0 {
		return def, nil
	}
	var mask int64
	for _, s := range states {
		bit := StateBit(s)
		if bit == 0 {
			return 0, fmt.Errorf("unknown run state %q", s)
		}
		mask |= bit
	}
	return mask, nil
}

// UniqueStatesMask returns the mask of the states in which the run p
// describes holds its unique key: UnfinishedMask when p names none. A set
// without every unfinished state is refused, since a run that could enter
// a holding state from one that does not hold could break the one-holder
// index.
func UniqueStatesMask(p RunInsertParams) (int64, error) {
	states, err := StatesMask(p.UniqueStates, UnfinishedMask)
	if err != nil {
		return 0, fmt.Errorf("insert run %s: %w", p.ID, err)
	}
	if states&UnfinishedMask != UnfinishedMask {
		return 0, fmt.Errorf("insert run %s: unique states %v lack an unfinished state", p.ID, p.UniqueStates)
	}
	return states, nil
}

// InsertManyChunk bounds the rows of one multi-row insert statement
// (RunInsertMany, EventAppendMany), and so the size of the JSON document it
// binds.
const InsertManyChunk = 1000

// RunInsertRow is one run of the JSON document the adapters'
// RunInsertMany statements read (jsonb_each on SQLite,
// jsonb_array_elements on PostgreSQL): its keys are the ones the queries
// read, and an absent key reads as null.
type RunInsertRow struct {
	ID           string  `json:"id"`
	Workflow     string  `json:"workflow"`
	Version      int     `json:"version"`
	Queue        string  `json:"queue"`
	Priority     int     `json:"priority"`
	Input        string  `json:"input"` // hex: JSON text cannot carry every byte string
	RunAt        int64   `json:"run_at"`
	Deadline     *int64  `json:"deadline,omitempty"`
	ParentID     *string `json:"parent_id,omitempty"`
	UniqueKey    *string `json:"unique_key,omitempty"`
	UniqueStates int64   `json:"unique_states"`
	CreatedAt    int64   `json:"created_at"`
}

// NewRunInsertRow returns the row of p, whose unique states mask is states.
func NewRunInsertRow(p RunInsertParams, states int64) RunInsertRow {
	r := RunInsertRow{
		ID: p.ID, Workflow: p.Workflow.Name, Version: p.Workflow.Version, Queue: p.Queue, Priority: p.Priority,
		Input: hex.EncodeToString(p.Input), RunAt: p.RunAt, UniqueStates: states, CreatedAt: p.Now,
	}
	if p.Deadline != 0 {
		r.Deadline = &p.Deadline
	}
	if p.ParentID != "" {
		r.ParentID = &p.ParentID
	}
	if p.UniqueKey != "" {
		r.UniqueKey = &p.UniqueKey
	}
	return r
}
