package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// eventJSON is a history event in --json output.
type eventJSON struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Kind       string    `json:"kind"`
	Step       string    `json:"step,omitempty"`
	Occurrence int       `json:"occurrence"`
	Attempt    int       `json:"attempt,omitempty"`
	Detail     string    `json:"detail,omitempty"`
}

func (a *app) historyCommand() *cobra.Command {
	var relative, export bool
	var output string
	cmd := &cobra.Command{
		Use:   "history RUN",
		Short: "Show the events of a run, oldest first",
		Long: `Show the history of a run, oldest event first: when (RFC 3339 with
milliseconds, or with --relative the milliseconds since the first event), the
kind of event, the step call (name#occurrence) and attempt it concerns, and
its detail.

With --export, write everything recorded about the run (the run, its step
calls with inputs and outputs, its signals and events) as a versioned JSON
history file (package flowhistory documents the format) to stdout, or to
--output FILE; flowtest.ReplayFile replays it against changed workflow code.`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if output != "" && !export {
				return usageErrorf("--output needs --export")
			}
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				if export {
					return a.exportHistory(cmd.Context(), e, id, output)
				}
				events, err := e.History(cmd.Context(), id)
				if err != nil {
					return runError(id, err)
				}
				if a.json {
					out := make([]eventJSON, len(events))
					for i, ev := range events {
						out[i] = eventJSON{ID: ev.ID, At: utc(ev.At), Kind: ev.Kind, Step: ev.Step,
							Occurrence: ev.Occurrence, Attempt: ev.Attempt, Detail: ev.Detail}
					}
					return writeJSON(a.stdout, out)
				}
				t := newTable(a.stdout, "TIME", "KIND", "STEP", "ATTEMPT", "DETAIL")
				for _, ev := range events {
					when := rfcMillis(ev.At)
					if relative {
						when = fmt.Sprintf("+%dms", ev.At.Sub(events[0].At).Milliseconds())
					}
					attempt := "-"
					if ev.Attempt > 0 {
						attempt = strconv.Itoa(ev.Attempt)
					}
					t.row(when, cell(ev.Kind, 0), cell(stepName(ev.Step, ev.Occurrence), 0), attempt, cell(ev.Detail, 0))
				}
				return t.flush()
			})
		}),
	}
	cmd.Flags().BoolVar(&relative, "relative", false, "print times as milliseconds since the first event")
	cmd.Flags().BoolVar(&export, "export", false, "write the run's history file (versioned JSON, for flowtest.ReplayFile)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "with --export, write to `FILE` instead of stdout")
	return cmd
}
