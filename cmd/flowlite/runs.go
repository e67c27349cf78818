package main

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// statuses are the run states, in lifecycle order.
var statuses = []flow.RunStatus{
	flow.StatusPending, flow.StatusRunning, flow.StatusWaiting, flow.StatusCompensating,
	flow.StatusCompleted, flow.StatusFailed, flow.StatusSuspended, flow.StatusCancelled,
}

func statusNames() string {
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseStatus accepts a run state in any case; "" means all.
func parseStatus(s string) (flow.RunStatus, error) {
	if s == "" {
		return "", nil
	}
	for _, st := range statuses {
		if strings.EqualFold(s, string(st)) {
			return st, nil
		}
	}
	return "", usageErrorf("invalid --status %q: must be one of %s", s, statusNames())
}

// runJSON is a run in --json output. Field names are part of the CLI's
// contract; times are UTC RFC 3339.
type runJSON struct {
	ID              string          `json:"id"`
	Workflow        string          `json:"workflow"`
	Version         int             `json:"version"`
	Queue           string          `json:"queue"`
	Priority        int             `json:"priority"`
	Status          flow.RunStatus  `json:"status"`
	CancelRequested bool            `json:"cancel_requested"`
	Error           string          `json:"error,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	Output          json.RawMessage `json:"output,omitempty"`
	RunAt           time.Time       `json:"run_at,omitzero"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      time.Time       `json:"finished_at,omitzero"`
}

func newRunJSON(r flow.RunInfo) runJSON {
	return runJSON{
		ID: r.ID, Workflow: r.Workflow, Version: r.Version, Queue: r.Queue, Priority: r.Priority,
		Status: r.Status, CancelRequested: r.CancelRequested, Error: r.Error, Reason: r.Reason,
		Input: r.Input, Output: r.Output, RunAt: utc(r.RunAt), CreatedAt: utc(r.CreatedAt),
		UpdatedAt: utc(r.UpdatedAt), FinishedAt: utc(r.FinishedAt),
	}
}

// statusText is a run's status for tables, flagging a pending cancellation.
func statusText(r flow.RunInfo) string {
	if r.CancelRequested && r.Status != flow.StatusCancelled {
		return string(r.Status) + " (cancel requested)"
	}
	return string(r.Status)
}

// problem is what went wrong with a run, in one line: for a suspended run
// why it is suspended, for others the workflow's error. show prints both.
func problem(r flow.RunInfo) string {
	if r.Reason != "" && (r.Status == flow.StatusSuspended || r.Error == "") {
		return r.Reason
	}
	return r.Error
}

func (a *app) runsCommand() *cobra.Command {
	var status, workflow, queue, since, until string
	var limit int
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first",
		Long: `List runs, newest first, optionally filtered by status, workflow, queue
and creation time.

Statuses: ` + statusNames() + `.

--since and --until take a time (2006-01-02, 2006-01-02T15:04,
2006-01-02T15:04:05, RFC 3339; local time unless it carries a zone) or a
duration before now (90s, 15m, 2h, 3d, 1w). --since is inclusive, --until
exclusive.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			st, err := parseStatus(status)
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageErrorf("invalid --limit %d: must be at least 1", limit)
			}
			window, err := parseWindow(since, until, time.Now())
			if err != nil {
				return err
			}
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				f := flow.RunFilter{Status: st, Workflow: workflow, Queue: queue, Limit: limit}
				runs, err := listRunsIn(cmd.Context(), e, f, window)
				if err != nil {
					return err
				}
				if a.json {
					out := make([]runJSON, len(runs))
					for i, r := range runs {
						out[i] = newRunJSON(r)
					}
					return writeJSON(a.stdout, out)
				}
				t := newTable(a.stdout, "ID", "WORKFLOW", "QUEUE", "STATUS", "CREATED", "UPDATED", "ERROR/REASON")
				for _, r := range runs {
					t.row(cell(r.ID, 0), cell(workflowName(r.Workflow, r.Version), 0), cell(r.Queue, 0), statusText(r),
						tableTime(r.CreatedAt), tableTime(r.UpdatedAt), cell(problem(r), 60))
				}
				return t.flush()
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&status, "status", "", "only runs in this state ("+statusNames()+")")
	f.StringVar(&workflow, "workflow", "", "only runs of this workflow (name, any version)")
	f.StringVar(&queue, "queue", "", "only runs of this queue")
	f.IntVar(&limit, "limit", 100, "list at most this many runs")
	f.StringVar(&since, "since", "", "only runs created at or after this time or this long ago (2h, 3d, 2006-01-02…)")
	f.StringVar(&until, "until", "", "only runs created before this time or this long ago")
	return cmd
}
