package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// defaultBusyTimeout is how long a write waits for a lock another process
// holds, as flowsqlite.Open sets it.
const defaultBusyTimeout = 5 * time.Second

// ErrNotFlowlite is returned for a SQLite database that flowlite did not
// create: the CLI never writes its schema into someone else's database.
var errNotFlowlite = errors.New("not a flowlite database")

// A database is what --db names, opened through its backend package
// (backend.go). Commands read and act on runs through the *flow.Engine it
// opens, and look past the engine only through these methods, for what
// only one kind of database has.
type database interface {
	// label names the database in output and errors: the path as given
	// (a shard set's comma-separated paths), or the URL without its
	// password.
	label() string
	// fileOnly returns nil on SQLite files and, elsewhere, the error of
	// command, which works on a database file for the reason why.
	fileOnly(command, why string) error
	// requireCurrent refuses a database that is missing, is not
	// flowlite's, or whose schema is not at this binary's version: the
	// CLI never creates a database, never writes flowlite's schema into
	// another program's, and leaves upgrades to "migrate up".
	requireCurrent(ctx context.Context) error
	// version reads the schema's version without changing anything,
	// refusing a database that is not flowlite's.
	version(ctx context.Context) (schemaVersion, error)
	// migrate applies the pending migrations and returns the version
	// after.
	migrate(ctx context.Context) (schemaVersion, error)
	// open opens an engine on the database, which the CLI never starts;
	// readOnly asks for one that cannot write, where the backend has it.
	open(ctx context.Context, readOnly bool) (*flow.Engine, error)
	// copyTo copies a SQLite file into schema of the PostgreSQL database
	// to (created and migrated when missing) and returns the rows copied
	// per table and the schema; elsewhere it is fileOnly's error.
	copyTo(ctx context.Context, to, schema string) ([]copiedTable, string, error)
}

// copiedTable is the number of rows copy copied into one table.
type copiedTable struct {
	Table string
	Rows  int64
}

// schemaVersion is the version of a database's schema.
type schemaVersion struct {
	Schema  string // the PostgreSQL schema; "" for a file
	Current int64  // highest version applied
	Latest  int64  // highest version this binary knows
	Behind  int    // migrations above Current
}

func (v schemaVersion) pending() bool { return v.Current < v.Latest }

// dbName returns --db or $FLOWLITE_DB, unchecked.
func (a *app) dbName() string {
	if a.dbPath != "" {
		return a.dbPath
	}
	return a.getenv(envDB)
}

// fileOnly refuses a database that is not a SQLite file for command, which
// works on a file for the reason why.
func (a *app) fileOnly(command, why string) error {
	db, err := a.database()
	if err != nil {
		return err
	}
	return db.fileOnly(command, why)
}

// shardFiles splits a --db value into the files of a shard set: one file,
// or several separated by commas, in the set's order (flowsqlite.OpenShards).
func shardFiles(path string) ([]string, error) {
	files := strings.Split(path, ",")
	for i, f := range files {
		if files[i] = strings.TrimSpace(f); files[i] == "" {
			return nil, usageErrorf("--db %q: empty file name in the list of shard files", path)
		}
	}
	return files, nil
}

// oneFile refuses a shard set for a command that works on one file.
func (a *app) oneFile(command, why string) error {
	files, err := shardFiles(a.dbName())
	if err != nil || len(files) == 1 {
		return err
	}
	return usageErrorf("%s works on one file (%s): run it for each shard file of --db %s", command, why, a.dbName())
}

// checkDBFile checks that the SQLite database file path exists and is not
// empty.
func checkDBFile(path string) error {
	// flowsqlite.Open creates a missing file; an operator tool must not.
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("open %s: no such file (flowlite does not create databases)", path)
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	case info.IsDir():
		return fmt.Errorf("open %s: %w: it is a directory", path, flow.ErrNotDatabase)
	case info.Mode().IsRegular() && info.Size() == 0:
		// SQLite would take an empty file for an empty database and the
		// migration would write a schema into it.
		return fmt.Errorf("open %s: %w: the file is empty", path, flow.ErrNotDatabase)
	}
	return nil
}

// withEngine opens the database named by --db or $FLOWLITE_DB, calls fn
// with an engine that is never started, and closes it. The database must
// be a flowlite database at this binary's schema version (see
// database.requireCurrent).
func (a *app) withEngine(ctx context.Context, fn func(*flow.Engine) error) error {
	return a.withDatabase(ctx, false, fn)
}

// withReader is withEngine for commands that only read: on SQLite the
// engine is opened with flowsqlite.OpenReadOnly, so the command works on a
// read-only file, directory or mount, leaves no -wal or -shm file behind,
// and cannot change the database even by mistake. On PostgreSQL it is
// withEngine: the commands that use it only read, over an ordinary
// connection.
func (a *app) withReader(ctx context.Context, fn func(*flow.Engine) error) error {
	return a.withDatabase(ctx, true, fn)
}

// withDatabase checks the database, opens an engine on it, calls fn and
// closes the engine, rewriting a lock timeout with dbError.
func (a *app) withDatabase(ctx context.Context, readOnly bool, fn func(*flow.Engine) error) (err error) {
	db, err := a.database()
	if err != nil {
		return err
	}
	if err := db.requireCurrent(ctx); err != nil {
		return err
	}
	e, err := db.open(ctx, readOnly)
	if err != nil {
		return a.dbError(err)
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", db.label(), cerr)
		}
	}()
	return a.dbError(fn(e))
}

// dbError rewrites a lock timeout (flow.ErrBusy) into a message an operator
// can act on. Other errors pass unchanged.
func (a *app) dbError(err error) error {
	if err == nil || !errors.Is(err, flow.ErrBusy) {
		return err
	}
	return fmt.Errorf("database is locked: another connection holds the write lock and did not release it within the busy timeout of %s (--busy-timeout); nothing was changed: %w", a.busyTimeout, err)
}

// runError rewrites the error of a read or action on run id so that an
// unknown run reads "run ID: not found" instead of the store's wording.
func runError(id string, err error) error {
	if errors.Is(err, flow.ErrRunNotFound) {
		return fmt.Errorf("run %s: %w", id, flow.ErrRunNotFound)
	}
	return err
}

// notFlowliteError explains why the SQLite file at path, which holds
// tables, is refused.
func notFlowliteError(path string, tables []string) error {
	list := "none"
	if len(tables) > 0 {
		list = strings.Join(tables, ", ")
		if len(tables) > 8 {
			list = strings.Join(tables[:8], ", ") + ", …"
		}
	}
	return fmt.Errorf("open %s: %w: it is a SQLite database without flowlite's schema (tables: %s); flowlite leaves it alone", path, errNotFlowlite, list)
}

// isNotSupported reports whether err is a file operation refused by a
// backend that keeps no database file.
func isNotSupported(err error) bool { return errors.Is(err, flow.ErrNotSupported) }
