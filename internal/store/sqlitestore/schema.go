package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/internal/migrate"
)

// SQLite's schema: the migrate.Dialect of SQLite, with the layout before
// flowlite's tables had their prefix, and Inspect and Migrate, which look
// at and migrate a file for tools (the CLI) without opening a store.

// Dialect returns SQLite's migrate.Dialect: the migrations in
// db/migrations/sqlite, in VersionTable, with a database of the layout
// before the flowlite_ prefix recognised and moved into it.
func Dialect() migrate.Dialect {
	return migrate.Dialect{
		Goose: goose.DialectSQLite3, FS: migrations.SQLite(), Table: VersionTable,
		Find: findVersionTable, Adopt: adoptLegacyLayout,
	}
}

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

// findVersionTable returns the table that holds db's flowlite schema version:
// VersionTable, or legacyVersionTable in a database flowlite migrated
// before its tables had the prefix (recognised by flowlite's own tables
// beside it, so another program's goose table is never taken for
// flowlite's), or "" when db holds no flowlite schema.
func findVersionTable(ctx context.Context, db *sql.DB) (string, error) {
	names, err := tables(ctx, db)
	if err != nil {
		return "", err
	}
	has := func(name string) bool { return slices.Contains(names, name) }
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
	names, err := tables(ctx, db)
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
	for _, t := range names {
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

// tables returns the names of the tables in db, sorted. sqlc does not
// compile reads of sqlite_master: this, the other schema reads and the move
// of an old database into the namespace are SQL text for that reason.
func tables(ctx context.Context, db *sql.DB) ([]string, error) {
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

// Schema describes what a database file holds.
type Schema struct {
	Tables   []string // its tables, sorted
	Flowlite bool     // it holds a flowlite schema (the layout before the flowlite_ prefix included)
	// Status is, when Flowlite, the applied and known versions.
	Status migrate.Status
}

// Inspect reads the schema of the database file at path without changing
// the file in any way: it reads through a read-only connection opened
// without flowlite's pragmas (journal_mode(WAL) alone would rewrite the
// header of a rollback-journal database), with the DSN OpenReadOnly uses,
// which never creates -wal or -shm files it cannot remove and reads a file
// in a read-only directory. busy bounds the wait for a lock (zero: the
// default). Errors match store's sentinels (ErrNotDatabase, ErrBusy…).
func Inspect(ctx context.Context, path string, busy time.Duration) (Schema, error) {
	dsn, err := readOnlyDSNBusy(path, busy)
	if err != nil {
		return Schema{}, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return Schema{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	var info Schema
	names, err := tables(ctx, db)
	if err != nil {
		return info, fmt.Errorf("open %s: %w", path, interpretError(err))
	}
	info.Tables = names
	// flowlite is identified by its own version table, whatever other
	// tables share the file: the application's tables may sit beside it.
	t, err := findVersionTable(ctx, db)
	if err != nil || t == "" {
		return info, interpretError(err)
	}
	st, err := migrate.StatusOf(ctx, db, Dialect())
	if err != nil {
		return info, fmt.Errorf("open %s: %w", path, interpretError(err))
	}
	info.Status = st
	info.Flowlite = true
	return info, nil
}

// Migrate migrates the schema of the database file at path, which must
// exist, through one connection with flowlite's settings and busy as its
// busy timeout, and returns the schema's status after. Errors match
// store's sentinels (ErrSchemaTooNew, ErrBusy…).
func Migrate(ctx context.Context, path string, busy time.Duration) (migrate.Status, error) {
	db, err := sql.Open("sqlite", DSNBusy(path, SynchronousFull, busy))
	if err != nil {
		return migrate.Status{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	st, err := migrate.Up(ctx, db, Dialect())
	if err != nil {
		return st, fmt.Errorf("migrate %s: %w", path, interpretError(err))
	}
	return st, nil
}
