package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// onBothBackends runs fn on an engine (registered with pgTwice, not
// started) on a SQLite file and on a PostgreSQL schema (skipped without a
// server, as pgSchema says), with a runner of flowlite on the same
// database.
func onBothBackends(t *testing.T, fn func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		path := filepath.Join(t.TempDir(), "flow.db")
		e, err := flowsqlite.Open(ctx, path, &flow.Config{Logger: slog.New(slog.DiscardHandler)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer closeEngine(t, e)
		flow.Register(e, pgTwice)
		fn(t, ctx, e, func(args ...string) string { t.Helper(); return ok(t, path, args...) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn, schema := pgSchema(t)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		e, err := flowpg.Open(ctx, dsn, &flow.Config{Logger: slog.New(slog.DiscardHandler)}, &flowpg.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		defer closeEngine(t, e)
		flow.Register(e, pgTwice)
		fn(t, ctx, e, pgCLI(t, []string{"--db", dsn, "--schema", schema}))
	})
}

// show prints the unique key a run was started with (what later starts
// were deduplicated on) and its deadline, in the table and in --json.
func TestShowUniqueKeyAndDeadline(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		deadline := time.Date(2040, 5, 6, 7, 8, 9, 0, time.UTC)
		if _, err := flow.Start(ctx, e, pgTwice, 1, &flow.StartOptions{RunID: "keyed", UniqueKey: "order-42", Deadline: deadline}); err != nil {
			t.Fatal(err)
		}
		if _, err := flow.Start(ctx, e, pgTwice, 2, &flow.StartOptions{RunID: "plain"}); err != nil {
			t.Fatal(err)
		}
		out := cli("show", "keyed")
		if row := rowOf(t, out, "Unique"); strings.Join(row, " ") != "Unique key order-42" {
			t.Errorf("unique key row %q in:\n%s", row, out)
		}
		if row := rowOf(t, out, "Deadline"); len(row) != 2 || row[1] != "2040-05-06T07:08:09.000Z" {
			t.Errorf("deadline row %q in:\n%s", row, out)
		}
		got := decode[runDetailJSON](t, cli("show", "--json", "keyed"))
		if got.UniqueKey != "order-42" || !got.Deadline.Equal(deadline) {
			t.Errorf("show --json: unique key %q, deadline %s", got.UniqueKey, got.Deadline)
		}
		if out := cli("show", "plain"); strings.Contains(out, "Unique key") || strings.Contains(out, "Deadline") {
			t.Errorf("a run without them shows a unique key or deadline:\n%s", out)
		}
	})
}

// show prints a run's timeout, and says that a run not claimed yet has no
// deadline from it.
func TestShowTimeout(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		if _, err := flow.Start(ctx, e, pgTwice, 1, &flow.StartOptions{RunID: "timed", Timeout: 90 * time.Second}); err != nil {
			t.Fatal(err)
		}
		out := cli("show", "timed")
		if row := strings.Join(rowOf(t, out, "Timeout"), " "); row != "Timeout 1m30s from its first claim (not claimed yet: no deadline from it)" {
			t.Errorf("timeout row %q in:\n%s", row, out)
		}
		if got := decode[runDetailJSON](t, cli("show", "--json", "timed")); got.Timeout != "1m30s" {
			t.Errorf("show --json: timeout %q", got.Timeout)
		}
	})
}

// A run that took the ID of a finished one (flow.ReuseFinished) says so
// in its history, which is where an operator looks for what became of
// the run the ID named before.
func TestHistoryShowsAReusedID(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer e.Stop(ctx)
		for i, reuse := range []flow.IDReusePolicy{flow.ReuseNever, flow.ReuseFinished} {
			r, err := flow.Start(ctx, e, pgTwice, i+1, &flow.StartOptions{RunID: "again", IDReuse: reuse})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Result(ctx); err != nil {
				t.Fatal(err)
			}
		}
		out := cli("history", "again")
		if !strings.Contains(out, "reusing the ID of a completed run of twice version 1 (deleted)") {
			t.Errorf("history lacks the reuse:\n%s", out)
		}
		if got := decode[runDetailJSON](t, cli("show", "--json", "again")); string(got.Input) != "2" {
			t.Errorf("show: input %s, want the second run's", got.Input)
		}
	})
}

// show marks a detached child beside its parent.
func TestShowDetachedChild(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		parent := flow.Workflow[int, int]{Name: "detacher", Run: func(wc flow.Context, n int) (int, error) {
			c, err := flow.StartChild(wc, pgTwice, n, &flow.ChildOptions{RunID: "kid", Detached: true})
			if err != nil {
				return 0, err
			}
			return c.Result(wc)
		}}
		flow.Register(e, parent)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer e.Stop(ctx)
		r, err := flow.Start(ctx, e, parent, 2, &flow.StartOptions{RunID: "dad"})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := r.Result(ctx); err != nil || out != 8 {
			t.Fatalf("parent = %d, %v", out, err)
		}
		out := cli("show", "kid")
		if row := strings.Join(rowOf(t, out, "Parent"), " "); row != "Parent dad (detached: the parent's cancellation does not reach this run)" {
			t.Errorf("parent row %q in:\n%s", row, out)
		}
		if got := decode[runDetailJSON](t, cli("show", "--json", "kid")); !got.Detached || got.ParentID != "dad" {
			t.Errorf("show --json: detached %v, parent %q", got.Detached, got.ParentID)
		}
	})
}

// show prints a run's context values, one per row in key order.
func TestShowContextValues(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		vctx := flow.WithValues(ctx, map[string]string{"tenant": "acme", "trace": "4bf92f35"})
		if _, err := flow.Start(vctx, e, pgTwice, 1, &flow.StartOptions{RunID: "traced"}); err != nil {
			t.Fatal(err)
		}
		out := cli("show", "traced")
		if row := strings.Join(rowOf(t, out, "Values"), " "); row != "Values tenant=acme" {
			t.Errorf("values row %q in:\n%s", row, out)
		}
		if row := rowOf(t, out, "trace=4bf92f35"); len(row) != 1 {
			t.Errorf("second values row %q in:\n%s", row, out)
		}
		if got := decode[runDetailJSON](t, cli("show", "--json", "traced")); got.Values["tenant"] != "acme" || got.Values["trace"] != "4bf92f35" {
			t.Errorf("show --json: values %v", got.Values)
		}
	})
}

// show lists the values a run published, latest per key, in the table and
// in --json.
func TestShowPublished(t *testing.T) {
	t.Parallel()
	onBothBackends(t, func(t *testing.T, ctx context.Context, e *flow.Engine, cli func(args ...string) string) {
		wf := flow.Workflow[int, int]{Name: "publisher", Run: func(wc flow.Context, n int) (int, error) {
			if err := flow.Publish(wc, "status", "started"); err != nil {
				return 0, err
			}
			return n, flow.Publish(wc, "status", "exported")
		}}
		flow.Register(e, wf)
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		run, err := flow.Start(ctx, e, wf, 7, &flow.StartOptions{RunID: "pub"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Result(ctx); err != nil {
			t.Fatal(err)
		}
		out := cli("show", "pub")
		if row := rowOf(t, out, "Published"); strings.Join(row, " ") != `Published status "exported"` {
			t.Errorf("published row %q in:\n%s", row, out)
		}
		got := decode[runDetailJSON](t, cli("show", "--json", "pub"))
		if string(got.Published["status"]) != `"exported"` || len(got.Published) != 1 {
			t.Errorf("show --json: published %q", got.Published)
		}
	})
}
