package main

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// fileBytes returns the content of path.
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runState is what an action may change about a run: its JSON and history.
func runState(t *testing.T, path, id string) string {
	t.Helper()
	return ok(t, path, "show", "--json", id) + ok(t, path, "history", "--json", id)
}

func TestRunsTimeFilter(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	ids := func(args ...string) []string {
		t.Helper()
		var out []string
		for _, r := range decode[[]runJSON](t, ok(t, path, append([]string{"runs", "--json"}, args...)...)) {
			out = append(out, r.ID)
		}
		return out
	}
	all := []string{pendingRun, stuckRun, sagaRun, doneRun}
	tomorrow := time.Now().Add(24 * time.Hour).Format("2006-01-02")
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--since", "1h"}, all},
		{[]string{"--since", "2000-01-01"}, all},
		{[]string{"--since", "1h", "--limit", "2"}, all[:2]},
		{[]string{"--until", "1h"}, nil},
		{[]string{"--until", tomorrow}, all},
		{[]string{"--since", tomorrow}, nil},
	} {
		if got := ids(tt.args...); !slices.Equal(got, tt.want) {
			t.Errorf("runs %s: %q, want %q", strings.Join(tt.args, " "), got, tt.want)
		}
	}
	// The pending run was started last, after the others settled: --since
	// its creation time (RFC 3339) keeps it alone.
	pending := decode[runDetailJSON](t, ok(t, path, "show", "--json", pendingRun))
	if got := ids("--since", pending.CreatedAt.Format(time.RFC3339Nano)); !slices.Equal(got, []string{pendingRun}) {
		t.Errorf("runs --since %s: %q", pending.CreatedAt.Format(time.RFC3339Nano), got)
	}
	if got := ids("--until", pending.CreatedAt.Format(time.RFC3339Nano), "--status", "completed"); !slices.Equal(got, []string{doneRun}) {
		t.Errorf("runs --until: %q", got)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, `invalid --since "yesterday": want a duration before now`},
		{[]string{"--until", "2024-13-45"}, `invalid --until "2024-13-45"`},
		{[]string{"--since", "-5m"}, `invalid --since "-5m"`},
		{[]string{"--since", "1h", "--until", "2h"}, "invalid time range: --since"},
	} {
		fails(t, exitUsage, tt.want, append([]string{"--db", path, "runs"}, tt.args...)...)
	}
}

func TestSignal(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	out := ok(t, path, "signal", pendingRun, "approve", `{"by": "ops", "ok": true}`)
	if out != "signal approve sent to run pending-1 (it is pending)\n" {
		t.Errorf("signal: %q", out)
	}
	events := decode[[]eventJSON](t, ok(t, path, "history", "--json", pendingRun))
	if last := events[len(events)-1]; last.Kind != flow.EventSignalSent || last.Detail != "signal approve" {
		t.Errorf("history after signal: %+v", last)
	}

	sig := decode[signalJSON](t, ok(t, path, "signal", "--json", "--key", "k1", pendingRun, "approve"))
	if sig.Run != pendingRun || sig.Signal != "approve" || sig.Key != "k1" || string(sig.Payload) != "null" || sig.Status != flow.StatusPending {
		t.Errorf("signal --json: %+v", sig)
	}
	if sig.Dropped {
		t.Errorf("first send with key k1 reported dropped")
	}
	// The same key again is dropped, and says so: no new event.
	before := runState(t, path, pendingRun)
	if out := ok(t, path, "signal", "--key", "k1", pendingRun, "approve", `1`); out !=
		"signal approve with key k1 dropped: run pending-1 already got a signal with this key, which stands (it is pending)\n" {
		t.Errorf("repeated key: %q", out)
	}
	if again := decode[signalJSON](t, ok(t, path, "signal", "--json", "--key", "k1", pendingRun, "approve")); !again.Dropped {
		t.Errorf("repeated key --json: %+v, want dropped", again)
	}
	if after := runState(t, path, pendingRun); after != before {
		t.Errorf("a repeated key was recorded again")
	}

	// Bad input changes nothing.
	before = runState(t, path, pendingRun)
	for _, bad := range []string{`{bad`, `{"a":1`, `ok`, ``, `[1,]`} {
		fails(t, exitUsage, "invalid JSON payload", "--db", path, "signal", pendingRun, "approve", bad)
	}
	fails(t, exitUsage, "expected a run ID and a signal name", "--db", path, "signal", pendingRun)
	fails(t, exitUsage, "empty signal name", "--db", path, "signal", pendingRun, "")
	fails(t, exitUsage, "at most one JSON payload", "--db", path, "signal", pendingRun, "a", "1", "2")
	fails(t, exitError, "run nope: not found", "--db", path, "signal", "nope", "approve")
	fails(t, exitError, "finished", "--db", path, "signal", doneRun, "approve")
	if after := runState(t, path, pendingRun); after != before {
		t.Errorf("bad signals changed the run")
	}
}

// oldSchema creates a flowlite database one migration behind this binary
// and returns its version and the latest. Versions are the numbers that
// start the file names, which may skip some (numbers reserved for work on
// other branches).
func oldSchema(t *testing.T) (path string, current, latest int64) {
	t.Helper()
	all, err := fs.Glob(migrations.SQLite(), "*.sql")
	if err != nil || len(all) < 2 {
		t.Fatalf("migrations: %q, %v", all, err)
	}
	old := fstest.MapFS{}
	for _, name := range all[:len(all)-1] {
		b, err := fs.ReadFile(migrations.SQLite(), name)
		if err != nil {
			t.Fatal(err)
		}
		old[name] = &fstest.MapFile{Data: b}
	}
	path = filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The table is sqlitestore.VersionTable, written out so that the CLI's
	// package imports no store adapter, tests included; a table the store
	// does not read would fail the tests of the old schema.
	p, err := goose.NewProvider(goose.DialectSQLite3, db, old, goose.WithDisableGlobalRegistry(true),
		goose.WithTableName("flowlite_goose_db_version"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	return path, migrationVersion(t, all[len(all)-2]), migrationVersion(t, all[len(all)-1])
}

// migrationVersion returns the version of a goose migration file name.
func migrationVersion(t *testing.T, name string) int64 {
	t.Helper()
	digits, _, _ := strings.Cut(name, "_")
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		t.Fatalf("migration %s: no version: %v", name, err)
	}
	return v
}

// foreignDB creates a SQLite database of another program.
func foreignDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('ada')"); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	before := fileBytes(t, path)
	st := decode[migrateJSON](t, ok(t, path, "migrate", "status", "--json"))
	if st.Pending || st.Current != st.Latest || st.Current < 3 {
		t.Errorf("migrate status --json: %+v", st)
	}
	if out := ok(t, path, "migrate", "status"); !strings.Contains(out, "up to date") {
		t.Errorf("migrate status: %s", out)
	}
	if out := ok(t, path, "migrate", "up"); out != "schema is up to date at version "+strconv.FormatInt(st.Latest, 10)+"\n" {
		t.Errorf("migrate up on a current database: %q", out)
	}
	if !bytes.Equal(before, fileBytes(t, path)) {
		t.Errorf("migrate status/up on a current database changed the file")
	}

	// One migration behind: status says so and changes nothing; other
	// commands refuse; up migrates.
	old, previous, latest := oldSchema(t)
	before = fileBytes(t, old)
	st = decode[migrateJSON](t, ok(t, old, "migrate", "status", "--json"))
	if !st.Pending || st.Current != previous || st.Latest != latest {
		t.Errorf("migrate status of an old database: %+v", st)
	}
	// oldSchema leaves out the last migration file: one is pending, however
	// far apart the two versions are numbered.
	if out := ok(t, old, "migrate", "status"); !strings.Contains(out, "1 migration(s) pending: run 'flowlite migrate up'") {
		t.Errorf("migrate status: %s", out)
	}
	for _, args := range [][]string{{"runs"}, {"stats"}, {"cancel", "x"}, {"signal", "x", "y"}} {
		fails(t, exitError, "run 'flowlite migrate up'", append([]string{"--db", old}, args...)...)
	}
	if !bytes.Equal(before, fileBytes(t, old)) {
		t.Fatalf("looking at an old database changed it")
	}
	up := decode[migrateJSON](t, ok(t, old, "migrate", "up", "--json"))
	if up.Current != latest || up.Pending || up.From == nil || *up.From != previous {
		t.Errorf("migrate up --json: %+v", up)
	}
	if out := ok(t, old, "stats"); !strings.Contains(out, "total") {
		t.Errorf("stats after migrate up: %s", out)
	}

	// Another program's database is left alone by every command.
	other := foreignDB(t)
	before = fileBytes(t, other)
	for _, args := range [][]string{{"migrate", "status"}, {"migrate", "up"}, {"runs"}, {"stats"}, {"show", "x"}, {"serve"}} {
		fails(t, exitError, "not a flowlite database", append([]string{"--db", other}, args...)...)
	}
	if !bytes.Equal(before, fileBytes(t, other)) {
		t.Errorf("a foreign database was changed")
	}
	fails(t, exitUsage, `unknown command "sideways"`, "--db", path, "migrate", "sideways")
	fails(t, exitUsage, "missing subcommand", "--db", path, "migrate")
}

func TestLockedDatabase(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	before := runState(t, path, pendingRun)

	// Another connection holds the write lock.
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	r := fails(t, exitError, "database is locked", "--db", path, "--busy-timeout", "200ms", "cancel", pendingRun)
	if !strings.Contains(r.stderr, "200ms") || !strings.Contains(r.stderr, "nothing was changed") {
		t.Errorf("locked: %q", r.stderr)
	}
	// The environment sets the timeout too.
	env := flowlite(t, map[string]string{envBusyTimeout: "150ms"}, "--db", path, "signal", pendingRun, "go")
	if env.code != exitError || !strings.Contains(env.stderr, "database is locked") || !strings.Contains(env.stderr, "150ms") {
		t.Errorf("locked with %s: exit %d, %q", envBusyTimeout, env.code, env.stderr)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the short busy timeouts took %s", d)
	}
	// Reads still work while the lock is held (WAL).
	if out := ok(t, path, "--busy-timeout", "100ms", "show", pendingRun); !strings.Contains(out, "pending") {
		t.Errorf("show while locked: %s", out)
	}

	if _, err := conn.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if after := runState(t, path, pendingRun); after != before {
		t.Errorf("a failed write changed the run:\n%s\n%s", before, after)
	}
	fails(t, exitUsage, "invalid --busy-timeout", "--db", path, "--busy-timeout", "-1s", "runs")
	fails(t, exitUsage, "invalid argument", "--db", path, "--busy-timeout", "soon", "runs")
	if r := flowlite(t, map[string]string{envBusyTimeout: "soon"}, "--db", path, "runs"); r.code != exitUsage || !strings.Contains(r.stderr, envBusyTimeout) {
		t.Errorf("bad %s: %d %q", envBusyTimeout, r.code, r.stderr)
	}
}

func TestMaintenance(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	dst := filepath.Join(t.TempDir(), "copy.db")

	out := ok(t, path, "backup", dst)
	if !strings.HasPrefix(out, "backed up "+path+" to "+dst+" (") {
		t.Errorf("backup: %q", out)
	}
	if got := ok(t, dst, "stats", "--json"); got != ok(t, path, "stats", "--json") {
		t.Errorf("the backup holds other runs: %s", got)
	}
	before := fileBytes(t, dst)
	fails(t, exitError, "file already exists", "--db", path, "backup", dst)
	if !bytes.Equal(before, fileBytes(t, dst)) {
		t.Errorf("a refused backup changed the existing file")
	}
	fails(t, exitUsage, "expected one destination path", "--db", path, "backup")

	if out := ok(t, path, "check"); out != "ok: the database file is sound\n" {
		t.Errorf("check: %q", out)
	}
	if c := decode[checkJSON](t, ok(t, path, "check", "--json")); !c.OK || c.Problems == nil || len(c.Problems) != 0 {
		t.Errorf("check --json: %+v", c)
	}

	if out := ok(t, path, "checkpoint"); !strings.HasPrefix(out, "checkpoint truncate: ") || !strings.HasSuffix(out, "-> 0 B\n") {
		t.Errorf("checkpoint: %q", out)
	}
	cp := decode[checkpointJSON](t, ok(t, path, "checkpoint", "--json", "--mode", "passive"))
	if cp.Mode != flowsqlite.CheckpointPassive || cp.Busy {
		t.Errorf("checkpoint --json: %+v", cp)
	}
	fails(t, exitUsage, `invalid --mode "hard"`, "--db", path, "checkpoint", "--mode", "hard")
}

// health shows the engine that built the fixture, and the checkpoint another
// flowlite process ran.
func TestHealth(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	h := decode[healthJSON](t, ok(t, path, "health", "--json", "--all"))
	if h.Path != path || h.DBBytes == 0 || h.LastCheckpoint != nil || len(h.Engines) != 1 {
		t.Fatalf("health --json of the fixture: %+v", h)
	}
	fx := h.Engines[0]
	if fx.ID == "" || fx.PID == 0 || fx.Metrics.RunsStarted == 0 || fx.Metrics.RunsFinished[flow.StatusCompleted] == 0 ||
		fx.Metrics.AttemptSeconds["step"].Count == 0 || fx.ReportedAt.Before(fx.StartedAt) {
		t.Errorf("the fixture's engine: %+v", fx)
	}
	out := ok(t, path, "health", "--all")
	if got := rowOf(t, out, "last"); strings.Join(got, " ") != "last checkpoint none recorded" {
		t.Errorf("health before a checkpoint: %q", got)
	}
	if got := rowOf(t, out, fx.ID); len(got) < 8 || got[len(got)-3] != strconv.FormatInt(fx.Metrics.RunsStarted, 10) {
		t.Errorf("health engine row: %q", got)
	}

	ok(t, path, "checkpoint", "--mode", "passive")
	h = decode[healthJSON](t, ok(t, path, "health", "--json"))
	if c := h.LastCheckpoint; c == nil || c.Mode != flowsqlite.CheckpointPassive || c.By == "" || c.By == fx.ID || c.Busy ||
		time.Since(c.At) > time.Minute {
		t.Errorf("last checkpoint after flowlite checkpoint: %+v", c)
	}
	if got := strings.Join(rowOf(t, ok(t, path, "health"), "last"), " "); !strings.Contains(got, "PASSIVE of a") ||
		!strings.Contains(got, "by "+h.LastCheckpoint.By) {
		t.Errorf("health row of the last checkpoint: %q", got)
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	r := flowlite(t, map[string]string{envProgress: "always"}, "--db", path, "check")
	if r.code != exitOK || !strings.Contains(r.stderr, "checking… ") || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("check with progress: exit %d, stderr %q", r.code, r.stderr)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve starts flowlite serve on a free port and returns its base URL and
// a function that stops it and returns its exit code and stderr.
func serve(t *testing.T, path string, args ...string) (string, func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--db", path, "serve", "--addr", "127.0.0.1:0"}, args...), &stdout, &stderr, func(string) string { return "" })
	}()
	re := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)/`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			stop := func() (int, string) {
				cancel()
				return <-done, stderr.String()
			}
			return m[1], stop
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start: %q %q", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestServe(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	base, stop := serve(t, path, "--read-only")
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/runs/"+stuckRun); code != http.StatusOK || !strings.Contains(body, "read-only") || strings.Contains(body, `id="action-resume"`) {
		t.Errorf("read-only run page: %d, offers actions or lacks the badge", code)
	}
	if code, body := get(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(body, `flowlite_runs{status="suspended"} 1`) {
		t.Errorf("metrics: %d\n%s", code, body)
	}
	resp, err := http.Post(base+"/runs/"+stuckRun+"/resume", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST resume on a read-only dashboard: %d, want 403", resp.StatusCode)
	}
	if code, stderr := stop(); code != exitOK || stderr != "" {
		t.Errorf("serve stopped with %d, stderr %q", code, stderr)
	}
	if got := decode[runDetailJSON](t, ok(t, path, "show", "--json", stuckRun)); got.Status != flow.StatusSuspended {
		t.Errorf("read-only dashboard changed the run: %s", got.Status)
	}

	// Read-write: a bare POST is refused, the confirmation form's goes
	// through.
	base, stop = serve(t, path, "--log-level", "info")
	resp, err = http.Post(base+"/runs/"+stuckRun+"/resume", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "CSRF") {
		t.Errorf("bare POST resume: %d %q, want 403 naming CSRF", resp.StatusCode, body)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = client.Get(base + "/runs/" + stuckRun + "/resume")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	token := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(string(body))
	if token == nil {
		t.Fatalf("confirmation page %d without a CSRF token", resp.StatusCode)
	}
	resp, err = client.PostForm(base+"/runs/"+stuckRun+"/resume", url.Values{"csrf_token": {token[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("POST resume: %d, want 303", resp.StatusCode)
	}
	code, stderr := stop()
	if code != exitOK || !strings.Contains(stderr, "operator action") || !strings.Contains(stderr, "action=resume") {
		t.Errorf("serve stopped with %d, stderr %q", code, stderr)
	}
	if got := decode[runDetailJSON](t, ok(t, path, "show", "--json", stuckRun)); got.Status != flow.StatusCompensating {
		t.Errorf("after resume: %s", got.Status)
	}

	fails(t, exitUsage, `invalid --addr "nowhere"`, "--db", path, "serve", "--addr", "nowhere")
}

func TestLogLevel(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	fails(t, exitUsage, `invalid --log-level "loud"`, "--db", path, "--log-level", "loud", "runs")
	if r := flowlite(t, map[string]string{envLogLevel: "loud"}, "--db", path, "runs"); r.code != exitUsage {
		t.Errorf("bad %s: exit %d", envLogLevel, r.code)
	}
	// Debug logs go to stderr, never stdout.
	r := flowlite(t, nil, "--db", path, "--log-level", "debug", "stats", "--json")
	if r.code != exitOK {
		t.Fatalf("stats with debug logs: %d %q", r.code, r.stderr)
	}
	decode[statsJSON](t, r.stdout)
}

func TestClean(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	before := decode[statsJSON](t, ok(t, path, "stats", "--json")).Runs

	// Nothing in the fixture is a day old: the default ages delete nothing.
	if out := ok(t, path, "clean"); !strings.HasPrefix(out, "deleted 0 finished run(s)") {
		t.Errorf("clean: %q", out)
	}
	// With a tiny age for completed runs only, exactly those go.
	c := decode[cleanJSON](t, ok(t, path, "clean", "--json", "--completed", "1ns", "--failed", "-1s", "--cancelled", "-1s"))
	after := decode[statsJSON](t, ok(t, path, "stats", "--json")).Runs
	if c.Deleted == 0 || int64(c.Deleted) != before["completed"]-after["completed"] || after["completed"] != 0 {
		t.Errorf("clean --completed 1ns deleted %d; completed runs %d → %d", c.Deleted, before["completed"], after["completed"])
	}
	for _, state := range []flow.RunStatus{"failed", "suspended", "pending", "cancelled"} {
		if after[state] != before[state] {
			t.Errorf("clean changed the %s runs: %d → %d", state, before[state], after[state])
		}
	}
	fails(t, exitUsage, "invalid argument", "--db", path, "clean", "--completed", "soon")
}
