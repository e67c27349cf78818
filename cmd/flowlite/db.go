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
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// defaultBusyTimeout is how long a write waits for a lock another process
// holds, as flowsqlite.Open sets it.
const defaultBusyTimeout = 5 * time.Second

// ErrNotFlowlite is returned for a SQLite database that flowlite did not
// create: the CLI never writes its schema into someone else's database.
var errNotFlowlite = errors.New("not a flowlite database")

// dbPathOrUsage returns the database named by --db or $FLOWLITE_DB, checked
// to exist: flowlite never creates a database. A comma-separated list
// names the files of a shard set, in the set's order (see shardFiles);
// each is checked.
func (a *app) dbPathOrUsage() (string, error) {
	path := a.dbName()
	if path == "" {
		return "", usageErrorf("no database: pass --db PATH or set %s (a file path, a comma-separated list of a shard set's files, or a postgres:// URL)", envDB)
	}
	if isPostgresURL(path) {
		return path, nil
	}
	files, err := shardFiles(path)
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if err := checkDBFile(f); err != nil {
			return "", err
		}
	}
	return path, nil
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
// with an engine that is never started, and closes it. The database must be
// a flowlite database at this binary's schema version: flowsqlite.Open would
// migrate an older one, which only "migrate up" may do, and would write
// flowlite's schema into any other SQLite database.
//
// A postgres:// or postgresql:// URL opens the engine through flowpg
// instead, on the schema --schema names (see withPostgres).
func (a *app) withEngine(ctx context.Context, fn func(*flow.Engine) error) error {
	return a.withDatabase(ctx, a.openEngine, fn)
}

// withReader is withEngine for commands that only read: the engine is opened
// with flowsqlite.OpenReadOnly, so the command works on a read-only file,
// directory or mount, leaves no -wal or -shm file behind, and cannot change
// the database even by mistake. On PostgreSQL it is withEngine: the
// commands that use it only read, over an ordinary connection.
func (a *app) withReader(ctx context.Context, fn func(*flow.Engine) error) error {
	return a.withDatabase(ctx, a.openReader, fn)
}

// withDatabase resolves --db, checks the database and calls fn with an
// engine on it: through withPostgres for a PostgreSQL URL, else through
// open once the SQLite file is at this binary's schema version.
func (a *app) withDatabase(ctx context.Context, open func(context.Context, string, func(*flow.Engine) error) error, fn func(*flow.Engine) error) error {
	path, err := a.dbPathOrUsage()
	if err != nil {
		return err
	}
	if isPostgresURL(path) {
		return a.withPostgres(ctx, path, fn)
	}
	files, err := shardFiles(path)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := a.requireCurrentSchema(ctx, f); err != nil {
			return err
		}
	}
	return open(ctx, path, fn)
}

// openEngine opens an engine on path without starting it, with the busy
// timeout of --busy-timeout, calls fn and closes the engine.
func (a *app) openEngine(ctx context.Context, path string, fn func(*flow.Engine) error) error {
	cfg := &flow.Config{
		Logger: a.logger, Retention: a.retention,
		// The CLI's engine is never started, so it holds no lease; a long
		// --busy-timeout must not trip the lease-versus-busy check.
		LeaseTimeout: max(30*time.Second, 2*a.busyTimeout),
	}
	// A list of files is a shard set; one file, a plain engine.
	files, err := shardFiles(path)
	if err != nil {
		return err
	}
	e, err := flowsqlite.OpenShards(ctx, files, cfg, &flowsqlite.Options{BusyTimeout: a.busyTimeout})
	return a.useEngine(path, e, err, fn)
}

// openReader opens a read-only engine on path, with the busy timeout of
// --busy-timeout, calls fn and closes the engine.
func (a *app) openReader(ctx context.Context, path string, fn func(*flow.Engine) error) error {
	files, err := shardFiles(path)
	if err != nil {
		return err
	}
	e, err := flowsqlite.OpenShardsReadOnly(ctx, files, &flow.Config{Logger: a.logger}, &flowsqlite.Options{BusyTimeout: a.busyTimeout})
	return a.useEngine(path, e, err, fn)
}

// useEngine takes the result of opening an engine on path: it calls fn with
// e and closes it, rewriting a lock timeout with dbError.
func (a *app) useEngine(path string, e *flow.Engine, openErr error, fn func(*flow.Engine) error) (err error) {
	if openErr != nil {
		return a.dbError(openErr)
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
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
