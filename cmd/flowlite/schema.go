package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// The schema checks below read the file through the SQLite adapter
// (sqlitestore.Inspect), on a read-only connection opened without
// flowlite's pragmas, so looking at a file never changes it. The adapter
// maps SQLite's errors to the sentinels flow re-exports.

// schemaInfo describes what a database file holds.
type schemaInfo = sqlitestore.Schema

// inspectSchema reads the schema of the database at path without changing
// the file in any way.
func (a *app) inspectSchema(ctx context.Context, path string) (schemaInfo, error) {
	return sqlitestore.Inspect(ctx, path, a.busyTimeout)
}

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
