package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// cleanJSON is the --json output of clean.
type cleanJSON struct {
	Deleted   int     `json:"deleted"`
	Seconds   float64 `json:"seconds"`
	Completed string  `json:"completed_after"`
	Failed    string  `json:"failed_after"`
	Cancelled string  `json:"cancelled_after"`
}

func (a *app) cleanCommand() *cobra.Command {
	var completed, failed, cancelled time.Duration
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Delete finished runs past their retention now",
		Long: `Delete finished runs (completed, failed, cancelled) older than their
retention, with their steps, history and signals, in small batches, as the
engines' cleaner does once a minute. Running, pending, waiting, compensating
and suspended runs are never deleted. A negative age keeps that state forever.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			a.retention = flow.Retention{Completed: completed, Failed: failed, Cancelled: cancelled}
			ctx := cmd.Context()
			return a.withEngine(ctx, func(e *flow.Engine) error {
				start := time.Now()
				stop := a.progress("cleaning")
				n, err := e.Clean(ctx)
				stop()
				if err != nil {
					return fmt.Errorf("clean: %w (%d runs deleted before the error)", err, n)
				}
				took := time.Since(start)
				if a.json {
					return writeJSON(a.stdout, cleanJSON{Deleted: n, Seconds: took.Seconds(),
						Completed: completed.String(), Failed: failed.String(), Cancelled: cancelled.String()})
				}
				_, err = fmt.Fprintf(a.stdout, "deleted %d finished run(s) in %s (completed after %s, failed after %s, cancelled after %s)\n",
					n, took.Round(time.Millisecond), completed, failed, cancelled)
				return err
			})
		}),
	}
	cmd.Flags().DurationVar(&completed, "completed", flow.DefaultRetainCompleted, "age after which completed runs are deleted")
	cmd.Flags().DurationVar(&failed, "failed", flow.DefaultRetainFailed, "age after which failed runs are deleted")
	cmd.Flags().DurationVar(&cancelled, "cancelled", flow.DefaultRetainCancelled, "age after which cancelled runs are deleted")
	return cmd
}
