package flow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// Migration 00006 rebuilds the events table: a database migrated down past
// it and up again keeps every run's history, ids included, and new events
// still sort after the old ones.
func TestEventsMigrationKeepsHistory(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	wf := doubler("migrated", 1)

	e := openEngine(t, path, nil)
	flow.Register(e, wf)
	startEngine(t, e)
	first, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Result(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := e.History(ctx, first.ID())
	if err != nil || len(before) == 0 {
		t.Fatalf("history: %v, %v", before, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Down past 00006, then up again by opening the database.
	p, err := goose.NewProvider(goose.DialectSQLite3, rawDB(t, path), migrations.SQLite(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 5); err != nil {
		t.Fatalf("migrate down to 5: %v", err)
	}
	e = openEngine(t, path, nil)
	flow.Register(e, wf)
	after, err := e.History(ctx, first.ID())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(before, after, func(a, b flow.Event) bool { return a == b }) {
		t.Errorf("history changed by the migrations:\n before %+v\n after  %+v", before, after)
	}

	startEngine(t, e)
	second, err := flow.Start(ctx, e, wf, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Result(ctx); err != nil {
		t.Fatal(err)
	}
	newer, err := e.History(ctx, second.ID())
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
	ctx := waitCtx(t)
	path := sqlitePath(t)
	e := openEngine(t, path, nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	if _, err := db.ExecContext(ctx, "DELETE FROM flowlite_goose_db_version WHERE version_id = 3"); err != nil {
		t.Fatal(err)
	}
	_, err := flowsqlite.Open(ctx, path, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "lacks a lower migration") {
		t.Fatalf("open with migration 3 missing: %v, want an error saying a lower migration is missing", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM flowlite_goose_db_version WHERE version_id = 3").Scan(&n); err != nil || n != 0 {
		t.Errorf("the refused open changed the migration record: %d rows for version 3 (%v)", n, err)
	}
}
