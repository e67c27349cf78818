package main

import (
	"context"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// progress prints the last progress of a run's steps, as a table, as JSON
// and, with --follow on a finished run, once; show has a row per step
// that reported progress.
func TestRunProgress(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		job := flow.Job[int]{Name: "exporter", Handler: func(ctx context.Context, rows int) error {
			for i := 1; i <= rows; i++ {
				if err := flow.SetProgress(ctx, flow.Progress{Done: int64(i), Total: int64(rows * 2), Message: "exported rows"}); err != nil {
					return err
				}
			}
			return nil
		}}
		quiet := flow.Job[int]{Name: "quiet", Handler: func(context.Context, int) error { return nil }}
		flow.RegisterJob(e, job)
		flow.RegisterJob(e, quiet)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id  string
			run func() (*flow.Run[struct{}], error)
		}{
			{"exp", func() (*flow.Run[struct{}], error) {
				return flow.Enqueue(ctx, e, job, 40, &flow.EnqueueOptions{RunID: "exp"})
			}},
			{"still", func() (*flow.Run[struct{}], error) {
				return flow.Enqueue(ctx, e, quiet, 1, &flow.EnqueueOptions{RunID: "still"})
			}},
		} {
			run, err := c.run()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := run.Result(ctx); err != nil {
				t.Fatal(err)
			}
		}
		out := cli("progress", "exp")
		if row := strings.Join(rowOf(t, out, "exporter#0"), " "); !strings.HasPrefix(row, "exporter#0 1 50% (40/80) exported rows ") {
			t.Errorf("progress row %q in:\n%s", row, out)
		}
		if !strings.Contains(out, "Run exp is completed.") {
			t.Errorf("progress output lacks the run's status:\n%s", out)
		}
		got := decode[runProgressJSON](t, cli("progress", "--json", "exp"))
		if len(got.Progress) != 1 || got.Progress[0].Done != 40 || got.Progress[0].Percent == nil || *got.Progress[0].Percent != 50 ||
			got.Status != flow.StatusCompleted {
			t.Errorf("progress --json = %+v", got)
		}
		if out := cli("progress", "--follow", "exp"); strings.Count(out, "exporter#0") != 1 {
			t.Errorf("progress --follow of a finished run printed:\n%s", out)
		}
		if out := cli("progress", "still"); !strings.Contains(out, "no progress reported") {
			t.Errorf("progress of a run without any:\n%s", out)
		}
		out = cli("show", "exp")
		if row := strings.Join(rowOf(t, out, "Progress"), " "); row != "Progress exporter#0 50% (40/80) exported rows" {
			t.Errorf("show's progress row %q in:\n%s", row, out)
		}
		detail := decode[runDetailJSON](t, cli("show", "--json", "exp"))
		if p := detail.Steps[0].Progress; p == nil || p.Done != 40 || p.Total != 80 {
			t.Errorf("show --json: step progress %+v", p)
		}
	})
}
