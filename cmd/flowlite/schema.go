package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/migrate"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// The schema checks below read sqlite_master through internal/migrate. They
// run on a read-only connection
// opened without flowlite's pragmas, so looking at a file never changes it
// (journal_mode(WAL) alone would rewrite the header of a rollback-journal
// database).

// schemaInfo describes what a database file holds.
type schemaInfo struct {
	Tables   []string       // its tables, sorted
	Flowlite bool           // it has flowlite's version table (or, before 00010, goose's with flowlite's tables)
	Status   migrate.Status // when Flowlite: the applied and known versions
}

// inspectSchema reads the schema of the database at path without changing
// the file in any way.
func (a *app) inspectSchema(ctx context.Context, path string) (schemaInfo, error) {
	// The DSN OpenReadOnly uses: it never creates -wal or -shm files it
	// cannot remove, and reads a file in a read-only directory.
	dsn, err := sqlitestore.ReadOnlyDSN(path)
	if err != nil {
		return schemaInfo{}, err
	}
	db, err := sql.Open("sqlite", dsnWithBusyTimeout(dsn, a.busyTimeout))
	if err != nil {
		return schemaInfo{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	var info schemaInfo
	tables, err := migrate.Tables(ctx, db)
	if err != nil {
		return info, fmt.Errorf("open %s: %w", path, notDatabase(err))
	}
	info.Tables = tables
	// flowlite is identified by its own version table, whatever other
	// tables share the file: the application's tables may sit beside it.
	isFlowlite, err := migrate.IsFlowlite(ctx, db)
	if err != nil || !isFlowlite {
		return info, err
	}
	// The version table exists, so SQLiteStatus only reads it.
	st, err := migrate.SQLiteStatus(ctx, db)
	if err != nil {
		return info, fmt.Errorf("open %s: %w", path, notDatabase(err))
	}
	info.Status = st
	info.Flowlite = true
	return info, nil
}

// notDatabase maps the driver's errors to the sentinels flow re-exports
// (ErrNotDatabase for a file that is not a database or is corrupt,
// ErrBusy for a lock held past the busy timeout), through the SQLite
// adapter, the one place that reads SQLite's result codes.
func notDatabase(err error) error { return sqlitestore.InterpretError(err) }

// notFlowliteError explains why path is refused.
func notFlowliteError(path string, info schemaInfo) error {
	tables := "none"
	if len(info.Tables) > 0 {
		tables = strings.Join(info.Tables, ", ")
		if len(info.Tables) > 8 {
			tables = strings.Join(info.Tables[:8], ", ") + ", …"
		}
	}
	return fmt.Errorf("open %s: %w: it is a SQLite database without flowlite's schema (tables: %s); flowlite leaves it alone", path, errNotFlowlite, tables)
}

// requireCurrentSchema refuses a file that is not a flowlite database, or
// whose schema is older or newer than this binary's.
func (a *app) requireCurrentSchema(ctx context.Context, path string) error {
	info, err := a.inspectSchema(ctx, path)
	if err != nil {
		return a.dbError(err)
	}
	switch st := info.Status; {
	case !info.Flowlite:
		return notFlowliteError(path, info)
	case st.Current > st.Latest:
		return fmt.Errorf("open %s: %w: database is at version %d, this flowlite knows up to %d; upgrade flowlite",
			path, flow.ErrSchemaTooNew, st.Current, st.Latest)
	case st.Current < st.Latest:
		return fmt.Errorf("open %s: database schema is at version %d, this flowlite needs %d: back the file up, then run 'flowlite migrate up' (the engines using it must be this version or newer)",
			path, st.Current, st.Latest)
	}
	return nil
}

// dsnWithBusyTimeout returns dsn with its busy_timeout pragma, if it has
// one, set to d.
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
