package sqlitestore_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// tableNames returns the names of the tables of db, sorted.
func tableNames(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// appendEvents appends the events of a run's start to its history.
func appendEvents(t *testing.T, s store.Store, runID string, at int64) {
	t.Helper()
	ctx := t.Context()
	err := s.Write(ctx, func(tx store.Tx) error {
		return tx.EventAppendMany(ctx, []store.Event{
			{RunID: runID, At: at, Kind: "run_started"},
			{RunID: runID, At: at + 1, Kind: "step_started", Step: "double", Attempt: 1},
			{RunID: runID, At: at + 2, Kind: "step_completed", Step: "double", Attempt: 1, Detail: "2"},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Migration 00006 rebuilds the events table: a database migrated down past
// it and up again keeps every run's history, ids included, and new events
// still sort after the old ones.
func TestEventsMigrationKeepsHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	createDB(t, path)
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, "r1", base)
	before, err := s.Reader().EventList(ctx, "r1")
	if err != nil || len(before) == 0 {
		t.Fatalf("history: %v, %v", before, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Down past 00006, then up again by opening the database.
	p, err := goose.NewProvider(goose.DialectSQLite3, openDSN(t, path, ""), migrations.SQLite(),
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(sqlitestore.VersionTable))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("migrate down to 5: %v", err)
	}
	if v, err := p.GetDBVersion(ctx); err != nil || v != 5 {
		t.Fatalf("version after migrating down: %d, %v; want 5", v, err)
	}
	s = openStore(t, path, sqlitestore.Options{})
	after, err := s.Reader().EventList(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("history changed by the migrations:\n before %+v\n after  %+v", before, after)
	}

	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "r2") }); err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, "r2", base+10)
	newer, err := s.Reader().EventList(ctx, "r2")
	if err != nil || len(newer) == 0 {
		t.Fatalf("history of a new run: %v, %v", newer, err)
	}
	if newer[0].ID <= before[len(before)-1].ID {
		t.Errorf("new event id %d not after the old ones (last %d)", newer[0].ID, before[len(before)-1].ID)
	}
}

// A database whose record of applied migrations lacks one below its
// version is refused with an error that says so, and left as it is.
func TestMissingLowerMigrationIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	createDB(t, path)
	db := openDSN(t, path, "")
	if _, err := db.ExecContext(ctx, "DELETE FROM "+sqlitestore.VersionTable+" WHERE version_id = 3"); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "lacks a lower migration") {
		t.Fatalf("open with migration 3 missing: %v, want an error saying a lower migration is missing", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+sqlitestore.VersionTable+" WHERE version_id = 3").Scan(&n); err != nil || n != 0 {
		t.Errorf("the refused open changed the migration record: %d rows for version 3 (%v)", n, err)
	}
}

// TestOpensDatabaseOfTheOldLayout migrates a database the way flowlite did
// before its tables had the prefix (up to 00009, in goose's default
// version table) and expects Open to move it into the namespace, keeping
// its runs, which a claim then takes.
func TestOpensDatabaseOfTheOldLayout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	old := fstest.MapFS{}
	names, err := fs.Glob(migrations.SQLite(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name >= "00010" {
			continue
		}
		b, err := fs.ReadFile(migrations.SQLite(), name)
		if err != nil {
			t.Fatal(err)
		}
		// The files as they were before the prefix: the same DDL, without it.
		old[name] = &fstest.MapFile{Data: []byte(strings.ReplaceAll(string(b), "flowlite_", ""))}
	}
	db := openDSN(t, path, "")
	p, err := goose.NewProvider(goose.DialectSQLite3, db, old, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO runs (id, workflow, version, queue, status, input, run_at, created_at, updated_at)
		VALUES ('legacy-1', 'double', 1, 'default', 'pending', CAST('1' AS BLOB), 0, 0, 0)`); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, path, sqlitestore.Options{})
	run, err := s.Reader().RunGet(ctx, "legacy-1")
	if err != nil || run.Status != flowtype.StatusPending {
		t.Fatalf("run of the old layout after Open: %+v, %v", run, err)
	}
	got := tableNames(t, db)
	if slices.Contains(got, "goose_db_version") || slices.Contains(got, "runs") || !slices.Contains(got, sqlitestore.VersionTable) {
		t.Errorf("tables after Open: %v, want flowlite's under the prefix only", got)
	}
	var v int64
	if err := db.QueryRowContext(ctx, "SELECT max(version_id) FROM "+sqlitestore.VersionTable).Scan(&v); err != nil || v < 10 {
		t.Errorf("schema version after Open: %d, %v", v, err)
	}
	// And the store of this version works it.
	var claimed []store.Run
	err = s.Write(ctx, func(tx store.Tx) error {
		var err error
		claimed, err = tx.RunClaim(ctx, store.RunClaimParams{
			Queue: "default", Known: []flowtype.WorkflowKey{{Name: "double", Version: 1}}, Owner: "w1", Max: 10,
			Now: base, LeaseExpiresAt: base + 60_000,
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != "legacy-1" {
		t.Errorf("claim after Open took %+v, want the legacy run", claimed)
	}
}

// TestSchemaKeepsToItsNamespace opens a store on a file that holds the
// application's own tables, two of them named like flowlite's old tables
// (runs, events) and one like goose's default version table. flowlite used
// to create its tables under those names, and failed ("table runs already
// exists"); now every schema object it makes carries the prefix, and the
// application's rows are left as they were.
func TestSchemaKeepsToItsNamespace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	app := openDSN(t, path, "")
	if _, err := app.ExecContext(ctx, `
		CREATE TABLE runs (id INTEGER PRIMARY KEY, athlete TEXT NOT NULL, km REAL NOT NULL);
		CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT NOT NULL);
		CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL);
		INSERT INTO runs (athlete, km) VALUES ('ada', 10.5);
		INSERT INTO events (what) VALUES ('marathon');
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1), (20240101, 1);`); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, path, sqlitestore.Options{})
	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "r1") }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reader().RunGet(ctx, "r1"); err != nil {
		t.Errorf("the store's run: %v", err)
	}

	// The application's tables keep their rows.
	var athlete, what string
	var athletes, versions int
	err := errors.Join(
		app.QueryRowContext(ctx, "SELECT count(*), min(athlete) FROM runs").Scan(&athletes, &athlete),
		app.QueryRowContext(ctx, "SELECT what FROM events").Scan(&what),
		app.QueryRowContext(ctx, "SELECT count(*) FROM goose_db_version").Scan(&versions),
	)
	if err != nil {
		t.Fatal(err)
	}
	if athletes != 1 || athlete != "ada" || what != "marathon" {
		t.Errorf("application rows: %d runs (%q), event %q; want its own, untouched", athletes, athlete, what)
	}
	if versions != 2 {
		t.Errorf("application's goose table has %d rows, want its own 2", versions)
	}

	// Every table, index, view and trigger flowlite made carries the prefix.
	for _, name := range tableNames(t, app) {
		switch {
		case strings.HasPrefix(name, "flowlite_"):
		case slices.Contains([]string{"runs", "events", "goose_db_version", "sqlite_sequence"}, name):
		default:
			t.Errorf("table %s is neither the application's nor in flowlite's namespace", name)
		}
	}
	rows, err := app.QueryContext(ctx, `SELECT type || ' ' || name FROM sqlite_master
		WHERE type IN ('index', 'view', 'trigger') AND sql IS NOT NULL AND name NOT LIKE 'flowlite\_%' ESCAPE '\'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var unprefixed []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		unprefixed = append(unprefixed, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(unprefixed) > 0 {
		t.Errorf("schema objects outside flowlite's namespace: %v", unprefixed)
	}
}

// Migration 00020 stores stream messages by the append: a database
// migrated down past it gets every message back in a row of its own,
// exactly as written, and migrated up again reads the same messages.
func TestStreamChunksMigrationKeepsMessages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	s := openStore(t, path, sqlitestore.Options{})
	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "r1") }); err != nil {
		t.Fatal(err)
	}
	// Compact, as the engine writes them: the way down drops whitespace
	// between a message's tokens (SQLite's -> does).
	values := []string{`"a b"`, `true`, `{"k":[1,2.50,null]}`, `"\u00e9"`, `0`}
	for i, batch := range [][]string{values[:3], values[3:]} {
		vs := make([][]byte, len(batch))
		for j, v := range batch {
			vs[j] = []byte(v)
		}
		err := s.Write(ctx, func(tx store.Tx) error {
			_, err := tx.StreamAppend(ctx, store.StreamAppendParams{RunID: "r1", Stream: "s", Values: vs, At: base + int64(i), Step: "gen", Attempt: i + 1})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.Reader().StreamRead(ctx, "r1", "s", 0, 100)
	if err != nil || len(before) != len(values) {
		t.Fatalf("messages: %+v, %v", before, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	p, err := goose.NewProvider(goose.DialectSQLite3, openDSN(t, path, ""), migrations.SQLite(),
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(sqlitestore.VersionTable))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 19); err != nil {
		t.Fatalf("migrate down to 19: %v", err)
	}
	db := openDSN(t, path, "")
	rows, err := db.QueryContext(ctx, "SELECT position, CAST(value AS TEXT), attempt FROM flowlite_stream_messages WHERE run_id = 'r1' ORDER BY position")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var pos, attempt int64
		var v string
		if err := rows.Scan(&pos, &v, &attempt); err != nil {
			t.Fatal(err)
		}
		if int(pos) != len(got) || (pos < 3) != (attempt == 1) {
			t.Errorf("message row %d: position %d, attempt %d", len(got), pos, attempt)
		}
		got = append(got, v)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, values) {
		t.Errorf("messages after migrating down:\n got %q\nwant %q", got, values)
	}

	s = openStore(t, path, sqlitestore.Options{}) // up again
	after, err := s.Reader().StreamRead(ctx, "r1", "s", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("messages changed by the migrations:\n before %+v\n after  %+v", before, after)
	}
}
