package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// stream prints a run's stream, from a position on, in the table and in
// --json, --follow ends with the finished run, and show lists the run's
// streams with their lengths.
func TestStreamPrintsARunsStream(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		wf := flow.Workflow[int, int]{Name: "streamer", Run: func(wc flow.Context, n int) (int, error) {
			for i := range n {
				if _, err := flow.WriteStream(wc, "tokens", fmt.Sprintf("t%d", i)); err != nil {
					return 0, err
				}
			}
			return n, flow.CloseStream(wc, "done")
		}}
		flow.Register(e, wf)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		run, err := flow.Start(ctx, e, wf, 3, &flow.StartOptions{RunID: "str"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			t.Fatal(err)
		}
		if out := cli("stream", "str", "tokens", "--from", "1"); out != "1\t\"t1\"\n2\t\"t2\"\n" {
			t.Errorf("stream --from 1:\n%q", out)
		}
		if out := cli("stream", "str", "tokens", "--follow"); strings.Count(out, "\n") != 3 {
			t.Errorf("stream --follow of a finished run:\n%s", out)
		}
		got := decode[streamMessageJSON](t, cli("stream", "--json", "str", "tokens", "--from", "2"))
		if got.Position != 2 || string(got.Value) != `"t2"` || got.Step != flow.StreamStepPrefix+"tokens" {
			t.Errorf("stream --json: %+v", got)
		}
		out := cli("show", "str")
		var rows []string
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "Stream" {
				rows = append(rows, strings.Join(f, " "))
			}
		}
		if strings.Join(rows, "; ") != "Stream done 0 messages, closed; Stream tokens 3 messages, open" {
			t.Errorf("stream rows %q in:\n%s", rows, out)
		}
		detail := decode[runDetailJSON](t, cli("show", "--json", "str"))
		if fmt.Sprint(detail.Streams) != "[{done 0 true} {tokens 3 false}]" {
			t.Errorf("show --json: streams %+v", detail.Streams)
		}
	})
}
