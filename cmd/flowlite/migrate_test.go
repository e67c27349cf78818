package main

import (
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// checkStatusTooNew checks migrate status of a schema newer than this
// binary (at version newer): it reports the versions and the state on
// stdout, as text and as JSON, and exits 1 naming the problem on stderr,
// the same on both backends (issue 22).
func checkStatusTooNew(t *testing.T, newer int64, db ...string) {
	t.Helper()
	r := flowlite(t, nil, append(db, "migrate", "status")...)
	if r.code != exitError || !strings.HasPrefix(r.stderr, "flowlite: migrate status of ") ||
		!strings.Contains(r.stderr, "is at version "+strconv.FormatInt(newer, 10)) || !strings.Contains(r.stderr, "upgrade flowlite") {
		t.Errorf("migrate status: exit %d, stderr %q; want 1 and the versions", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "newer than this flowlite: upgrade flowlite") || !strings.Contains(r.stdout, strconv.FormatInt(newer, 10)) {
		t.Errorf("migrate status stdout:\n%s\nwant the version and the state", r.stdout)
	}
	r = flowlite(t, nil, append(db, "migrate", "status", "--json")...)
	if r.code != exitError || !strings.Contains(r.stderr, "upgrade flowlite") {
		t.Errorf("migrate status --json: exit %d, stderr %q; want 1", r.code, r.stderr)
	}
	if st := decode[migrateJSON](t, r.stdout); !st.TooNew || st.Pending || st.Current != newer || st.Latest >= newer {
		t.Errorf("migrate status --json: %+v, want too_new at version %d", st, newer)
	}
	// migrate up refuses it too, and other commands as before.
	if r := flowlite(t, nil, append(db, "migrate", "up")...); r.code != exitError || !strings.Contains(r.stderr, "upgrade flowlite") {
		t.Errorf("migrate up: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestMigrateStatusTooNew(t *testing.T) {
	t.Parallel()
	path := fixtureDB(t)
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The table is sqlitestore.VersionTable (see oldSchema).
	const newer = 99999
	if _, err := db.Exec("INSERT INTO flowlite_goose_db_version (version_id, is_applied) VALUES (?, 1)", newer); err != nil {
		t.Fatal(err)
	}
	checkStatusTooNew(t, newer, "--db", path)
}

func TestPostgresMigrateStatusTooNew(t *testing.T) {
	t.Parallel()
	dsn, schema := pgSchema(t)
	pgRuns(t, dsn, schema)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The table is pgstore.VersionTable.
	const newer = 99999
	if _, err := db.ExecContext(t.Context(), "INSERT INTO "+schema+".goose_db_version (version_id, is_applied) VALUES ($1, true)", newer); err != nil {
		t.Fatal(err)
	}
	checkStatusTooNew(t, newer, "--db", dsn, "--schema", schema)
}
