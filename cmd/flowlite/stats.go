package main

import (
	"maps"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// statsJSON is stats --json output: a count for every state, zeros included.
type statsJSON struct {
	Runs  map[flow.RunStatus]int64 `json:"runs"`
	Total int64                    `json:"total"`
}

func (a *app) statsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Count runs by status",
		Long: `Count the runs of the database in each state.

Runs waiting for an engine that registers their workflow version are not
reported: that needs the registered workflows of the engines, which the CLI
does not have. Engines log such runs once a minute.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			return a.withReader(cmd.Context(), func(e *flow.Engine) error {
				counts, err := e.CountRuns(cmd.Context())
				if err != nil {
					return err
				}
				out := statsJSON{Runs: make(map[flow.RunStatus]int64, len(statuses))}
				for _, st := range statuses {
					out.Runs[st] = 0
				}
				for st, n := range counts {
					out.Runs[st] = n
					out.Total += n
				}
				if a.json {
					return writeJSON(a.stdout, out)
				}
				t := newTable(a.stdout, "STATUS", "RUNS")
				for _, st := range statuses {
					t.row(string(st), strconv.FormatInt(out.Runs[st], 10))
				}
				for _, st := range slices.Sorted(maps.Keys(counts)) {
					if !slices.Contains(statuses, st) { // written by a newer flowlite
						t.row(cell(string(st), 0), strconv.FormatInt(counts[st], 10))
					}
				}
				t.row("total", strconv.FormatInt(out.Total, 10))
				return t.flush()
			})
		}),
	}
}
