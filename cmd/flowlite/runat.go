package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// parseDue reads the due time of run-at: "now", a duration from now (90s,
// 15m, 2h, 3d, 1w), or a time as --since takes it (local unless it has a
// zone).
func parseDue(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "now" {
		return now, nil
	}
	if d, ok := parseAgo(strings.TrimPrefix(s, "+")); ok {
		return now.Add(d), nil
	}
	for _, layout := range whenLayouts {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageErrorf("invalid due time %q: want now, a duration from now (90s, 15m, 2h, 3d, 1w) or a time (2006-01-02T15:04:05, RFC 3339)", s)
}

func (a *app) runAtCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "run-at RUN WHEN",
		Short: "Change when a pending run is due",
		Long: `Give a pending run a new due time, earlier or later: a run started with a
delay, one waiting out the backoff before the next attempt of a step (its
attempt count does not change), or one due already that no engine claimed
yet, which is put off. WHEN is now, a duration from now (90s, 15m, 2h, 3d,
1w) or a time (2006-01-02T15:04:05, local unless it has a zone, or RFC
3339). A time at or before now makes the run due now, as run-now does.

A finished, running, waiting (for a timer, a signal or a child),
compensating or suspended run is refused, and so is a run an engine claimed
while run-at read it; nothing changes then (exit code 1).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf("expected a run ID and a due time, got %d arguments", len(args))
			}
			return oneRunArg(cmd, args[:1])
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			at, err := parseDue(args[1], time.Now())
			if err != nil {
				return err
			}
			return a.operate(cmd, args[0], operation{
				name: "run-at",
				do: func(ctx context.Context, e *flow.Engine, _ flow.RunInfo) ([]string, error) {
					return nil, e.RunAt(ctx, args[0], at)
				},
				describe: func(before, after flow.RunInfo, _ []string) string {
					if after.RunAt.Equal(before.RunAt) {
						return fmt.Sprintf("run %s is due at %s already: nothing changed", after.ID, after.RunAt.UTC().Format(time.RFC3339Nano))
					}
					return fmt.Sprintf("run %s is due at %s (it was due at %s): %s",
						after.ID, after.RunAt.UTC().Format(time.RFC3339Nano), before.RunAt.UTC().Format(time.RFC3339Nano), pickup(after))
				},
			})
		}),
	}
}
