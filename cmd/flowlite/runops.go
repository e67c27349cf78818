package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// deleteJSON is the --json output of delete.
type deleteJSON struct {
	Run     string         `json:"run"`
	Action  string         `json:"action"`
	Was     flow.RunStatus `json:"was"` // the state of the run deleted
	Message string         `json:"message"`
}

func (a *app) deleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete RUN",
		Short: "Delete a finished run with its steps and history",
		Long: `Delete a finished (completed, failed or cancelled) run with its steps,
history and signals. A unique key the run held is free again. An unfinished
run (cancel it first), or a finished child whose parent has not finished
(the parent may still read its outcome), is refused and nothing changes
(exit code 1). To delete many dead letters at once, use dead purge.`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			return a.withEngine(ctx, func(e *flow.Engine) error {
				before, err := e.Inspect(ctx, id)
				if err != nil {
					return runError(id, err)
				}
				if err := e.DeleteRun(ctx, id); err != nil {
					return runError(id, err)
				}
				msg := fmt.Sprintf("run %s deleted (it was %s), with its steps and history", id, before.Status)
				if a.json {
					return writeJSON(a.stdout, deleteJSON{Run: id, Action: "delete", Was: before.Status, Message: msg})
				}
				_, err = fmt.Fprintln(a.stdout, msg)
				return err
			})
		}),
	}
}

func (a *app) runNowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "run-now RUN",
		Short: "Make a delayed or backing-off run due now",
		Long: `Make a pending run due now: a run started with a delay, or one waiting out
the backoff before the next attempt of a step (its attempt count does not
change). A running engine takes it up within its poll interval. A run due
already is left as it is. A finished, running, waiting (for a timer, a
signal or a child), compensating or suspended run is refused and nothing
changes (exit code 1).`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.operate(cmd, args[0], operation{
				name: "run-now",
				do: func(ctx context.Context, e *flow.Engine, _ flow.RunInfo) ([]string, error) {
					return nil, e.RunNow(ctx, args[0])
				},
				describe: func(before, after flow.RunInfo, _ []string) string {
					if !after.RunAt.Before(before.RunAt) {
						return fmt.Sprintf("run %s was due already (it is %s): %s", after.ID, after.Status, pickup(after))
					}
					return fmt.Sprintf("run %s is due now (it was due at %s): %s",
						after.ID, before.RunAt.UTC().Format(time.RFC3339), pickup(after))
				},
			})
		}),
	}
}
