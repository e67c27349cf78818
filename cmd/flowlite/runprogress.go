package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// progressJSON is the progress of a step attempt in --json output.
type progressJSON struct {
	Step       string    `json:"step"`
	Occurrence int       `json:"occurrence"`
	Attempt    int       `json:"attempt"`
	Done       int64     `json:"done"`
	Total      int64     `json:"total,omitempty"`
	Percent    *float64  `json:"percent,omitempty"`
	Message    string    `json:"message,omitempty"`
	At         time.Time `json:"at"`
}

// runProgressJSON is what progress --json prints, once or per change.
type runProgressJSON struct {
	Run      string         `json:"run"`
	Status   flow.RunStatus `json:"status"`
	Progress []progressJSON `json:"progress"`
}

func (a *app) progressCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "progress RUN",
		Short: "Show how far a run's steps got (flow.SetProgress)",
		Long: `Show the latest progress each step attempt of a run reported through
flow.SetProgress: the step call (name#occurrence), its attempt, how much is
done of the total (with a percentage when the total is known) and its message.
A running step's value is at most a few hundred milliseconds old; a finished
step keeps its last one.

With --follow, print the progress again whenever it changes, until the run
finishes (or the command is interrupted). With --json, one JSON object per
print.`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			id := args[0]
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				if !follow {
					info, err := e.Inspect(cmd.Context(), id)
					if err != nil {
						return runError(id, err)
					}
					ps, err := flow.GetProgress(cmd.Context(), e, id)
					if err != nil {
						return runError(id, err)
					}
					return a.printProgress(id, info.Status, ps)
				}
				err := flow.WatchProgress(cmd.Context(), e, id, func(status flow.RunStatus, ps []flow.StepProgress) error {
					return a.printProgress(id, status, ps)
				})
				if errors.Is(err, context.Canceled) {
					return nil // interrupted: the watch ends as asked
				}
				return runError(id, err)
			})
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the progress again on every change, until the run finishes")
	return cmd
}

func (a *app) printProgress(id string, status flow.RunStatus, ps []flow.StepProgress) error {
	if a.json {
		out := runProgressJSON{Run: id, Status: status, Progress: make([]progressJSON, len(ps))}
		for i, p := range ps {
			out.Progress[i] = progressJSON{Step: p.Step, Occurrence: p.Occurrence, Attempt: p.Attempt,
				Done: p.Done, Total: p.Total, Message: p.Message, At: utc(p.At)}
			if pct, ok := p.Percent(); ok {
				out.Progress[i].Percent = &pct
			}
		}
		return writeJSON(a.stdout, out)
	}
	if len(ps) == 0 {
		_, err := fmt.Fprintf(a.stdout, "Run %s is %s; no progress reported.\n", cell(id, 0), status)
		return err
	}
	fmt.Fprintf(a.stdout, "Run %s is %s.\n", cell(id, 0), status)
	t := newTable(a.stdout, "STEP", "ATTEMPT", "PROGRESS", "MESSAGE", "AT")
	for _, p := range ps {
		t.row(cell(stepName(p.Step, p.Occurrence), 0), fmt.Sprint(p.Attempt), progressAmount(p.Progress),
			cell(p.Message, 60), rfcMillis(p.At))
	}
	return t.flush()
}

// progressAmount renders how much of a step is done: "40% (40/100)", or
// "40" when its total is unknown.
func progressAmount(p flow.Progress) string {
	if pct, ok := p.Percent(); ok {
		return fmt.Sprintf("%.0f%% (%d/%d)", pct, p.Done, p.Total)
	}
	return fmt.Sprint(p.Done)
}
