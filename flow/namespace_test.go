package flow_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/flow"
)

// tableNames returns the tables of the database at path.
func tableNames(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
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
	return names
}

// TestSharesFileWithApplication opens an engine on a file that holds the
// application's own tables, two of them named like flowlite's old tables
// (runs, events) and one like goose's default version table, and runs a
// RunTx step that writes the application's runs table in the engine's
// transaction. flowlite used to create its tables under those names, and
// failed ("table runs already exists").
func TestSharesFileWithApplication(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	app := rawDB(t, path)
	if _, err := app.Exec(`
		CREATE TABLE runs (id INTEGER PRIMARY KEY, athlete TEXT NOT NULL, km REAL NOT NULL);
		CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT NOT NULL);
		CREATE TABLE goose_db_version (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL, is_applied INTEGER NOT NULL);
		INSERT INTO runs (athlete, km) VALUES ('ada', 10.5);
		INSERT INTO events (what) VALUES ('marathon');
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, 1), (20240101, 1);`); err != nil {
		t.Fatal(err)
	}

	e := openEngine(t, path, nil)
	record := flow.Step[string, int64]{
		Name: "record_run",
		RunTx: func(ctx context.Context, tx *sql.Tx, athlete string) (int64, error) {
			res, err := tx.ExecContext(ctx, "INSERT INTO runs (athlete, km) VALUES (?, 42.195)", athlete)
			if err != nil {
				return 0, err
			}
			return res.LastInsertId()
		},
	}
	wf := flow.Workflow[string, int64]{Name: "record", Version: 1, Run: func(wc flow.Context, athlete string) (int64, error) {
		return flow.Do(wc, record, athlete)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	r, err := flow.Start(ctx, e, wf, "grace", &flow.StartOptions{RunID: "record-grace"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The application's tables keep their rows and gained the step's.
	var athletes []string
	rows, err := app.Query("SELECT athlete FROM runs ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		athletes = append(athletes, a)
	}
	rows.Close()
	if !slices.Equal(athletes, []string{"ada", "grace"}) || id != 2 {
		t.Errorf("application runs: %v (step returned id %d), want [ada grace] and id 2", athletes, id)
	}
	var what string
	var versions int
	if err := app.QueryRow("SELECT what FROM events").Scan(&what); err != nil || what != "marathon" {
		t.Errorf("application events: %q, %v", what, err)
	}
	if err := app.QueryRow("SELECT count(*) FROM goose_db_version").Scan(&versions); err != nil || versions != 2 {
		t.Errorf("application's goose table has %d rows (%v), want its own 2", versions, err)
	}

	// flowlite's run is in flowlite's namespace, and every table flowlite
	// made carries the prefix.
	if info, err := e.Inspect(ctx, "record-grace"); err != nil || info.Status != flow.StatusCompleted {
		t.Errorf("inspect: %+v, %v", info, err)
	}
	for _, name := range tableNames(t, app) {
		switch {
		case strings.HasPrefix(name, "flowlite_"):
		case slices.Contains([]string{"runs", "events", "goose_db_version", "sqlite_sequence"}, name):
		default:
			t.Errorf("table %s is neither the application's nor in flowlite's namespace", name)
		}
	}
	var unprefixed []string
	rows, err = app.Query("SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('index', 'view', 'trigger') AND sql IS NOT NULL AND name NOT LIKE 'flowlite\\_%' ESCAPE '\\'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		unprefixed = append(unprefixed, n)
	}
	rows.Close()
	if len(unprefixed) > 0 {
		t.Errorf("schema objects outside flowlite's namespace: %v", unprefixed)
	}
}

// TestOpensDatabaseOfTheOldLayout migrates a database the way flowlite did
// before its tables had the prefix (up to 00009, in goose's default
// version table) and expects Open to move it into the namespace, keeping
// its runs.
func TestOpensDatabaseOfTheOldLayout(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
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
	db := rawDB(t, path)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, old, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO runs (id, workflow, version, queue, status, input, run_at, created_at, updated_at)
		VALUES ('legacy-1', 'double', 1, 'default', 'pending', CAST('1' AS BLOB), 0, 0, 0)`); err != nil {
		t.Fatal(err)
	}

	e := openEngine(t, path, nil)
	info, err := e.Inspect(ctx, "legacy-1")
	if err != nil || info.Status != flow.StatusPending {
		t.Fatalf("run of the old layout after Open: %+v, %v", info, err)
	}
	got := tableNames(t, db)
	if slices.Contains(got, "goose_db_version") || slices.Contains(got, "runs") || !slices.Contains(got, "flowlite_goose_db_version") {
		t.Errorf("tables after Open: %v, want flowlite's under the prefix only", got)
	}
	var v int64
	if err := db.QueryRow("SELECT max(version_id) FROM flowlite_goose_db_version").Scan(&v); err != nil || v < 10 {
		t.Errorf("schema version after Open: %d, %v", v, err)
	}
	// And an engine of this version works it.
	flow.Register(e, twiceWF)
	startEngine(t, e)
	r, err := flow.Start(ctx, e, twiceWF, 1, &flow.StartOptions{RunID: "legacy-1"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Result(ctx); err != nil || out != 2 {
		t.Errorf("result of the legacy run: %d, %v", out, fmt.Sprint(err))
	}
}
