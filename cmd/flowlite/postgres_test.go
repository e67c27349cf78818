package main

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"slices"
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
	e := pgEngine(t, ctx, dsn, schema, pgTwice)
	defer closeEngine(t, e)
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

// pgEngine opens and starts an engine on the schema through flowpg with
// the workflows wfs registered; the caller defers closeEngine.
func pgEngine(t *testing.T, ctx context.Context, dsn, schema string, wfs ...flow.Workflow[int, int]) *flow.Engine {
	t.Helper()
	e, err := flowpg.Open(ctx, dsn, &flow.Config{Logger: slog.New(slog.DiscardHandler), PollInterval: 10 * time.Millisecond}, &flowpg.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	for _, wf := range wfs {
		flow.Register(e, wf)
	}
	if err := e.Start(ctx); err != nil {
		closeEngine(t, e)
		t.Fatal(err)
	}
	return e
}

func closeEngine(t *testing.T, e *flow.Engine) {
	t.Helper()
	if err := e.Close(); err != nil {
		t.Error(err)
	}
}

// pgCLI returns a runner of flowlite on the database db names (--db and
// --schema) that fails t unless the command succeeds silently on stderr,
// and returns its output.
func pgCLI(t *testing.T, db []string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		r := flowlite(t, nil, append(db, args...)...)
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("flowlite %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	done, pending := pgRuns(t, dsn, schema)
	db := []string{"--db", dsn, "--schema", schema}
	pg := pgCLI(t, db)

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
	// Limits are set, shown and cleared on PostgreSQL as on SQLite.
	pg("queues", "limit", "default", "--concurrency", "3", "--rate", "10/1s", "--key", "t=2,weight=2")
	qs := decode[[]queueJSON](t, pg("queues", "--json"))
	if i := slices.IndexFunc(qs, func(q queueJSON) bool { return q.Queue == "default" }); i < 0 || qs[i].Limits == nil ||
		qs[i].Limits.Limits.Concurrency != 3 || qs[i].Limits.Limits.Rate.Limit != 10 || len(qs[i].Limits.Limits.Keys) != 1 {
		t.Errorf("queues --json limits on PostgreSQL: %+v", qs)
	}
	if out := pg("queues"); !strings.Contains(out, "CONCURRENCY") || !strings.Contains(out, "10/1s") {
		t.Errorf("queues lacks the limits:\n%s", out)
	}
	pg("show", pending)
	fails(t, exitUsage, `--rate: rate "ten/1s"`, append(db, "queues", "limit", "default", "--rate", "ten/1s")...)
	pg("queues", "limit", "default", "--clear")
	if out := pg("queues"); strings.Contains(out, "CONCURRENCY") {
		t.Errorf("queues shows limits after --clear:\n%s", out)
	}
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

var pgDecline = flow.Step[int, int]{Name: "charge", Run: func(context.Context, int) (int, error) {
	return 0, flow.Permanent(errors.New("card declined"))
}}

// pgDeclined fails for good at its only step: its runs are dead letters.
var pgDeclined = flow.Workflow[int, int]{Name: "declined", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	return flow.Do(wc, pgDecline, n)
}}

// pgAwait waits for the signal "go".
var pgAwait = flow.Workflow[int, int]{Name: "await", Version: 1, Run: func(wc flow.Context, _ int) (int, error) {
	return flow.Receive[int](wc, "go", time.Hour)
}}

// pgActionRuns opens an engine on the schema through flowpg and leaves one
// run in each state the dashboard's actions are tried on: completed,
// failed (a dead letter), waiting for a signal, and pending on a queue no
// engine works. Every engine is stopped and closed when it returns.
func pgActionRuns(t *testing.T, dsn, schema string) (done, failed, waiting, pending string) {
	t.Helper()
	done, pending = pgRuns(t, dsn, schema)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e := pgEngine(t, ctx, dsn, schema, pgDeclined, pgAwait)
	defer closeEngine(t, e)
	f, err := flow.Start(ctx, e, pgDeclined, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Result(ctx); err == nil || !strings.Contains(err.Error(), "card declined") {
		t.Fatalf("declined run: %v, want card declined", err)
	}
	w, err := flow.Start(ctx, e, pgAwait, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := e.Inspect(ctx, w.ID())
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == flow.StatusWaiting {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s never waited: %s", w.ID(), info.Status)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return done, f.ID(), w.ID(), pending
}

// The read-write dashboard on PostgreSQL: its run actions, posted as the
// confirmation forms post them (cookie and CSRF token) and through the JSON
// API, change the runs in the database as they do on SQLite, and a refused
// action is a 409 that names why and changes nothing.
func TestPostgresServeActions(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	done, failed, waiting, pending := pgActionRuns(t, dsn, schema)
	db := []string{"--db", dsn, "--schema", schema}
	pg := pgCLI(t, db)
	status := func(id string) flow.RunStatus {
		t.Helper()
		return decode[runDetailJSON](t, pg("show", "--json", id)).Status
	}
	history := func(id string) []eventJSON {
		t.Helper()
		return decode[[]eventJSON](t, pg("history", "--json", id))
	}
	last := func(events []eventJSON) eventJSON {
		if len(events) == 0 {
			return eventJSON{}
		}
		return events[len(events)-1]
	}

	base, stop := serve(t, dsn, "--schema", schema, "--log-level", "info")
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `flowlite_runs{status="completed"} 1`+"\n") || !strings.Contains(body, `flowlite_runs{status="failed"} 1`+"\n") ||
		!strings.Contains(body, `flowlite_runs{status="waiting"} 1`+"\n") || !strings.Contains(body, `flowlite_runs{status="pending"} 1`+"\n") {
		t.Errorf("metrics before the actions: %d\n%s", code, body)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// act GETs the confirmation page of action on run, then posts its form
	// with the page's CSRF token, and returns the answer's status, Location
	// and body.
	act := func(run, action string) (int, string, string) {
		t.Helper()
		page := base + "/runs/" + url.PathEscape(run) + "/" + action
		resp, err := client.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		token := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(string(body))
		if resp.StatusCode != http.StatusOK || token == nil {
			t.Fatalf("confirmation page of %s %s: %d, token %v\n%s", action, run, resp.StatusCode, token != nil, body)
		}
		resp, err = client.PostForm(page, url.Values{"csrf_token": {token[1]}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location"), string(body)
	}

	// Cancel a waiting run: it ends cancelled at once (no engine works it,
	// nothing to compensate), with the cancellation in its history.
	if code, loc, body := act(waiting, "cancel"); code != http.StatusSeeOther || loc != "/runs/"+url.PathEscape(waiting)+"?done=cancel" {
		t.Errorf("cancel %s: %d %q\n%s", waiting, code, loc, body)
	}
	if st := status(waiting); st != flow.StatusCancelled {
		t.Errorf("after cancel: %s is %s, want cancelled", waiting, st)
	}
	if ev := last(history(waiting)); ev.Kind != flow.EventRunCancelled {
		t.Errorf("after cancel: last event of %s is %+v, want %s", waiting, ev, flow.EventRunCancelled)
	}

	// Retry the dead letter: a new run, pending, named in the failed run's history; the
	// failed run stays failed and is no longer a dead letter.
	requeued := failed + "/requeue-1"
	if code, loc, body := act(failed, "retry"); code != http.StatusSeeOther || loc != "/runs/"+url.PathEscape(requeued)+"?done=retry" {
		t.Errorf("retry %s: %d %q\n%s", failed, code, loc, body)
	}
	if got := decode[runDetailJSON](t, pg("show", "--json", requeued)); got.Status != flow.StatusPending || got.Workflow != pgDeclined.Name || string(got.Input) != "5" {
		t.Errorf("requeued run %s: %s of %s with input %s, want pending of %s with 5", requeued, got.Status, got.Workflow, got.Input, pgDeclined.Name)
	}
	if st := status(failed); st != flow.StatusFailed {
		t.Errorf("after retry: %s is %s, want failed still", failed, st)
	}
	if ev := last(history(failed)); ev.Kind != flow.EventRunRequeued || !strings.Contains(ev.Detail, requeued) {
		t.Errorf("after retry: last event of %s is %+v, want %s naming %s", failed, ev, flow.EventRunRequeued, requeued)
	}
	if dead := decode[[]runJSON](t, pg("dead", "list", "--json")); len(dead) != 0 {
		t.Errorf("dead letters after retry: %+v, want none", dead)
	}

	// Cancel of a finished run is refused, naming why, and changes nothing.
	before := history(done)
	if code, loc, body := act(done, "cancel"); code != http.StatusConflict || !strings.Contains(body, "run already finished") {
		t.Errorf("cancel of completed %s: %d %q, want 409 saying it finished\n%s", done, code, loc, body)
	}
	if st := status(done); st != flow.StatusCompleted {
		t.Errorf("refused cancel changed %s: %s", done, st)
	}
	if after := history(done); len(after) != len(before) {
		t.Errorf("refused cancel appended to the history of %s: %d events, was %d", done, len(after), len(before))
	}

	// Delete the finished run: it is gone, and the runs list follows.
	if code, loc, body := act(done, "delete"); code != http.StatusSeeOther || loc != "/runs?done=delete" {
		t.Errorf("delete %s: %d %q\n%s", done, code, loc, body)
	}
	fails(t, exitError, "run "+done+": not found", append(db, "show", done)...)

	// The JSON API: a token from /api/csrf, sent in the header.
	resp, err := client.Get(base + "/api/csrf")
	if err != nil {
		t.Fatal(err)
	}
	tok := decode[struct{ Token, Header string }](t, readAll(t, resp))
	apiPost := func(path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/api"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(tok.Header, tok.Token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp)
	}
	if code, body := apiPost("/runs/" + url.PathEscape(pending) + "/cancel"); code != http.StatusOK || !strings.Contains(body, `"next": "`+pending+`"`) {
		t.Errorf("API cancel %s: %d %s", pending, code, body)
	}
	if st := status(pending); st != flow.StatusCancelled {
		t.Errorf("after API cancel: %s is %s, want cancelled", pending, st)
	}
	n := len(history(pending))
	if code, body := apiPost("/runs/" + url.PathEscape(pending) + "/cancel"); code != http.StatusConflict || !strings.Contains(body, "run already finished") {
		t.Errorf("API cancel of cancelled %s: %d %s, want 409 saying it finished", pending, code, body)
	}
	if st, m := status(pending), len(history(pending)); st != flow.StatusCancelled || m != n {
		t.Errorf("refused API cancel changed %s: %s with %d events, was cancelled with %d", pending, st, m, n)
	}

	if code, body := get(t, base+"/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `flowlite_runs{status="completed"} 0`+"\n") || !strings.Contains(body, `flowlite_runs{status="failed"} 1`+"\n") ||
		!strings.Contains(body, `flowlite_runs{status="cancelled"} 2`+"\n") || !strings.Contains(body, `flowlite_runs{status="pending"} 1`+"\n") ||
		!strings.Contains(body, `flowlite_runs{status="waiting"} 0`+"\n") {
		t.Errorf("metrics after the actions: %d\n%s", code, body)
	}
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthz after the actions: %d %q", code, body)
	}
	code, stderr := stop()
	if code != exitOK {
		t.Errorf("serve stopped with %d, stderr %q", code, stderr)
	}
	for _, a := range []string{"action=cancel", "action=retry", "action=delete"} {
		if !strings.Contains(stderr, a) {
			t.Errorf("serve logged no %s: %q", a, stderr)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPostgresThroughTransactionPooler: with --pooler transaction the CLI
// reads and acts on a schema through PgBouncer in transaction mode, and
// migrate up goes over --direct-db; without --pooler its error says what
// is in the way. It runs where the environment names such a pooler
// (FLOWLITE_PG_POOLER=transaction, as a step of .ci/run sets it).
func TestPostgresThroughTransactionPooler(t *testing.T) {
	if pgtest.Pooler() != "transaction" || pgtest.DirectDSN() == "" {
		t.Skipf("needs %s=transaction and %s", pgtest.PoolerEnv, pgtest.DirectDSNEnv)
	}
	pooled, schema := pgSchema(t)
	done, pending := pgRuns(t, pgtest.DirectDSN(), schema)
	pg := pgCLI(t, []string{"--db", pooled, "--schema", schema, "--pooler", "transaction", "--direct-db", pgtest.DirectDSN()})
	if out := pg("runs"); !strings.Contains(out, done) || !strings.Contains(out, pending) {
		t.Errorf("runs through the pooler:\n%s\nwant %s and %s", out, done, pending)
	}
	pg("cancel", pending)
	if out := pg("show", pending); !strings.Contains(out, "cancel") {
		t.Errorf("show of the run cancelled through the pooler:\n%s", out)
	}
	if out := pg("migrate", "up"); out == "" {
		t.Error("migrate up through the pooler printed nothing")
	}
	r := flowlite(t, nil, "--db", pooled, "--schema", schema, "runs")
	if r.code != exitError || !strings.Contains(r.stderr, "--pooler") {
		t.Errorf("runs without --pooler: exit %d, stderr %q; want exit 1 naming --pooler", r.code, r.stderr)
	}
}

// TestPostgresOnAStandby: pointed at a streaming standby
// (FLOWLITE_PG_STANDBY_DSN, as .ci/run makes one), the CLI reads the runs
// the primary recorded, health says it is a replica and how far behind,
// and an action fails as read-only, exit 1, changing nothing.
func TestPostgresOnAStandby(t *testing.T) {
	if pgtest.Pooler() != "" {
		t.Skip("the standby is reached directly")
	}
	dsn, schema := pgSchema(t)
	standby, err := pgtest.StandbyDSN()
	if err != nil {
		t.Fatal(err)
	}
	if standby == "" {
		t.Skipf("needs %s: a streaming standby of the test server", pgtest.StandbyDSNEnv)
	}
	done, pending := pgRuns(t, dsn, schema)
	db := []string{"--db", standby, "--schema", schema}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := flowlite(t, nil, append(db, "runs")...)
		if r.code == exitOK && strings.Contains(r.stdout, done) && strings.Contains(r.stdout, pending) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs on the standby after 30s: exit %d, %q, %q", r.code, r.stdout, r.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pg := pgCLI(t, db)
	if out := pg("health"); !strings.Contains(out, "STANDBY") {
		t.Errorf("health on the standby:\n%s\nwant a STANDBY line", out)
	}
	if h := decode[healthJSON](t, pg("health", "--json")); h.Standby == nil {
		t.Error("health --json on the standby: no standby object")
	}
	r := flowlite(t, nil, append(db, "cancel", pending)...)
	if r.code != exitError || !strings.Contains(r.stderr, "read-only") {
		t.Errorf("cancel on the standby: exit %d, stderr %q; want exit 1, read-only", r.code, r.stderr)
	}
	if out := pgCLI(t, []string{"--db", dsn, "--schema", schema})("health"); strings.Contains(out, "STANDBY") {
		t.Errorf("health on the primary says STANDBY:\n%s", out)
	}
}

// TestPostgresHistoryPartitions: health shows a schema's partitioned
// history (a line, and history_partitions in --json), and nothing of it for
// a schema whose history is one table.
func TestPostgresHistoryPartitions(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	ctx := t.Context()
	e, err := flowpg.Open(ctx, dsn, &flow.Config{Logger: slog.New(slog.DiscardHandler)}, &flowpg.Options{Schema: schema, HistoryPartitions: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	closeEngine(t, e)
	pg := pgCLI(t, []string{"--db", dsn, "--schema", schema})
	if out := pg("health"); !strings.Contains(out, "HISTORY   partitioned by 1h0m0s") || !strings.Contains(out, "from before partitioning") {
		t.Errorf("health of a partitioned history:\n%s", out)
	}
	h := decode[healthJSON](t, pg("health", "--json"))
	if h.History == nil || h.History.SpanSeconds != 3600 || h.History.Partitions < 4 || h.History.OldestFrom != nil {
		t.Errorf("health --json history_partitions: %+v; want span 3600 s, events_before and three ahead", h.History)
	}

	_, plain := pgSchema(t)
	closeEngine(t, pgEngine(t, ctx, dsn, plain))
	pgPlain := pgCLI(t, []string{"--db", dsn, "--schema", plain})
	if out := pgPlain("health"); strings.Contains(out, "HISTORY") {
		t.Errorf("health of a history in one table shows partitions:\n%s", out)
	}
	if h := decode[healthJSON](t, pgPlain("health", "--json")); h.History != nil {
		t.Errorf("health --json of a history in one table: %+v", h.History)
	}
}
