package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// actionJSON is the --json output of an operator action: the run as it is
// right after the action.
type actionJSON struct {
	Run             string         `json:"run"`
	Action          string         `json:"action"`
	Status          flow.RunStatus `json:"status"`
	CancelRequested bool           `json:"cancel_requested"`
	Skipped         []string       `json:"skipped,omitempty"` // skip: the compensations skipped
	Message         string         `json:"message"`
}

// operation is one operator action on a run: do applies it and returns what
// it skipped, if anything; describe says what happened, given the run before
// and after.
type operation struct {
	name     string
	do       func(ctx context.Context, e *flow.Engine, before flow.RunInfo) ([]string, error)
	describe func(before, after flow.RunInfo, skipped []string) string
}

func (a *app) operate(cmd *cobra.Command, id string, op operation) error {
	ctx := cmd.Context()
	return a.withEngine(ctx, func(e *flow.Engine) error {
		before, err := e.Inspect(ctx, id)
		if err != nil {
			return runError(id, err)
		}
		skipped, err := op.do(ctx, e, before)
		if err != nil {
			return runError(id, err)
		}
		after, err := e.Inspect(ctx, id)
		if err != nil {
			return runError(id, err)
		}
		msg := op.describe(before, after, skipped)
		if a.json {
			return writeJSON(a.stdout, actionJSON{Run: id, Action: op.name, Status: after.Status,
				CancelRequested: after.CancelRequested, Skipped: skipped, Message: msg})
		}
		_, err = fmt.Fprintln(a.stdout, msg)
		return err
	})
}

// pickup says when an engine acts on a run that an operator changed.
func pickup(r flow.RunInfo) string {
	return fmt.Sprintf("an engine working queue %q takes it up within its poll interval", r.Queue)
}

func (a *app) cancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run",
		Long: `Cancel a run.

A run that no engine executes (pending, delayed, waiting, suspended) is
cancelled at once, unless it completed steps with compensations: it is then
compensating, and an engine working its queue runs the compensations when it
claims it, then ends it cancelled. For a run in progress the cancellation is
recorded, and the engine executing it sees it within its heartbeat interval
(its step sees it through its context), compensates the completed steps and
ends it cancelled. A finished run cannot be cancelled (exit code 1).`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.operate(cmd, args[0], operation{
				name: "cancel",
				do: func(ctx context.Context, e *flow.Engine, _ flow.RunInfo) ([]string, error) {
					return nil, e.Cancel(ctx, args[0])
				},
				describe: func(before, after flow.RunInfo, _ []string) string {
					if after.Status == flow.StatusCancelled {
						return fmt.Sprintf("run %s cancelled (it was %s)", after.ID, before.Status)
					}
					if after.Status == flow.StatusCompensating && before.Status != flow.StatusCompensating {
						return fmt.Sprintf("run %s is compensating (it was %s): %s, runs its compensations and ends it cancelled",
							after.ID, before.Status, pickup(after))
					}
					return fmt.Sprintf("cancellation of run %s requested (it is %s): the engine working it sees the request within its heartbeat interval; its completed steps are then compensated",
						after.ID, after.Status)
				},
			})
		}),
	}
}

func (a *app) resumeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "resume RUN",
		Short: "Put a suspended run back to work",
		Long: `Resume a suspended run: its failed compensations get a fresh set of
attempts, or, for a run suspended before its workflow failed, the workflow
runs again. A running engine picks the run up within its poll interval. Only
a suspended run can be resumed (otherwise exit code 1).`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.operate(cmd, args[0], operation{
				name: "resume",
				do: func(ctx context.Context, e *flow.Engine, _ flow.RunInfo) ([]string, error) {
					return nil, e.Resume(ctx, args[0])
				},
				describe: func(_, after flow.RunInfo, _ []string) string {
					what := "its workflow runs again"
					if after.Status == flow.StatusCompensating {
						what = "its failed compensations run again"
					}
					return fmt.Sprintf("run %s resumed (now %s): %s when %s", after.ID, after.Status, what, pickup(after))
				},
			})
		}),
	}
}

func (a *app) skipCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "skip RUN",
		Short: "Skip the failed compensations of a suspended run",
		Long: `Mark the failed compensations of a suspended run as skipped, without
running them (their effects need no undo, or were undone by hand), and let the
unwind continue with the remaining compensations. A running engine picks the
run up within its poll interval. Only a suspended run with a failed
compensation can be skipped (otherwise exit code 1).`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.operate(cmd, args[0], operation{
				name: "skip",
				do: func(ctx context.Context, e *flow.Engine, before flow.RunInfo) ([]string, error) {
					if err := e.Skip(ctx, args[0]); err != nil {
						return nil, err
					}
					var skipped []string
					for _, s := range before.Steps {
						if s.Compensation == "failed" {
							skipped = append(skipped, stepName(s.Name, s.Occurrence))
						}
					}
					return skipped, nil
				},
				describe: func(_, after flow.RunInfo, skipped []string) string {
					return fmt.Sprintf("run %s: skipped the failed compensation of %s (now %s): the unwind continues when %s",
						after.ID, strings.Join(skipped, ", "), after.Status, pickup(after))
				},
			})
		}),
	}
}
