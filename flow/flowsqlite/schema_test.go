package flowsqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestInspectAndMigrate: Inspect tells another program's SQLite database
// from flowlite's without changing it; Migrate brings a flowlite file that
// lacks migrations to the latest version, and does nothing on a current one.
func TestInspectAndMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()

	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE accounts (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := flowsqlite.Inspect(ctx, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Flowlite || len(st.Tables) != 1 || st.Tables[0] != "accounts" {
		t.Errorf("Inspect of another program's database = %+v, want not flowlite's, with its one table", st)
	}

	path := filepath.Join(dir, "app.db")
	e, err := flowsqlite.Open(ctx, path, &flow.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = flowsqlite.Inspect(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Flowlite || st.Pending() || st.Behind != 0 {
		t.Fatalf("Inspect of a file Open migrated = %+v, want flowlite's at the latest version", st)
	}
	after, err := flowsqlite.Migrate(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after.Current != st.Current || after.Latest != st.Latest {
		t.Errorf("Migrate of a current file = %+v, want it left at %d", after, st.Current)
	}

}
