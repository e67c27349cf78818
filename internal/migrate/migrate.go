// Package migrate applies the embedded goose migrations to a database and
// refuses databases whose schema is newer than this binary knows.
// It imports db/migrations, internal/store and goose.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/internal/store"
)

// Status describes the schema of a database.
type Status struct {
	Current int64 // highest version applied to the database
	Latest  int64 // highest version this binary knows
	// Behind counts the migrations above Current: versions may skip
	// numbers, so it is not Latest-Current.
	Behind int
}

// Pending reports whether migrations remain to be applied.
func (s Status) Pending() bool { return s.Current < s.Latest }

// VersionTable is the table in which goose records the migrations applied
// to a database. Like every table of flowlite it carries the prefix
// flowlite_, so that an application sharing the file may use goose (and its
// default table) too.
const VersionTable = "flowlite_goose_db_version"

// legacyVersionTable is goose's default table name, which flowlite used
// before migration 00010 moved its tables into the flowlite_ namespace.
const legacyVersionTable = "goose_db_version"

// legacyTables are tables every database migrated before the prefix holds.
var legacyTables = []string{legacyVersionTable, "runs", "steps", "events", "signals", "workflows"}

// legacyPrefix is the prefix adoptLegacyLayout gives every table and index.
const legacyPrefix = "flowlite_"

// provider returns a goose provider over db keeping its versions in table.
// Never call its Close: it closes db, which belongs to the caller (the
// store keeps using it).
func provider(db *sql.DB, table string) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(),
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(table))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// versionTable returns the table that holds db's flowlite schema version:
// VersionTable, or legacyVersionTable in a database flowlite migrated
// before its tables had the prefix (recognised by flowlite's own tables
// beside it, so another program's goose table is never taken for
// flowlite's), or "" when db holds no flowlite schema.
func versionTable(ctx context.Context, db *sql.DB) (string, error) {
	tables, err := Tables(ctx, db)
	if err != nil {
		return "", err
	}
	has := func(name string) bool { return slices.Contains(tables, name) }
	switch {
	case has(VersionTable):
		return VersionTable, nil
	case !slices.ContainsFunc(legacyTables, func(t string) bool { return !has(t) }):
		// Tables named like flowlite's old ones may be an application's:
		// flowlite's runs table has its lease columns.
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN ('lease_owner', 'fence', 'wake_seq')").Scan(&n)
		if err != nil {
			return "", fmt.Errorf("read schema: %w", err)
		}
		if n == 3 {
			return legacyVersionTable, nil
		}
	}
	return "", nil
}

// adoptLegacyLayout moves a database migrated before the flowlite_ prefix
// into the namespace (see db/migrations/sqlite/00010_namespace.sql): every
// table takes the prefix, every index is created again under the prefixed
// name, and goose's version table becomes VersionTable, all in one
// transaction, so a failure leaves the old layout whole. The objects to
// rename are read from sqlite_master: a database behind 00009 has fewer of
// them, and the migrations after its version then create theirs prefixed.
func adoptLegacyLayout(ctx context.Context, db *sql.DB) error {
	tables, err := Tables(ctx, db)
	if err != nil {
		return err
	}
	type index struct{ name, table, sql string }
	var indexes []index
	rows, err := db.QueryContext(ctx, "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
	if err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.table, &ix.sql); err != nil {
			rows.Close()
			return fmt.Errorf("read schema: %w", err)
		}
		indexes = append(indexes, ix)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	// flowlite's tables before the prefix: only these are renamed, never
	// an application's table that shares the file.
	known := []string{"runs", "steps", "events", "signals", "workflows", "schedules",
		"unique_holds", "queues", "engine_reports", "checkpoints"}
	var stmts []string
	for _, ix := range indexes {
		if !slices.Contains(known, ix.table) {
			continue
		}
		stmts = append(stmts, "DROP INDEX "+quote(ix.name))
	}
	for _, t := range tables {
		if slices.Contains(known, t) {
			stmts = append(stmts, "ALTER TABLE "+quote(t)+" RENAME TO "+quote(legacyPrefix+t))
		}
	}
	for _, ix := range indexes {
		if !slices.Contains(known, ix.table) {
			continue
		}
		def, ok := renamedIndex(ix.sql, ix.name, ix.table)
		if !ok {
			return fmt.Errorf("move index %s into the flowlite_ namespace: unexpected definition %q", ix.name, ix.sql)
		}
		stmts = append(stmts, def)
	}
	stmts = append(stmts, "ALTER TABLE "+legacyVersionTable+" RENAME TO "+VersionTable)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("move tables into the flowlite_ namespace: %w", err)
	}
	defer tx.Rollback()
	for _, st := range stmts {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("move tables into the flowlite_ namespace: %s: %w", st, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("move tables into the flowlite_ namespace: %w", err)
	}
	return nil
}

// renamedIndex rewrites "CREATE [UNIQUE] INDEX name ON table (...)" with
// the prefixed names; the rest of the definition (columns, WHERE) is kept.
func renamedIndex(def, name, table string) (string, bool) {
	for _, head := range []string{"CREATE INDEX ", "CREATE UNIQUE INDEX "} {
		prefix := head + name + " ON " + table + " "
		if rest, ok := strings.CutPrefix(def, prefix); ok {
			return head + legacyPrefix + name + " ON " + legacyPrefix + table + " " + rest, true
		}
	}
	return "", false
}

// quote quotes an SQL identifier.
func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// Tables returns the names of the tables in db, sorted. sqlc does not
// compile reads of sqlite_master: this, the other schema reads and the move
// of an old database into the namespace are the package's only SQL.
func Tables(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("read schema: %w", err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	return names, nil
}

// IsFlowlite reports whether db holds a flowlite schema, in the current
// layout or the one before the flowlite_ prefix. Other tables do not
// matter: flowlite shares a file with the application's tables.
func IsFlowlite(ctx context.Context, db *sql.DB) (bool, error) {
	t, err := versionTable(ctx, db)
	return t != "", err
}

// SQLiteStatus returns the schema status of a SQLite database. It creates
// goose's version table when the database holds no flowlite schema.
func SQLiteStatus(ctx context.Context, db *sql.DB) (Status, error) {
	t, err := versionTable(ctx, db)
	if err != nil {
		return Status{}, err
	}
	if t == "" {
		t = VersionTable
	}
	p, err := provider(db, t)
	if err != nil {
		return Status{}, err
	}
	return status(ctx, p)
}

func status(ctx context.Context, p *goose.Provider) (Status, error) {
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("read schema version: %w", err)
	}
	var latest int64
	var behind int
	for _, s := range p.ListSources() {
		latest = max(latest, s.Version)
		if s.Version > current {
			behind++
		}
	}
	st := Status{Current: current, Latest: latest, Behind: behind}
	if current > latest {
		return st, nil // too new: SQLite refuses it, status reports it
	}
	// The highest version alone would hide a lower migration the database
	// lacks; goose compares the whole list and refuses such a gap.
	if _, err := p.HasPending(ctx); err != nil {
		return st, fmt.Errorf("database at version %d lacks a lower migration; restore a backup or re-create the database: %w", current, err)
	}
	return st, nil
}

// SQLiteStatusReadOnly returns the schema status of a SQLite database
// without writing to it: a database without flowlite's version table is
// reported with store.ErrNotDatabase instead of getting the table created.
func SQLiteStatusReadOnly(ctx context.Context, db *sql.DB) (Status, error) {
	t, err := versionTable(ctx, db)
	if err != nil {
		return Status{}, err
	}
	if t == "" {
		return Status{}, fmt.Errorf("%w: it holds no flowlite schema (no %s table)", store.ErrNotDatabase, VersionTable)
	}
	p, err := provider(db, t)
	if err != nil {
		return Status{}, err
	}
	return status(ctx, p)
}

// SQLite migrates a SQLite database to the latest schema. A database whose
// schema is newer than this binary is refused with store.ErrSchemaTooNew and
// left untouched.
func SQLite(ctx context.Context, db *sql.DB) (Status, error) {
	st, err := SQLiteStatus(ctx, db)
	if err != nil {
		return Status{}, err
	}
	if st.Current > st.Latest {
		return st, fmt.Errorf("%w: database is at version %d, this binary knows up to %d; upgrade flowlite",
			store.ErrSchemaTooNew, st.Current, st.Latest)
	}
	if !st.Pending() {
		return st, nil
	}
	t, err := versionTable(ctx, db)
	if err != nil {
		return st, err
	}
	if t == legacyVersionTable {
		if err := adoptLegacyLayout(ctx, db); err != nil {
			return st, err
		}
	}
	p, err := provider(db, VersionTable)
	if err != nil {
		return st, err
	}
	if _, err := p.Up(ctx); err != nil {
		return st, fmt.Errorf("apply migrations: %w", err)
	}
	st.Current = st.Latest
	return st, nil
}
