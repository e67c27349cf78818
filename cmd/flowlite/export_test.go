package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowhistory"
)

// history --export writes the run's history file: what show and history
// print, in the flowhistory format, to stdout or to --output.
func TestHistoryExport(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	file := filepath.Join(t.TempDir(), "saga.json")
	// With --output it says what it wrote (before, it printed nothing).
	out := ok(t, path, "history", sagaRun, "--export", "--output", file)
	if !strings.HasPrefix(out, "exported the history of run "+sagaRun+" to "+file+": ") || !strings.HasSuffix(out, " bytes\n") ||
		!strings.Contains(out, " step call(s), ") || strings.Count(out, "\n") != 1 {
		t.Errorf("stdout %q with --output, want one line saying what was written", out)
	}
	if got := decode[exportJSON](t, ok(t, path, "--json", "history", sagaRun, "--export", "--output", file)); got.Run != sagaRun || got.File != file || got.Bytes == 0 || got.Events == 0 {
		t.Errorf("--json: %+v", got)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := flowhistory.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	detail := decode[runDetailJSON](t, ok(t, path, "show", "--json", sagaRun))
	events := decode[[]eventJSON](t, ok(t, path, "history", "--json", sagaRun))
	if h.Run.ID != sagaRun || h.Run.Workflow != detail.Workflow || h.Run.Status != "failed" ||
		len(h.Steps) != len(detail.Steps) || len(h.Events) != len(events) {
		t.Fatalf("exported %+v with %d steps and %d events; show has %d steps, history %d events",
			h.Run, len(h.Steps), len(h.Events), len(detail.Steps), len(events))
	}
	for i, s := range h.Steps {
		want := detail.Steps[i]
		if s.Name != want.Name || s.Status != want.Status || s.Attempts != want.Attempts ||
			(len(s.Output) > 0 || len(want.Output) > 0) && !reflect.DeepEqual(generic(t, s.Output), generic(t, want.Output)) {
			t.Errorf("step %d: exported %+v, show %+v", i, s, want)
		}
	}
	if _, err := flowhistory.Read(bytes.NewReader([]byte(ok(t, path, "history", "--export", sagaRun)))); err != nil {
		t.Errorf("history --export to stdout: %v", err)
	}
	fails(t, exitUsage, "--output needs --export", "--db", path, "history", "--output", file, sagaRun)
	fails(t, exitError, "run nope: not found", "--db", path, "history", "--export", "nope")
}
