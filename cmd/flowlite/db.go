package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flowlite/flowlite/flow"
)

// defaultBusyTimeout is how long a write waits for a lock another process
// holds, as flow.Open sets it.
const defaultBusyTimeout = 5 * time.Second

// ErrNotFlowlite is returned for a SQLite database that flowlite did not
// create: the CLI never writes its schema into someone else's database.
var errNotFlowlite = errors.New("not a flowlite database")

// dbPathOrUsage returns the database named by --db or $FLOWLITE_DB, checked
// to exist: flowlite never creates a database.
func (a *app) dbPathOrUsage() (string, error) {
	path := a.dbPath
	if path == "" {
		path = a.getenv(envDB)
	}
	if path == "" {
		return "", usageErrorf("no database: pass --db PATH or set %s", envDB)
	}
	// flow.Open creates a missing file; an operator tool must not.
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("open %s: no such file (flowlite does not create databases)", path)
	case err != nil:
		return "", fmt.Errorf("open %s: %w", path, err)
	case info.IsDir():
		return "", fmt.Errorf("open %s: %w: it is a directory", path, flow.ErrNotDatabase)
	case info.Mode().IsRegular() && info.Size() == 0:
		// SQLite would take an empty file for an empty database and the
		// migration would write a schema into it.
		return "", fmt.Errorf("open %s: %w: the file is empty", path, flow.ErrNotDatabase)
	}
	return path, nil
}

// withEngine opens the database named by --db or $FLOWLITE_DB, calls fn
// with an engine that is never started, and closes it. The database must be
// a flowlite database at this binary's schema version: flow.Open would
// migrate an older one, which only "migrate up" may do, and would write
// flowlite's schema into any other SQLite database.
func (a *app) withEngine(ctx context.Context, fn func(*flow.Engine) error) error {
	path, err := a.dbPathOrUsage()
	if err != nil {
		return err
	}
	if err := a.requireCurrentSchema(ctx, path); err != nil {
		return err
	}
	return a.openEngine(ctx, path, fn)
}

// withReader is withEngine for commands that only read: the engine is opened
// with flow.OpenReadOnly, so the command works on a read-only file,
// directory or mount, leaves no -wal or -shm file behind, and cannot change
// the database even by mistake.
func (a *app) withReader(ctx context.Context, fn func(*flow.Engine) error) (err error) {
	path, err := a.dbPathOrUsage()
	if err != nil {
		return err
	}
	if err := a.requireCurrentSchema(ctx, path); err != nil {
		return err
	}
	e, err := flow.OpenReadOnly(ctx, path, &flow.Config{Logger: a.logger})
	if err != nil {
		return a.dbError(err)
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
	}()
	return a.dbError(fn(e))
}

// openEngine opens an engine on path without starting it, calls fn and
// closes the engine. With the default busy timeout it is flow.Open; with
// another, flow.New over a pool opened with flow.SQLiteDSN whose busy_timeout
// is replaced (flow.Config has no busy timeout).
func (a *app) openEngine(ctx context.Context, path string, fn func(*flow.Engine) error) (err error) {
	cfg := &flow.Config{Logger: a.logger, Retention: a.retention}
	var e *flow.Engine
	var db *sql.DB
	if a.busyTimeout == defaultBusyTimeout {
		e, err = flow.Open(ctx, path, cfg)
	} else {
		db, err = sql.Open("sqlite", dsnWithBusyTimeout(flow.SQLiteDSN(path, flow.SynchronousFull), a.busyTimeout))
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		db.SetMaxOpenConns(4)
		e, err = flow.New(ctx, db, cfg)
		if err != nil {
			db.Close()
			err = fmt.Errorf("open %s: %w", path, err)
		}
	}
	if err != nil {
		return a.dbError(err)
	}
	defer func() {
		cerr := e.Close()
		if db != nil {
			cerr = errors.Join(cerr, db.Close())
		}
		if cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
	}()
	return a.dbError(fn(e))
}

// dsnWithBusyTimeout replaces the busy_timeout pragma of a modernc DSN.
func dsnWithBusyTimeout(dsn string, d time.Duration) string {
	base, rawQuery, _ := strings.Cut(dsn, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return dsn
	}
	pragmas := q["_pragma"]
	for i, p := range pragmas {
		if strings.HasPrefix(p, "busy_timeout(") {
			pragmas[i] = fmt.Sprintf("busy_timeout(%d)", d.Milliseconds())
		}
	}
	return base + "?" + q.Encode()
}

// dbError rewrites a lock timeout into a message an operator can act on.
// Other errors pass unchanged.
func (a *app) dbError(err error) error {
	if err == nil || !isBusy(err) {
		return err
	}
	return fmt.Errorf("database is locked: another connection holds the write lock and did not release it within the busy timeout of %s (--busy-timeout); nothing was changed: %w", a.busyTimeout, err)
}

func isBusy(err error) bool {
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		switch serr.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY")
}

// runError rewrites the error of a read or action on run id so that an
// unknown run reads "run ID: not found" instead of the store's wording.
func runError(id string, err error) error {
	if errors.Is(err, flow.ErrRunNotFound) {
		return fmt.Errorf("run %s: %w", id, flow.ErrRunNotFound)
	}
	return err
}
