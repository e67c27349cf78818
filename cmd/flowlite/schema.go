package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/migrate"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// The schema checks below read sqlite_master, which sqlc does not compile:
// this query is the CLI's only SQL text. It runs on a read-only connection
// opened without flowlite's pragmas, so looking at a file never changes it
// (journal_mode(WAL) alone would rewrite the header of a rollback-journal
// database).

// gooseTable is the version table goose keeps (its default name, which
// internal/migrate uses).
const gooseTable = "goose_db_version"

// schemaInfo describes what a database file holds.
type schemaInfo struct {
	Tables   []string       // its tables, sorted
	Flowlite bool           // it has flowlite's version table (and its runs once migrated)
	Status   migrate.Status // when Flowlite: the applied and known versions
}

// inspectSchema reads the schema of the database at path without changing
// the file in any way.
func (a *app) inspectSchema(ctx context.Context, path string) (schemaInfo, error) {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", a.busyTimeout.Milliseconds()))
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return schemaInfo{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	var info schemaInfo
	rows, err := db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		return info, fmt.Errorf("open %s: %w", path, notDatabase(err))
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return info, fmt.Errorf("open %s: %w", path, notDatabase(err))
		}
		info.Tables = append(info.Tables, name)
	}
	if err := rows.Err(); err != nil {
		return info, fmt.Errorf("open %s: %w", path, notDatabase(err))
	}
	rows.Close()
	if !slices.Contains(info.Tables, gooseTable) {
		return info, nil
	}
	// The version table exists, so SQLiteStatus only reads it.
	st, err := migrate.SQLiteStatus(ctx, db)
	if err != nil {
		return info, fmt.Errorf("open %s: %w", path, notDatabase(err))
	}
	info.Status = st
	// Another program's goose table would not come with flowlite's runs.
	info.Flowlite = st.Current == 0 || slices.Contains(info.Tables, "runs")
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
