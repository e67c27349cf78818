package main

import (
	"os"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/internal/pgtest"
)

func TestCopyUsage(t *testing.T) {
	path := fixtureDB(t)
	fails(t, exitUsage, "no target", "--db", path, "copy")
	fails(t, exitUsage, "postgres:// URL", "--db", path, "copy", "--to", "mysql://x/y")
	// A PostgreSQL source is refused by name, its password masked.
	r := fails(t, exitError, "copies a SQLite file", "--db", "postgres://u:secret@localhost/x", "copy", "--to", "POSTGRES://localhost/y")
	if strings.Contains(r.stderr, "secret") {
		t.Errorf("the source URL's password is in the error: %q", r.stderr)
	}
}

func TestCopy(t *testing.T) {
	if os.Getenv("FLOWLITE_PG_TEST") == "" && !pgtest.Postgres() {
		t.Skip("set FLOWLITE_PG_TEST=1 to run against PostgreSQL")
	}
	dsn, schema := pgtest.Schema(t)
	path := fixtureDB(t)
	out := ok(t, path, "copy", "--to", dsn, "--schema", schema)
	if !strings.Contains(out, "the counts match") || rowOf(t, out, "runs") == nil ||
		rowOf(t, out, "streams") == nil || rowOf(t, out, "stream_chunks") == nil {
		t.Errorf("copy output:\n%s", out)
	}
	fails(t, exitError, "already holds", "--db", path, "copy", "--to", dsn, "--schema", schema)
}
