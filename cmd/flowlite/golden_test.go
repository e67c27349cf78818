package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the current output")

// Normalizers of what changes from run to run: times, durations, paths,
// worker IDs. Column padding changes with them, so runs of spaces shrink to
// two.
var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`), "<TIME>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s)\b`), "<DUR>"},
	{regexp.MustCompile(`/\S*/flow\.db`), "<DB>"},
}

// Table padding, which the normalized values change.
var (
	padding  = regexp.MustCompile(`(\S) {2,}`)
	trailing = regexp.MustCompile(` +\n`)
)

func normalize(s string, json bool) string {
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	if !json {
		s = trailing.ReplaceAllString(padding.ReplaceAllString(s, "$1  "), "\n")
	}
	return s
}

// golden compares got, normalized, with testdata/name.golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalize(got, strings.HasSuffix(name, "_json"))
	file := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, file, got, want)
	}
}

func TestGolden(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"runs", []string{"runs"}},
		{"runs_failed_json", []string{"runs", "--status", "failed", "--json"}},
		{"show_saga", []string{"show", sagaRun}},
		{"show_stuck", []string{"show", stuckRun}},
		{"history_relative", []string{"history", "--relative", doneRun}},
		{"stats", []string{"stats"}},
		{"stats_json", []string{"stats", "--json"}},
		{"migrate_status", []string{"migrate", "status"}},
		{"queues", []string{"queues"}},
		{"dead_list", []string{"dead", "list"}},
		{"dead_requeue_dry_run_json", []string{"dead", "requeue", "--all", "--dry-run", "--json"}},
		{"cancel_pending", []string{"cancel", pendingRun}},
		{"retry_saga_json", []string{"retry", "--json", sagaRun}},
		{"signal_json", []string{"signal", "--json", "--key", "k", stuckRun, "approve", `{"ok": true}`}},
	} {
		out := ok(t, path, tt.args...)
		if tt.name == "migrate_status" {
			// Versions grow with every migration.
			out = regexp.MustCompile(`(Version|Latest)( +)\d+`).ReplaceAllString(out, "$1$2<N>")
		}
		if tt.name == "history_relative" {
			// The run_claimed line names the worker (host-pid-random).
			out = regexp.MustCompile(`fence 1, \S+`).ReplaceAllString(out, "fence 1, <WORKER>")
		}
		golden(t, tt.name, out)
	}
	golden(t, "help", flowlite(t, nil, "--help").stdout)
	r := flowlite(t, nil, "--db", path, "show", "nope")
	golden(t, "show_unknown_stderr", r.stderr)
	r = flowlite(t, nil, "--db", path, "runs", "--since", "soon")
	golden(t, "runs_bad_since_stderr", r.stderr)
	if !strings.Contains(r.stderr, "Run 'flowlite runs --help'") {
		t.Errorf("no usage hint: %q", r.stderr)
	}
}
