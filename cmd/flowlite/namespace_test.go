package main

import (
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestSharedFile runs the CLI on a file that holds an application's tables
// (named runs and events, like flowlite's tables before their prefix) beside
// flowlite's: flowlite is recognised by its own version table.
func TestSharedFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE runs (id INTEGER PRIMARY KEY, km REAL);
		CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT);`); err != nil {
		t.Fatal(err)
	}
	// Before flowlite opens it, the file is the application's alone.
	fails(t, exitError, "not a flowlite database", "--db", path, "runs")

	e, err := flowsqlite.Open(t.Context(), path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, path, "migrate", "status"); !strings.Contains(out, "up to date") {
		t.Errorf("migrate status of a shared file: %q", out)
	}
	ok(t, path, "runs")
	ok(t, path, "check")
}

// TestOldLayout runs the CLI on a database migrated before the flowlite_
// prefix: read commands ask for migrate up, which moves it into the
// namespace.
func TestOldLayout(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(migrations.SQLite(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	old := fstest.MapFS{}
	for _, name := range names {
		if name >= "00010" {
			continue
		}
		b, err := fs.ReadFile(migrations.SQLite(), name)
		if err != nil {
			t.Fatal(err)
		}
		old[name] = &fstest.MapFile{Data: []byte(strings.ReplaceAll(string(b), "flowlite_", ""))}
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, old, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fails(t, exitError, "migrate up", "--db", path, "runs")
	if out := ok(t, path, "migrate", "status"); !strings.Contains(out, "pending") {
		t.Errorf("migrate status of the old layout: %q", out)
	}
	ok(t, path, "migrate", "up")
	ok(t, path, "runs")
}
