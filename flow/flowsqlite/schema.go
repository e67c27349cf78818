package flowsqlite

import (
	"context"

	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// SchemaInfo describes what a SQLite file holds, as Inspect reads it.
type SchemaInfo struct {
	Tables   []string // its tables, sorted (Migrate leaves it empty)
	Flowlite bool     // it holds a flowlite schema, of this layout or an older one
	Current  int64    // when Flowlite, the highest version applied
	Latest   int64    // the highest version this flowlite knows
	// Behind counts the migrations above Current: versions may skip
	// numbers, so it is not Latest-Current.
	Behind int
}

// Pending reports whether migrations remain to be applied.
func (s SchemaInfo) Pending() bool { return s.Current < s.Latest }

// Inspect reads the schema of the SQLite file at path without changing the
// file in any way, where Open would migrate it and write flowlite's schema
// into any SQLite database: what an operator's tool needs to refuse a file
// that is not flowlite's or is at another version, before it opens an
// engine. It reads through a read-only connection without flowlite's
// pragmas, creates no -wal or -shm file, and works in a read-only
// directory. Of opts, only BusyTimeout applies. Errors match flow's
// sentinels (flow.ErrNotDatabase, flow.ErrBusy…).
func Inspect(ctx context.Context, path string, opts *Options) (SchemaInfo, error) {
	s, err := sqlitestore.Inspect(ctx, path, opts.storeOptions().BusyTimeout)
	return SchemaInfo{Tables: s.Tables, Flowlite: s.Flowlite,
		Current: s.Status.Current, Latest: s.Status.Latest, Behind: s.Status.Behind}, err
}

// Migrate applies the pending migrations to the SQLite file at path, which
// must exist, without opening an engine, and returns the schema after. A
// file migrated by a newer flowlite is refused with flow.ErrSchemaTooNew
// and left untouched. Of opts, only BusyTimeout applies. Check the file
// with Inspect first: like Open, Migrate writes flowlite's schema into a
// SQLite database that holds none.
func Migrate(ctx context.Context, path string, opts *Options) (SchemaInfo, error) {
	st, err := sqlitestore.Migrate(ctx, path, opts.storeOptions().BusyTimeout)
	return SchemaInfo{Flowlite: err == nil, Current: st.Current, Latest: st.Latest, Behind: st.Behind}, err
}
