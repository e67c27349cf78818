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
