package main

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestCheckDamagedValue flips a byte of a run's stored input, which
// SQLite's integrity_check cannot see, and expects check to fail naming the
// run, in both output formats.
func TestCheckDamagedValue(t *testing.T) {
	t.Parallel()
	_, path := copyFixture(t)
	if out := ok(t, path, "check"); !strings.Contains(out, "sound") {
		t.Fatalf("check of the fixture: %q", out)
	}
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE flowlite_runs SET input = CAST(char(123, 34, 105, 116, 101, 109, 34, 58, 255) AS BLOB) WHERE id = ?", doneRun); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := flowlite(t, nil, "--db", path, "check")
	if r.code != exitError || !strings.Contains(r.stdout, "run "+doneRun+": stored input is not valid JSON") || !strings.Contains(r.stderr, "check found 1 problem") {
		t.Errorf("check of a damaged input: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = flowlite(t, nil, "--db", path, "--json", "check")
	if got := decode[checkJSON](t, r.stdout); r.code != exitError || got.OK || len(got.Problems) != 1 || !strings.Contains(got.Problems[0], doneRun) {
		t.Errorf("check --json of a damaged input: exit %d, %+v", r.code, got)
	}
}
