package main

import (
	"bytes"
	"encoding/json"
	"github.com/flowlite/flowlite/internal/pgtest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/fixture"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase())) }

// Run IDs of the fixture database (internal/fixture).
const (
	doneRun    = fixture.DoneRun
	sagaRun    = fixture.SagaRun
	stuckRun   = fixture.StuckRun
	pendingRun = fixture.PendingRun
)

// fixture builds the database internal/fixture describes and returns its
// path.
func fixtureDB(t *testing.T) string { return fixture.Build(t) }

type result struct {
	code           int
	stdout, stderr string
}

// flowlite runs the CLI in-process with args and the environment env.
func flowlite(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), args, &stdout, &stderr, func(k string) string { return env[k] })
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// ok runs the CLI on the database path and fails the test unless it exits 0.
func ok(t *testing.T, path string, args ...string) string {
	t.Helper()
	r := flowlite(t, nil, append([]string{"--db", path}, args...)...)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("flowlite %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// fails runs the CLI and checks its exit code and that stderr says want.
func fails(t *testing.T, code int, want string, args ...string) result {
	t.Helper()
	r := flowlite(t, nil, args...)
	if r.code != code {
		t.Fatalf("flowlite %s: exit %d, want %d (stderr %q)", strings.Join(args, " "), r.code, code, r.stderr)
	}
	if !strings.HasPrefix(r.stderr, "flowlite: ") || !strings.Contains(r.stderr, want) {
		t.Errorf("flowlite %s: stderr %q, want \"flowlite: …%s…\"", strings.Join(args, " "), r.stderr, want)
	}
	if r.stdout != "" {
		t.Errorf("flowlite %s: stdout %q, want none", strings.Join(args, " "), r.stdout)
	}
	return r
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
	return v
}

// rowOf returns the fields of the table line that starts with key.
func rowOf(t *testing.T, out, key string) []string {
	t.Helper()
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == key {
			return f
		}
	}
	t.Fatalf("no line for %s in:\n%s", key, out)
	return nil
}

func TestRuns(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	out := ok(t, path, "runs")
	if !strings.HasPrefix(out, "ID ") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "ERROR/REASON") {
		t.Errorf("no header:\n%s", out)
	}
	for id, want := range map[string][]string{
		doneRun:    {"ship_order(v1)", "default", "completed"},
		sagaRun:    {"pay_order(v2)", "default", "failed"},
		stuckRun:   {"stuck_order(v1)", "default", "suspended"},
		pendingRun: {"later_order(v1)", "batch", "pending"},
	} {
		if got := rowOf(t, out, id); !slices.Equal(got[1:4], want) {
			t.Errorf("row of %s: %q, want %q", id, got, want)
		}
	}
	if row := strings.Join(rowOf(t, out, sagaRun), " "); !strings.Contains(row, "card declined") {
		t.Errorf("saga row lacks its error: %s", row)
	}
	// A suspended run shows why, cut to fit.
	if row := strings.Join(rowOf(t, out, stuckRun), " "); !strings.HasSuffix(row, " compensation of step reserve failed after 1 attempt(s): war…") {
		t.Errorf("stuck row lacks its reason: %s", row)
	}

	filters := []struct {
		args []string
		want []string
	}{
		{[]string{"--status", "suspended"}, []string{stuckRun}},
		{[]string{"--status", "FAILED"}, []string{sagaRun}},
		{[]string{"--status", "running"}, nil},
		{[]string{"--workflow", "ship_order"}, []string{doneRun}},
		{[]string{"--queue", "batch"}, []string{pendingRun}},
		{[]string{"--queue", "default", "--status", "completed"}, []string{doneRun}},
		{[]string{"--limit", "2"}, []string{pendingRun, stuckRun}}, // newest first
	}
	for _, f := range filters {
		runs := decode[[]runJSON](t, ok(t, path, append([]string{"runs", "--json"}, f.args...)...))
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, f.want) {
			t.Errorf("runs %s: %q, want %q", strings.Join(f.args, " "), ids, f.want)
		}
	}

	// --json has the documented field names.
	runs := decode[[]map[string]any](t, ok(t, path, "runs", "--json", "--status", "pending"))
	if len(runs) != 1 {
		t.Fatalf("pending runs: %v", runs)
	}
	for _, field := range []string{"id", "workflow", "version", "queue", "priority", "status", "cancel_requested", "input", "run_at", "created_at", "updated_at"} {
		if _, ok := runs[0][field]; !ok {
			t.Errorf("JSON run lacks %q: %v", field, runs[0])
		}
	}
	if runs[0]["queue"] != "batch" || runs[0]["priority"] != 3.0 || runs[0]["status"] != "pending" || runs[0]["cancel_requested"] != false {
		t.Errorf("JSON pending run: %v", runs[0])
	}
	if _, ok := runs[0]["finished_at"]; ok {
		t.Errorf("unfinished run has finished_at: %v", runs[0])
	}
}

func TestShow(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	out := ok(t, path, "show", sagaRun)
	for _, want := range []string{"Status    failed", "pay_order version 2", "default (priority 0)", "card declined", `{"item":"lamp"}`} {
		if !strings.Contains(out, want) {
			t.Errorf("show %s lacks %q:\n%s", sagaRun, want, out)
		}
	}
	// STEP STATUS ATTEMPTS DURATION ERROR COMPENSATION COMP.ATTEMPTS COMP.ERROR
	if got := rowOf(t, out, "reserve#0"); got[1] != "completed" || got[2] != "1" || !strings.HasSuffix(got[3], "s") ||
		got[4] != "-" || got[5] != "completed" || got[6] != "1" || got[7] != "-" {
		t.Errorf("reserve#0 of %s: %q", sagaRun, got)
	}
	if got := strings.Join(rowOf(t, out, "charge#0"), " "); !strings.HasPrefix(got, "charge#0 failed 1 ") ||
		!strings.Contains(got, "card declined") || !strings.HasSuffix(got, " none - -") {
		t.Errorf("charge#0 of %s: %s", sagaRun, got)
	}
	if strings.Index(out, "reserve#0") > strings.Index(out, "charge#0") {
		t.Errorf("steps out of order:\n%s", out)
	}

	out = ok(t, path, "show", stuckRun)
	if !strings.Contains(out, "Status    suspended") || !strings.Contains(out, "Reason    compensation of step reserve failed") {
		t.Errorf("show %s:\n%s", stuckRun, out)
	}
	if got := strings.Join(rowOf(t, out, "reserve#0"), " "); !strings.Contains(got, " failed 1 warehouse unreachable retry later") {
		t.Errorf("reserve#0 of %s: %s", stuckRun, got)
	}

	out = ok(t, path, "show", doneRun)
	if !strings.Contains(out, `Output    "shipped-res-book"`) || rowOf(t, out, "ship#0")[5] != "none" {
		t.Errorf("show %s:\n%s", doneRun, out)
	}

	out = ok(t, path, "show", pendingRun)
	if !strings.Contains(out, "No steps recorded.") || !strings.Contains(out, "batch (priority 3)") || !strings.Contains(out, "Finished  -") {
		t.Errorf("show %s:\n%s", pendingRun, out)
	}

	detail := decode[runDetailJSON](t, ok(t, path, "show", "--json", stuckRun))
	if detail.Status != flow.StatusSuspended || len(detail.Steps) != 2 || !strings.Contains(detail.Error, "card declined") {
		t.Fatalf("show --json %s: %+v", stuckRun, detail)
	}
	if s := detail.Steps[0]; s.Name != "reserve" || s.Status != "completed" || s.Compensation != "failed" ||
		s.CompensationAttempts != 1 || !strings.Contains(s.CompensationError, "unreachable") || string(s.Output) != `"res-sofa"` {
		t.Errorf("show --json %s step: %+v", stuckRun, s)
	}
	if raw := decode[map[string]any](t, ok(t, path, "show", "--json", pendingRun)); raw["steps"] == nil {
		t.Errorf("show --json of a run without steps has no steps array: %v", raw)
	}
}

func TestHistory(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	events := decode[[]eventJSON](t, ok(t, path, "history", "--json", sagaRun))
	var kinds []string
	for i, ev := range events {
		kinds = append(kinds, ev.Kind)
		if i > 0 && (ev.ID <= events[i-1].ID || ev.At.Before(events[i-1].At)) {
			t.Errorf("event %d out of order: %+v after %+v", i, ev, events[i-1])
		}
	}
	// The saga's story, in order (other events may come between).
	want := []string{"run_started", "step_started", "step_completed", "step_started", "step_failed",
		"workflow_failed", "compensation_started", "compensation_completed", "run_failed"}
	if !subsequence(kinds, want) {
		t.Errorf("history of %s: %q, want in order %q", sagaRun, kinds, want)
	}
	if kinds[0] != "run_started" || kinds[len(kinds)-1] != "run_failed" {
		t.Errorf("history of %s starts or ends wrong: %q", sagaRun, kinds)
	}

	out := ok(t, path, "history", sagaRun)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(events)+1 || !strings.HasPrefix(lines[0], "TIME ") {
		t.Fatalf("history table has %d lines for %d events:\n%s", len(lines), len(events), out)
	}
	for i, ev := range events {
		f := strings.Fields(lines[i+1])
		if _, err := time.Parse(rfcMillisLayout, f[0]); err != nil || f[1] != ev.Kind {
			t.Errorf("line %d: %q for %+v (%v)", i+1, lines[i+1], ev, err)
		}
	}
	if f := rowOfKind(t, out, "step_failed"); f[2] != "charge#0" || f[3] != "1" || !strings.Contains(strings.Join(f, " "), "card declined") {
		t.Errorf("step_failed line: %q", f)
	}

	out = ok(t, path, "history", "--relative", sagaRun)
	if f := strings.Fields(strings.Split(out, "\n")[1]); f[0] != "+0ms" || f[1] != "run_started" {
		t.Errorf("history --relative starts with %q", f)
	}
}

func rowOfKind(t *testing.T, out, kind string) []string {
	t.Helper()
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 1 && f[1] == kind {
			return f
		}
	}
	t.Fatalf("no %s event in:\n%s", kind, out)
	return nil
}

// subsequence reports whether want appears in have in order.
func subsequence(have, want []string) bool {
	for _, h := range have {
		if len(want) > 0 && h == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

func TestStats(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	out := ok(t, path, "stats")
	for status, n := range map[string]string{"pending": "1", "running": "0", "waiting": "0", "compensating": "0", "completed": "1",
		"failed": "1", "suspended": "1", "cancelled": "0", "total": "4"} {
		if got := rowOf(t, out, status); got[1] != n {
			t.Errorf("stats %s: %q, want %s", status, got, n)
		}
	}
	stats := decode[statsJSON](t, ok(t, path, "stats", "--json"))
	if stats.Total != 4 || len(stats.Runs) != len(statuses) || stats.Runs[flow.StatusSuspended] != 1 || stats.Runs[flow.StatusRunning] != 0 {
		t.Errorf("stats --json: %+v", stats)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	// A pending run no engine executes, with nothing to undo: cancelled at
	// once, by the command itself.
	out := ok(t, path, "cancel", pendingRun)
	if !strings.Contains(out, "run pending-1 cancelled (it was pending)") {
		t.Errorf("cancel %s: %q", pendingRun, out)
	}
	if got := rowOf(t, ok(t, path, "runs"), pendingRun); got[3] != "cancelled" {
		t.Errorf("runs after cancel: %q", got)
	}
	run := decode[runDetailJSON](t, ok(t, path, "show", "--json", pendingRun))
	if run.Status != flow.StatusCancelled {
		t.Errorf("after cancel: status %s, want cancelled", run.Status)
	}
	if events := decode[[]eventJSON](t, ok(t, path, "history", "--json", pendingRun)); events[len(events)-1].Kind != "run_cancelled" {
		t.Errorf("history after cancel: %+v", events)
	}

	// A suspended run is cancelled at once.
	act := decode[actionJSON](t, ok(t, path, "cancel", "--json", stuckRun))
	if act.Status != flow.StatusCancelled || act.Action != "cancel" || act.Run != stuckRun || !strings.Contains(act.Message, "was suspended") {
		t.Errorf("cancel --json %s: %+v", stuckRun, act)
	}

	// A finished run cannot be cancelled, and nothing changes.
	before := ok(t, path, "show", "--json", doneRun)
	beforeHistory := ok(t, path, "history", "--json", doneRun)
	fails(t, exitError, "finished", "--db", path, "cancel", doneRun)
	if after := ok(t, path, "show", "--json", doneRun); after != before {
		t.Errorf("cancel of a completed run changed it:\n%s\n%s", before, after)
	}
	if after := ok(t, path, "history", "--json", doneRun); after != beforeHistory {
		t.Errorf("cancel of a completed run changed its history")
	}
}

func TestResumeAndSkip(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	for _, id := range []string{doneRun, sagaRun, pendingRun} {
		for _, verb := range []string{"resume", "skip"} {
			r := fails(t, exitError, "not suspended", "--db", path, verb, id)
			if !strings.Contains(r.stderr, id) {
				t.Errorf("%s %s: error does not name the run: %q", verb, id, r.stderr)
			}
		}
	}

	out := ok(t, path, "skip", stuckRun)
	if !strings.Contains(out, "skipped the failed compensation of reserve#0 (now compensating)") {
		t.Errorf("skip: %q", out)
	}
	if got := rowOf(t, ok(t, path, "show", stuckRun), "reserve#0"); got[5] != "skipped" {
		t.Errorf("after skip: %q", got)
	}
	fails(t, exitError, "not suspended", "--db", path, "skip", stuckRun)
}

func TestResumeSuspended(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	act := decode[actionJSON](t, ok(t, path, "resume", "--json", stuckRun))
	if act.Status != flow.StatusCompensating || act.Action != "resume" || !strings.Contains(act.Message, "failed compensations run again") {
		t.Errorf("resume --json: %+v", act)
	}
	if got := rowOf(t, ok(t, path, "runs"), stuckRun); got[3] != "compensating" {
		t.Errorf("runs after resume: %q", got)
	}
}

func TestUnknownRun(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	for _, verb := range []string{"show", "history", "cancel", "resume", "skip"} {
		fails(t, exitError, "run nope: not found", "--db", path, verb, "nope")
	}
}

func TestBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	garbage := filepath.Join(dir, "garbage.db")
	content := bytes.Repeat([]byte("this is not a database\n"), 200)
	if err := os.WriteFile(garbage, content, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")

	for _, args := range [][]string{{"runs"}, {"stats"}, {"show", "x"}, {"cancel", "x"}} {
		fails(t, exitError, "not a database", append([]string{"--db", garbage}, args...)...)
		fails(t, exitError, "not a database", append([]string{"--db", empty}, args...)...)
		fails(t, exitError, "no such file", append([]string{"--db", missing}, args...)...)
		fails(t, exitError, "not a database", append([]string{"--db", dir}, args...)...)
	}
	if got, err := os.ReadFile(garbage); err != nil || !bytes.Equal(got, content) {
		t.Errorf("garbage file changed (%v)", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"empty.db", "garbage.db"}) {
		t.Errorf("files after the failed opens: %q, want only empty.db and garbage.db", names)
	}
	if info, err := os.Stat(empty); err != nil || info.Size() != 0 {
		t.Errorf("empty file changed: %v, %v", info, err)
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--db", path, "runs", "--status", "bogus"}, `invalid --status "bogus": must be one of pending, running, waiting, compensating, completed, failed, suspended, cancelled`},
		{[]string{"--db", path, "runs", "--limit", "0"}, "invalid --limit 0"},
		{[]string{"--db", path, "runs", "--limit", "many"}, "invalid argument"},
		{[]string{"--db", path, "runs", "extra"}, "unknown command"},
		{[]string{"--db", path, "runs", "--nope"}, "unknown flag: --nope"},
		{[]string{"--db", path, "show"}, "missing run ID"},
		{[]string{"--db", path, "cancel", "a", "b"}, "expected one run ID, got 2 arguments"},
		{[]string{"--db", path, "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"runs"}, "no database: pass --db PATH or set FLOWLITE_DB"},
		{[]string{"--db", path, "history", ""}, "empty run ID"},
		// A usage error is reported before the database is looked at.
		{[]string{"--db", filepath.Join(t.TempDir(), "missing.db"), "runs", "--status", "bogus"}, "invalid --status"},
	}
	for _, tt := range tests {
		r := fails(t, exitUsage, tt.want, tt.args...)
		if !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("flowlite %s: no usage hint in %q", strings.Join(tt.args, " "), r.stderr)
		}
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)

	r := flowlite(t, map[string]string{envDB: path}, "runs", "--status", "completed")
	if r.code != exitOK || !strings.Contains(r.stdout, doneRun) {
		t.Errorf("runs with %s: exit %d, stdout %q, stderr %q", envDB, r.code, r.stdout, r.stderr)
	}
	// --db wins over the environment.
	r = flowlite(t, map[string]string{envDB: filepath.Join(t.TempDir(), "missing.db")}, "--db", path, "stats")
	if r.code != exitOK {
		t.Errorf("--db with a bad %s: exit %d, stderr %q", envDB, r.code, r.stderr)
	}

	// No command prints help and succeeds.
	r = flowlite(t, nil)
	if r.code != exitOK || !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("no arguments: exit %d, stdout %q", r.code, r.stdout)
	}
}
