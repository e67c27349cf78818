package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// healthJSON is the --json output of health.
type healthJSON struct {
	Path           string          `json:"path"`
	DBBytes        int64           `json:"db_bytes"`
	WALBytes       int64           `json:"wal_bytes"`
	LastCheckpoint *checkpointInfo `json:"last_checkpoint"` // null: none recorded
	Engines        []engineJSON    `json:"engines"`
}

type checkpointInfo struct {
	At       time.Time           `json:"at"`
	By       string              `json:"by"`
	Mode     flow.CheckpointMode `json:"mode"`
	WALBytes int64               `json:"wal_bytes_before"`
	Busy     bool                `json:"busy"`
	Error    string              `json:"error,omitempty"`
}

type engineJSON struct {
	ID         string             `json:"id"`
	Host       string             `json:"host"`
	PID        int                `json:"pid"`
	StartedAt  time.Time          `json:"started_at"`
	ReportedAt time.Time          `json:"reported_at"`
	Metrics    flow.EngineMetrics `json:"metrics"`
}

func (a *app) healthCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Show the database file's WAL and last checkpoint, and the engines' reports",
		Long: `Show the health of the database file (its size, the size of its write-ahead
log, and the last checkpoint an engine ran on it: when, by which engine, in
which mode, and whether readers kept it from finishing), then what each
engine working on the database last reported: when it started and reported,
and the runs it started and finished and the step attempts it ran.

Engines write their report when they start, every report interval while they
work (10s by default), and when they stop; an idle engine writes nothing new.
Reports of engines silent for longer than the report retention (7 days by
default) are deleted by the cleaner.

To check the file's integrity, use flowlite check.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.withEngine(ctx, func(e *flow.Engine) error {
				h, err := e.FileHealth(ctx)
				if err != nil {
					return err
				}
				reports, err := e.Reports(ctx)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, newHealthJSON(h, reports))
				}
				return a.printHealth(h, reports)
			})
		}),
	}
}

func newHealthJSON(h flow.FileHealth, reports []flow.Report) healthJSON {
	out := healthJSON{Path: h.Path, DBBytes: h.DBBytes, WALBytes: h.WALBytes, Engines: make([]engineJSON, len(reports))}
	if !h.LastCheckpoint.IsZero() {
		out.LastCheckpoint = &checkpointInfo{
			At: utc(h.LastCheckpoint), By: h.LastCheckpointBy, Mode: h.LastCheckpointMode,
			WALBytes: h.LastCheckpointWALBytes, Busy: h.LastCheckpointBusy, Error: h.LastCheckpointError,
		}
	}
	for i, r := range reports {
		out.Engines[i] = engineJSON{ID: r.Owner, Host: r.Host, PID: r.PID,
			StartedAt: utc(r.StartedAt), ReportedAt: utc(r.ReportedAt), Metrics: r.Metrics}
	}
	return out
}

func (a *app) printHealth(h flow.FileHealth, reports []flow.Report) error {
	last := "none recorded"
	if !h.LastCheckpoint.IsZero() {
		last = fmt.Sprintf("%s (%s ago), %s of a %s WAL, by %s", tableTime(h.LastCheckpoint),
			roughAge(time.Since(h.LastCheckpoint)), h.LastCheckpointMode, byteSize(h.LastCheckpointWALBytes), h.LastCheckpointBy)
		switch {
		case h.LastCheckpointError != "":
			last += "; failed: " + h.LastCheckpointError
		case h.LastCheckpointBusy:
			last += "; busy: readers or writers kept it from finishing"
		}
	}
	facts := newTable(a.stdout, "FILE", cell(h.Path, 0))
	facts.row("size", byteSize(h.DBBytes))
	facts.row("WAL", byteSize(h.WALBytes))
	facts.row("last checkpoint", last)
	if err := facts.flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(a.stdout); err != nil {
		return err
	}
	if len(reports) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no engine has reported")
		return err
	}
	t := newTable(a.stdout, "ENGINE", "HOST", "PID", "STARTED", "REPORTED", "STARTED RUNS", "FINISHED RUNS", "STEP ATTEMPTS")
	for _, r := range reports {
		t.row(cell(r.Owner, 0), cell(r.Host, 0), strconv.Itoa(r.PID), tableTime(r.StartedAt), tableTime(r.ReportedAt),
			strconv.FormatInt(r.Metrics.RunsStarted, 10), strconv.FormatInt(r.Metrics.RunsFinishedTotal(), 10),
			strconv.FormatUint(r.Metrics.AttemptSeconds["step"].Count, 10))
	}
	return t.flush()
}

// roughAge prints a duration to the second, or "0s" for less.
func roughAge(d time.Duration) string {
	return max(d, 0).Truncate(time.Second).String()
}
