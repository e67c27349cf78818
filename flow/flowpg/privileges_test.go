package flowpg_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// The privileges docs/postgresql-production.md grants are enough (its sql
// block, run as written but for the names): a role that owns nothing, with
// USAGE on a schema migrated by another role, SELECT, INSERT, UPDATE and
// DELETE on its tables and USAGE on its sequences, opens an engine without
// migrating, runs a workflow that waits for a signal, follows the change
// feed and deletes finished runs. A role with less is refused
// with PostgreSQL's own message, naming a table, and one that may not
// create the schema is told what to do.
func TestEngineRunsWithTheDocumentedPrivileges(t *testing.T) {
	t.Parallel()
	if pgtest.Pooler() != "" {
		t.Skip("creates roles on the server itself")
	}
	dsn, s := schema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	owner, err := flowpg.Open(ctx, dsn, &flow.Config{}, &flowpg.Options{Schema: s, MaxConns: 2}) // migrates
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() }) // after the roles' cleanups
	exec := func(q string) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	newRole := func(grants ...string) string {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		role := "flowlite_app_" + hex.EncodeToString(b)
		exec("CREATE ROLE " + role + " LOGIN")
		t.Cleanup(func() {
			ctx := context.WithoutCancel(ctx)
			_, _ = admin.ExecContext(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+role+"'")
			for _, q := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
				if _, err := admin.ExecContext(ctx, q); err != nil {
					t.Errorf("%s: %v", q, err)
				}
			}
		})
		for _, g := range grants {
			exec(strings.ReplaceAll(strings.ReplaceAll(g, "$role", role), "$schema", s))
		}
		return role
	}
	as := func(role string) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(role)
		return u.String()
	}
	app := newRole(documentedGrants(t, admin, s)...)
	e, err := flowpg.Open(ctx, as(app), &flow.Config{PollInterval: time.Second, Retention: flow.Retention{Completed: time.Millisecond}}, &flowpg.Options{Schema: s, MaxConns: 4})
	if err != nil {
		t.Fatalf("open as a role with the documented privileges: %v", err)
	}
	defer e.Close()
	waits := flow.Workflow[int, int]{Name: "waits", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		m, err := flow.Receive[int](wc, "more", 0)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, double, n+m)
	}}
	flow.Register(e, waits)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	run, err := flow.Start(ctx, e, waits, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "more", 2, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != 6 {
		t.Fatalf("result %d, %v; want 6", out, err)
	}
	seen := 0
	feedCtx, stopFeed := context.WithTimeout(ctx, 10*time.Second)
	for c, err := range e.Changes(feedCtx, &flow.ChangesOptions{}) {
		if err != nil {
			t.Fatalf("change feed: %v", err)
		}
		if c.RunID == run.ID() {
			seen++
		}
		if c.Kind == flow.EventRunCompleted && c.RunID == run.ID() {
			break
		}
	}
	stopFeed()
	if seen == 0 {
		t.Error("the change feed showed nothing of the run")
	}
	time.Sleep(5 * time.Millisecond) // past the retention
	if n, err := e.Clean(ctx); err != nil || n < 1 {
		t.Errorf("clean: %d deleted, %v; want the finished run deleted", n, err)
	}

	// Partitioned history, as the same role: the first open with the
	// option turns the table into partitions, and the cleaner makes and
	// drops them, through functions that run as the schema's owner.
	pe, err := flowpg.Open(ctx, as(app), &flow.Config{PollInterval: time.Second, Retention: flow.Retention{Completed: time.Millisecond}},
		&flowpg.Options{Schema: s, MaxConns: 4, HistoryPartitions: time.Second})
	if err != nil {
		t.Fatalf("open with partitioned history as a role with the documented privileges: %v", err)
	}
	defer pe.Close()
	flow.Register(pe, waits)
	if err := pe.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer pe.Stop(ctx)
	prun, err := flow.Start(ctx, pe, waits, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, pe, prun.ID(), "more", 2, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := prun.Result(ctx); err != nil || out != 6 {
		t.Fatalf("result with partitioned history %d, %v; want 6", out, err)
	}
	if _, err := pe.Clean(ctx); err != nil {
		t.Errorf("clean with partitioned history: %v", err)
	}
	if hp, err := pe.HistoryPartitions(ctx); err != nil || hp.Span != time.Second || len(hp.Partitions) < 4 {
		t.Errorf("history partitions as the engines' role: %+v, %v; want spans of 1s, and three ahead", hp, err)
	}

	// SELECT only: the engine opens (it only reads to check the schema),
	// and a start says what it may not do.
	reader := newRole("GRANT USAGE ON SCHEMA $schema TO $role", "GRANT SELECT ON ALL TABLES IN SCHEMA $schema TO $role")
	ro, err := flowpg.Open(ctx, as(reader), &flow.Config{}, &flowpg.Options{Schema: s, MaxConns: 2})
	if err != nil {
		t.Fatalf("open as a role that may only read: %v", err)
	}
	defer ro.Close()
	flow.Register(ro, waits)
	_, err = flow.Start(ctx, ro, waits, 1, nil)
	if err == nil || !strings.Contains(err.Error(), "permission denied for table") {
		t.Errorf("start as a role that may only read: %v, want permission denied naming the table", err)
	}

	// No CREATE on the database: a schema that does not exist yet cannot
	// be made, and the error says who can make it.
	nobody := newRole()
	_, err = flowpg.Open(ctx, as(nobody), &flow.Config{}, &flowpg.Options{Schema: s + "_new", MaxConns: 2})
	if err == nil || !strings.Contains(err.Error(), "permission denied") || !strings.Contains(err.Error(), "flowlite migrate up") {
		t.Errorf("open of a new schema by a role that may not create it: %v, want permission denied and how to migrate", err)
	}
}

// documentedGrants returns the statements of the sql block of
// docs/postgresql-production.md, in order, for the role $role and schema
// schema: its database app is the test's, its schema flowlite is schema,
// and its migrating role flowlite_migrator is the one the test runs as.
func documentedGrants(t *testing.T, admin *sql.DB, schema string) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/postgresql-production.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, found := strings.Cut(string(doc), "```sql\n")
	block, _, closed := strings.Cut(block, "```")
	if !found || !closed {
		t.Fatal("docs/postgresql-production.md has no sql block")
	}
	var database, me string
	if err := admin.QueryRowContext(t.Context(), "SELECT current_database(), current_user").Scan(&database, &me); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			lines = append(lines, line)
		}
	}
	rename := strings.NewReplacer("flowlite_app", "$role", "flowlite_migrator", me, "SCHEMA flowlite", "SCHEMA "+schema, "DATABASE app", "DATABASE "+database)
	var stmts []string
	for _, stmt := range strings.Split(strings.Join(lines, "\n"), ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			stmts = append(stmts, rename.Replace(stmt))
		}
	}
	if len(stmts) < 4 {
		t.Fatalf("the sql block of docs/postgresql-production.md has %d statements: %q", len(stmts), stmts)
	}
	return stmts
}
