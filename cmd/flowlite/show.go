package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// stepJSON is a step call in --json output.
type stepJSON struct {
	Name                 string          `json:"name"`
	Occurrence           int             `json:"occurrence"`
	Status               string          `json:"status"`
	Attempts             int             `json:"attempts"`
	Error                string          `json:"error,omitempty"`
	Input                json.RawMessage `json:"input,omitempty"`
	Output               json.RawMessage `json:"output,omitempty"`
	Compensation         string          `json:"compensation"`
	CompensationAttempts int             `json:"compensation_attempts"`
	CompensationError    string          `json:"compensation_error,omitempty"`
	StartedAt            time.Time       `json:"started_at,omitzero"`
	FinishedAt           time.Time       `json:"finished_at,omitzero"`
	// Progress is the latest progress of the step's current attempt
	// (flow.SetProgress).
	Progress *flow.Progress `json:"progress,omitempty"`
}

// runDetailJSON is a run with its steps, as show --json prints it.
type runDetailJSON struct {
	runJSON
	startJSON
	executionJSON
	ConcurrencyKey string     `json:"concurrency_key,omitempty"`
	HeldBy         string     `json:"held_by,omitempty"`
	Steps          []stepJSON `json:"steps"`
	// Published is what the run published (flow.Publish), latest per key.
	Published map[string]json.RawMessage `json:"published,omitempty"`
	// Streams are the run's streams (flow.WriteStream), by name.
	Streams []streamJSON `json:"streams,omitempty"`
}

// streamJSON is a run's stream in show --json output.
type streamJSON struct {
	Name   string `json:"name"`
	Length int64  `json:"length"`
	Closed bool   `json:"closed"`
}

func (a *app) showCommand() *cobra.Command {
	var at string
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run and its step timeline",
		Long: `Show a run: its state, then one line per step call in the order the calls
started, with the step's status, attempts and duration, and the state of its
compensation. A step call is written name#occurrence, the occurrence counting
the earlier calls of the same step in the run, from 0.

With --at TIME, show the run as it stood then, rebuilt from its history: its
status, steps with their outputs, open waits, received signals and
compensations. TIME is a time (2006-01-02T15:04:05.000, RFC 3339), a duration
before now (90s, 2h), or +DURATION after the run's first event (+1.5s, the
times history --relative prints).`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				if cmd.Flags().Changed("at") {
					return a.showAt(cmd.Context(), e, id, at)
				}
				info, err := e.Inspect(cmd.Context(), id)
				if err != nil {
					return runError(id, err)
				}
				held := ""
				if info.Status == flow.StatusPending {
					if held, err = e.HeldBy(cmd.Context(), id); err != nil {
						return runError(id, err)
					}
				}
				streams, err := flow.Streams(cmd.Context(), e, id)
				if err != nil {
					return runError(id, err)
				}
				if a.json {
					out := newRunDetailJSON(info)
					out.ConcurrencyKey, out.HeldBy = info.ConcurrencyKey, held
					for _, s := range streams {
						out.Streams = append(out.Streams, streamJSON{Name: s.Name, Length: s.Length, Closed: s.Closed})
					}
					return writeJSON(a.stdout, out)
				}
				return a.printRun(info, held, streams...)
			})
		}),
	}
	cmd.Flags().StringVar(&at, "at", "", "show the run as it stood at `TIME`, rebuilt from its history")
	return cmd
}

func newRunDetailJSON(info flow.RunInfo) runDetailJSON {
	out := runDetailJSON{runJSON: newRunJSON(info), startJSON: newStartJSON(info), executionJSON: newExecutionJSON(info), Steps: make([]stepJSON, len(info.Steps))}
	for i, s := range info.Steps {
		out.Steps[i] = stepJSON{
			Name: s.Name, Occurrence: s.Occurrence, Status: s.Status, Attempts: s.Attempts, Error: s.Error,
			Input: s.Input, Output: s.Output, Compensation: s.Compensation,
			CompensationAttempts: s.CompensationAttempts, CompensationError: s.CompensationError,
			StartedAt: utc(s.StartedAt), FinishedAt: utc(s.FinishedAt), Progress: s.Progress,
		}
	}
	if p := flow.Published(info); len(p) > 0 {
		out.Published = p
	}
	return out
}

func (a *app) printRun(info flow.RunInfo, held string, streams ...flow.StreamInfo) error {
	h := newTable(a.stdout, "Run", cell(info.ID, 0))
	h.row("Status", statusText(info))
	h.row("Workflow", cell(info.Workflow, 0)+" version "+strconv.Itoa(info.Version))
	executionRow(h, info)
	h.row("Queue", fmt.Sprintf("%s (priority %d)", cell(info.Queue, 0), info.Priority))
	h.row("Created", rfcMillis(info.CreatedAt))
	h.row("Updated", rfcMillis(info.UpdatedAt))
	if info.Status == flow.StatusPending {
		h.row("Due", rfcMillis(info.RunAt))
	}
	h.row("Finished", rfcMillis(info.FinishedAt))
	startRows(h, info)
	if info.ConcurrencyKey != "" {
		h.row("Concurrency key", cell(info.ConcurrencyKey, 0))
	}
	if held != "" {
		h.row("Held back", cell(held, 0))
	}
	if info.Error != "" {
		h.row("Error", cell(info.Error, 0))
	}
	if info.Reason != "" {
		h.row("Reason", cell(info.Reason, 0))
	}
	h.row("Input", cell(string(info.Input), 100))
	if len(info.Output) > 0 {
		h.row("Output", cell(string(info.Output), 100))
	}
	published := flow.Published(info)
	for _, k := range slices.Sorted(maps.Keys(published)) {
		h.row("Published "+cell(k, 0), cell(string(published[k]), 100))
	}
	for _, s := range info.Steps {
		if s.Progress != nil {
			h.row("Progress "+cell(stepName(s.Name, s.Occurrence), 0), cell(strings.TrimSpace(progressAmount(*s.Progress)+" "+s.Progress.Message), 100))
		}
	}
	for _, s := range streams {
		state := "open"
		if s.Closed {
			state = "closed"
		}
		h.row("Stream "+cell(s.Name, 0), fmt.Sprintf("%d messages, %s", s.Length, state))
	}
	if err := h.flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	if len(info.Steps) == 0 {
		_, err := fmt.Fprintln(a.stdout, "No steps recorded.")
		return err
	}
	t := newTable(a.stdout, "STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR", "COMPENSATION", "COMP.ATTEMPTS", "COMP.ERROR")
	for _, s := range info.Steps {
		compAttempts := "-"
		if s.CompensationAttempts > 0 {
			compAttempts = strconv.Itoa(s.CompensationAttempts)
		}
		t.row(cell(stepName(s.Name, s.Occurrence), 0), cell(s.Status, 0), strconv.Itoa(s.Attempts),
			duration(s.StartedAt, s.FinishedAt), cell(s.Error, 50),
			cell(s.Compensation, 0), compAttempts, cell(s.CompensationError, 50))
	}
	return t.flush()
}
