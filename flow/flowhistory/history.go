// Package flowhistory is the file format of an exported run history:
// everything flowlite recorded about one run (the run, its step calls with
// their inputs and outputs, the signals sent to it, and its events), as
// versioned JSON. `flowlite history RUN --export` and Engine.ExportHistory
// write it; flowtest.Replay reads it to replay the run against changed
// workflow code before that code is deployed.
//
// # Format, version 1
//
// One JSON object:
//
//	{
//	  "format": "flowlite-history",   // always this string
//	  "version": 1,                    // the format version, see Version
//	  "exported_at": "RFC 3339 time",
//	  "run":     {"id", "workflow", "version", "queue", "priority", "status",
//	              "input", "output", "error", "reason", "parent_id",
//	              "created_at", "started_at", "finished_at"},
//	  "steps":   [{"name", "occurrence", "position", "status", "attempts",
//	              "input", "output", "error", "error_code", "error_permanent",
//	              "error_details", "compensable", "compensation",
//	              "compensation_attempts", "compensation_error",
//	              "completed_seq", "started_at", "finished_at"}],
//	  "signals": [{"id", "name", "payload", "key", "sent_at", "received_by"}],
//	  "events":  [{"id", "at", "kind", "step", "occurrence", "attempt", "detail"}]
//	}
//
// Inputs, outputs, payloads and error details are the JSON values the run
// stored, embedded as they are. Times are RFC 3339 with milliseconds, in
// UTC; a zero time is left out. A step's name carries the scope of the
// flow.All or flow.First branch that called it ("all0.1/charge"), and its
// position is the index of the call in that branch (-1: recorded before
// positions existed, not checked). Step records and events are those of
// flow.Engine.Inspect and flow.Engine.History.
//
// A reader refuses a file of another format or of a version it does not
// know, naming both; fields it does not know are ignored, so a later
// version may add fields without a new version number. The package imports
// the standard library only.
package flowhistory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Format is the value of the "format" field of every history file.
const Format = "flowlite-history"

// Version is the format version this package writes and reads.
const Version = 1

// ErrFormat matches every error Read returns for a file that is not a
// history this package can read.
var ErrFormat = errors.New("not a flowlite history file")

// History is an exported run history.
type History struct {
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	ExportedAt time.Time `json:"exported_at,omitzero"`
	Run        Run       `json:"run"`
	Steps      []Step    `json:"steps"`
	Signals    []Signal  `json:"signals"`
	Events     []Event   `json:"events"`
}

// Run is the exported run.
type Run struct {
	ID         string          `json:"id"`
	Workflow   string          `json:"workflow"`
	Version    int             `json:"version"`
	Queue      string          `json:"queue"`
	Priority   int             `json:"priority"`
	Status     string          `json:"status"`
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	ParentID   string          `json:"parent_id,omitempty"`
	CreatedAt  time.Time       `json:"created_at,omitzero"`
	StartedAt  time.Time       `json:"started_at,omitzero"`
	FinishedAt time.Time       `json:"finished_at,omitzero"`
	// Values are the run's context values (flow.WithValue), which a
	// replay gives its code as the run's executions had them.
	Values map[string]string `json:"values,omitempty"`
}

// Step is an exported step call (a step, a wait, a child, a race, a
// recorded Now).
type Step struct {
	Name                 string          `json:"name"`
	Occurrence           int             `json:"occurrence"`
	Position             int             `json:"position"`
	Status               string          `json:"status"`
	Attempts             int             `json:"attempts"`
	Input                json.RawMessage `json:"input"`
	Output               json.RawMessage `json:"output,omitempty"`
	Error                string          `json:"error,omitempty"`
	ErrorCode            string          `json:"error_code,omitempty"`
	ErrorPermanent       bool            `json:"error_permanent,omitempty"`
	ErrorDetails         json.RawMessage `json:"error_details,omitempty"`
	Compensable          bool            `json:"compensable,omitempty"`
	Compensation         string          `json:"compensation"`
	CompensationAttempts int             `json:"compensation_attempts,omitempty"`
	CompensationError    string          `json:"compensation_error,omitempty"`
	CompletedSeq         int64           `json:"completed_seq,omitempty"`
	StartedAt            time.Time       `json:"started_at,omitzero"`
	FinishedAt           time.Time       `json:"finished_at,omitzero"`
}

// Signal is an exported signal sent to the run.
type Signal struct {
	ID         int64           `json:"id"`
	Name       string          `json:"name"`
	Payload    json.RawMessage `json:"payload"`
	Key        string          `json:"key,omitempty"`
	SentAt     time.Time       `json:"sent_at,omitzero"`
	ReceivedBy string          `json:"received_by,omitempty"`
}

// Event is an exported history event.
type Event struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"`
	Step       string    `json:"step,omitempty"`
	Occurrence int       `json:"occurrence,omitempty"`
	Attempt    int       `json:"attempt,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

// Write writes h as indented JSON, setting its format and version.
func (h *History) Write(w io.Writer) error {
	h.Format, h.Version = Format, Version
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(h); err != nil {
		return fmt.Errorf("write history of run %s: %w", h.Run.ID, err)
	}
	return nil
}

// Read reads a history file and checks it: its format and version, and
// that the run, its steps and events name what a replay needs. An error
// matches ErrFormat and says what is wrong.
func Read(r io.Reader) (*History, error) {
	var probe struct {
		Format  *string `json:"format"`
		Version *int    `json:"version"`
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", ErrFormat, err)
	}
	switch {
	case probe.Format == nil:
		return nil, fmt.Errorf("%w: no \"format\" field (want %q)", ErrFormat, Format)
	case *probe.Format != Format:
		return nil, fmt.Errorf("%w: format %q, want %q", ErrFormat, *probe.Format, Format)
	case probe.Version == nil:
		return nil, fmt.Errorf("%w: no \"version\" field", ErrFormat)
	case *probe.Version != Version:
		return nil, fmt.Errorf("%w: format version %d is not supported (this flowlite reads version %d)", ErrFormat, *probe.Version, Version)
	}
	var h History
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("%w: version %d: %v", ErrFormat, Version, err)
	}
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return &h, nil
}

func (h *History) check() error {
	switch {
	case h.Run.ID == "":
		return errors.New("run.id is empty")
	case h.Run.Workflow == "":
		return fmt.Errorf("run %s: run.workflow is empty", h.Run.ID)
	case h.Run.Status == "":
		return fmt.Errorf("run %s: run.status is empty", h.Run.ID)
	case !json.Valid(h.Run.Input):
		return fmt.Errorf("run %s: run.input is not JSON", h.Run.ID)
	}
	seen := map[string]bool{}
	for i, s := range h.Steps {
		if s.Name == "" || s.Status == "" {
			return fmt.Errorf("run %s: steps[%d] has no name or no status", h.Run.ID, i)
		}
		id := fmt.Sprintf("%s#%d", s.Name, s.Occurrence)
		if seen[id] {
			return fmt.Errorf("run %s: step %s appears twice", h.Run.ID, id)
		}
		seen[id] = true
	}
	for i, ev := range h.Events {
		if ev.Kind == "" {
			return fmt.Errorf("run %s: events[%d] has no kind", h.Run.ID, i)
		}
	}
	return nil
}
