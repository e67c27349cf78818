package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// resetJSON is the --json output of reset, revive and fork.
type resetJSON struct {
	Run       string         `json:"run"`
	Action    string         `json:"action"`
	Fork      string         `json:"fork,omitempty"` // fork: the new run
	Status    flow.RunStatus `json:"status"`         // of the run (reset, revive) or the fork
	From      string         `json:"from"`           // the history event's description of the call gone back to
	Discarded []string       `json:"discarded"`      // reset, revive: the calls that run again
	Copied    []string       `json:"copied"`         // fork: the calls the fork was given
	Message   string         `json:"message"`
}

// markedList splits an event detail ending with marker and a JSON array of
// calls into what comes before and the calls.
func markedList(detail, marker string) (string, []string) {
	i := strings.LastIndex(detail, marker)
	if i < 0 {
		return detail, nil
	}
	var calls []string
	if json.Unmarshal([]byte(detail[i+len(marker):]), &calls) != nil {
		return detail, nil
	}
	return detail[:i], calls
}

// lastOf returns the detail of the newest event of kind in the run's
// history.
func lastOf(ctx context.Context, e *flow.Engine, id, kind string) (string, error) {
	h, err := e.History(ctx, id)
	if err != nil {
		return "", runError(id, err)
	}
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == kind {
			return h[i].Detail, nil
		}
	}
	return "", fmt.Errorf("run %s has no %s event", id, kind)
}

func listOrNone(calls []string) string {
	if len(calls) == 0 {
		return "none"
	}
	return strings.Join(calls, ", ")
}

// goBack runs reset or revive on run id and reports what it discarded.
func (a *app) goBack(cmd *cobra.Command, action, id string, do func(ctx context.Context, e *flow.Engine) error) error {
	ctx := cmd.Context()
	return a.withEngine(ctx, func(e *flow.Engine) error {
		if err := do(ctx, e); err != nil {
			return runError(id, err)
		}
		detail, err := lastOf(ctx, e, id, flow.EventRunReset)
		if err != nil {
			return err
		}
		after, err := e.Inspect(ctx, id)
		if err != nil {
			return runError(id, err)
		}
		from, discarded := markedList(detail, "; discarded: ")
		msg := fmt.Sprintf("run %s %s; runs again: %s; now %s: %s", id, from, listOrNone(discarded), after.Status, pickup(after))
		if a.json {
			return writeJSON(a.stdout, resetJSON{Run: id, Action: action, Status: after.Status, From: from,
				Discarded: discarded, Copied: []string{}, Message: msg})
		}
		_, err = fmt.Fprintln(a.stdout, msg)
		return err
	})
}

// runStepArgs checks the arguments RUN STEP.
func runStepArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 2 {
		return usageErrorf("expected a run ID and a step (name#occurrence, as flowlite show prints it), got %d arguments", len(args))
	}
	if args[1] == "" {
		return usageErrorf("empty step")
	}
	return oneRunArg(cmd, args[:1])
}

func (a *app) resetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reset RUN STEP",
		Short: "Run a run again from one of its steps, under its own ID",
		Long: `Reset a run to one of its calls and run it again from there, under its own
ID: the records of the calls before STEP are kept and replay as recorded;
STEP and every call after it run again. STEP is a call of the workflow body
as flowlite show prints it, name#occurrence (a bare name is #0), not one
inside a parallel call's branches: a parallel call runs again whole unless
all of it came before STEP. Signals the discarded receives took are
delivered again. The history records a run_reset event.

A finished run (completed, failed, cancelled), a suspended one, and a
pending or waiting one that no engine holds can be reset. A running or
compensating run, a requeued dead letter (fork it), a step the run never
reached, a step after one whose compensation ran, and a step at or before
the start of a child whose run still exists (delete the child, or fork)
are refused, and nothing changes (exit code 1).`,
		Args: runStepArgs,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.goBack(cmd, "reset", args[0], func(ctx context.Context, e *flow.Engine) error {
				return e.Reset(ctx, args[0], args[1])
			})
		}),
	}
}

func (a *app) reviveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revive RUN",
		Short: "Bring a cancelled or failed run back under its own ID",
		Long: `Bring a cancelled run, or a failed one (a dead letter), back to work under
its own ID, where retry would start a new run: it goes back to the first
call that did not complete or whose effect a compensation undid, and runs
again from there, as reset does; the calls before it replay as recorded.
The history records a run_reset event.

A suspended run (resume it), a completed one (reset it), an unfinished one,
and a requeued dead letter are refused, and nothing changes (exit code 1).`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			return a.goBack(cmd, "revive", args[0], func(ctx context.Context, e *flow.Engine) error {
				return e.Revive(ctx, args[0])
			})
		}),
	}
}

func (a *app) forkCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "fork RUN STEP",
		Short: "Start a new run from one of a run's steps",
		Long: `Start a new run, RUN/fork-N, that begins at one of RUN's calls: the records
of the calls before STEP (chosen as for reset) are copied to it and replay
there, and it runs STEP and what follows. It has RUN's workflow version,
queue, priority and input, no parent and no unique key, and starts children
of its own. RUN is left as it is, in any state, but for a run_forked event
naming the fork.

A step the run never reached, and a step after one whose compensation ran,
are refused, and nothing changes (exit code 1).`,
		Args: runStepArgs,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			return a.withEngine(ctx, func(e *flow.Engine) error {
				forkID, err := e.Fork(ctx, id, args[1])
				if err != nil {
					return runError(id, err)
				}
				detail, err := lastOf(ctx, e, forkID, flow.EventRunStarted)
				if err != nil {
					return err
				}
				after, err := e.Inspect(ctx, forkID)
				if err != nil {
					return runError(forkID, err)
				}
				started, copied := markedList(detail, "; copied: ")
				from := started
				if i := strings.Index(started, ", fork of "); i >= 0 {
					from = strings.TrimPrefix(started[i+len(", fork of "):], id+" ")
				}
				msg := fmt.Sprintf("run %s forked as %s %s; copied: %s; the fork is %s: %s", id, forkID, from, listOrNone(copied), after.Status, pickup(after))
				if a.json {
					return writeJSON(a.stdout, resetJSON{Run: id, Action: "fork", Fork: forkID, Status: after.Status, From: from,
						Discarded: []string{}, Copied: copied, Message: msg})
				}
				_, err = fmt.Fprintln(a.stdout, msg)
				return err
			})
		}),
	}
}
