package main

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// pgSchema returns a fresh PostgreSQL schema, skipping the test when no
// server is reachable unless FLOWLITE_PG_TEST=1 (or
// FLOWLITE_TEST_BACKEND=postgres) asks for one, which makes it a failure.
func pgSchema(t *testing.T) (dsn, schema string) {
	t.Helper()
	if err := pgtest.Reachable(); err != nil && os.Getenv("FLOWLITE_PG_TEST") != "1" && !pgtest.Postgres() {
		t.Skipf("no PostgreSQL server: %v (FLOWLITE_PG_TEST=1 fails instead)", err)
	}
	return pgtest.Schema(t)
}

var pgDouble = flow.Step[int, int]{Name: "double", Run: func(_ context.Context, n int) (int, error) { return 2 * n, nil }}

var pgTwice = flow.Workflow[int, int]{Name: "twice", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	m, err := flow.Do(wc, pgDouble, n)
	if err != nil {
		return 0, err
	}
	return flow.Do(wc, pgDouble, m)
}}

// pgRuns opens an engine on the schema through flowpg, runs one workflow to
// completion and leaves a second pending (on a queue no engine works), and
// returns their IDs.
func pgRuns(t *testing.T, dsn, schema string) (done, pending string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e, err := flowpg.Open(ctx, dsn, &flow.Config{Logger: slog.New(slog.DiscardHandler)}, &flowpg.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	flow.Register(e, pgTwice)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := flow.Start(ctx, e, pgTwice, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Result(ctx); err != nil || out != 12 {
		t.Fatalf("result %d, %v; want 12", out, err)
	}
	p, err := flow.Start(ctx, e, pgTwice, 4, &flow.StartOptions{Queue: "unworked"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return r.ID(), p.ID()
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	done, pending := pgRuns(t, dsn, schema)
	db := []string{"--db", dsn, "--schema", schema}
	pg := func(args ...string) string {
		t.Helper()
		r := flowlite(t, nil, append(db, args...)...)
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("flowlite %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}

	runs := decode[[]runJSON](t, pg("runs", "--json"))
	got := map[string]flow.RunStatus{}
	for _, r := range runs {
		got[r.ID] = r.Status
	}
	if got[done] != flow.StatusCompleted || got[pending] != flow.StatusPending || len(got) != 2 {
		t.Errorf("runs: %v; want %s completed and %s pending", got, done, pending)
	}
	if out := pg("runs"); !strings.Contains(out, done) || !strings.Contains(out, pending) {
		t.Errorf("runs table lacks the runs:\n%s", out)
	}
	show := decode[runDetailJSON](t, pg("show", "--json", done))
	if show.Status != flow.StatusCompleted || len(show.Steps) != 2 {
		t.Errorf("show %s: %s with %d steps, want completed with 2", done, show.Status, len(show.Steps))
	}
	if out := pg("show", done); !strings.Contains(out, "double") {
		t.Errorf("show table lacks the steps:\n%s", out)
	}
	pg("history", done)
	pg("stats")
	pg("queues")
	if out := pg("health"); !strings.Contains(out, "PostgreSQL") || !strings.Contains(out, "unworked") {
		t.Errorf("health:\n%s", out)
	}
	if out := pg("migrate", "status"); !strings.Contains(out, "up to date") {
		t.Errorf("migrate status:\n%s", out)
	}
	if out := pg("migrate", "up"); !strings.Contains(out, "up to date") {
		t.Errorf("migrate up:\n%s", out)
	}

	pg("cancel", pending)
	if st := decode[runDetailJSON](t, pg("show", "--json", pending)).Status; st != flow.StatusCancelled {
		t.Errorf("after cancel: %s, want cancelled", st)
	}

	// The SQLite file operations refuse PostgreSQL, naming the command.
	fails(t, exitError, "backup: not supported by this store on PostgreSQL", append(db, "backup", t.TempDir()+"/copy.db")...)
	fails(t, exitError, "checkpoint: not supported", append(db, "checkpoint")...)
	fails(t, exitError, "check: not supported", append(db, "check")...)

	// An unknown schema is refused, never created; --schema is checked.
	fails(t, exitError, "schema nosuchschema_flowlite does not exist", "--db", dsn, "--schema", "nosuchschema_flowlite", "runs")
	fails(t, exitUsage, "invalid --schema", "--db", dsn, "--schema", "Bad-Name", "runs")
}

// A schema without flowlite's migration table is refused and left alone,
// and a password in the URL never reaches a message.
func TestPostgresForeignSchema(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".orders (id int)"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2")
	for _, args := range [][]string{{"runs"}, {"migrate", "up"}, {"migrate", "status"}} {
		r := fails(t, exitError, "has no flowlite migration table", append([]string{"--db", u.String(), "--schema", schema}, args...)...)
		if strings.Contains(r.stderr, "hunter2") {
			t.Errorf("flowlite %v prints the password: %q", args, r.stderr)
		}
	}
	var tables int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables); err != nil || tables != 1 {
		t.Errorf("schema has %d tables (%v), want its 1 left alone", tables, err)
	}
}

func TestPostgresServe(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	done, _ := pgRuns(t, dsn, schema)

	base, stop := serve(t, dsn, "--schema", schema, "--read-only")
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/"); code != http.StatusOK || !strings.Contains(body, "unworked") {
		t.Errorf("overview: %d\n%s", code, body)
	}
	if code, body := get(t, base+"/runs/"+done); code != http.StatusOK || !strings.Contains(body, "double") {
		t.Errorf("run page: %d\n%s", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, `flowlite_runs{status="completed"} 1`) ||
		!strings.Contains(body, `flowlite_runs{status="pending"} 1`) {
		t.Errorf("metrics: %d\n%s", code, body)
	}
	if code, stderr := stop(); code != exitOK || stderr != "" {
		t.Errorf("serve stopped with %d, stderr %q", code, stderr)
	}
}
