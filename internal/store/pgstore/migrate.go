package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"
	"testing/fstest"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/internal/store"
)

// VersionTable is the table, inside the store's schema, in which goose
// records the migrations applied to it. Keeping it in the schema keeps it
// apart from an application's own goose table, and lets several flowlite
// schemas share one database.
const VersionTable = "goose_db_version"

// migrate creates the schema when it is missing, refuses a schema newer
// than this binary, and applies the pending migrations. Several processes
// may open the same schema at once: the schema's creation and the
// migrations each run under an advisory lock of the schema.
//
// This is the adapter's only SQL outside db/queries: CREATE SCHEMA names an
// identifier, which no bind parameter can stand for, so sqlc cannot
// compile it; goose writes its own statements.
func migrate(ctx context.Context, db *sql.DB, schema string, names *qualifier) error {
	if err := createSchema(ctx, db, schema); err != nil {
		return err
	}
	fsys, err := migrationsIn(names)
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(schemaLockID(schema, "migrate")))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Never call the provider's Close: it closes db, which the store keeps.
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(schema+"."+VersionTable),
		goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", interpretError(ctx, err))
	}
	var latest int64
	for _, src := range p.ListSources() {
		latest = max(latest, src.Version)
	}
	if current > latest {
		return fmt.Errorf("%w: schema %s is at version %d, this binary knows up to %d; upgrade flowlite",
			store.ErrSchemaTooNew, schema, current, latest)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations to schema %s: %w", schema, interpretError(ctx, err))
	}
	return nil
}

// createSchema creates the schema unless it exists. The existence test
// comes first so that a role that owns an existing schema but may not
// create schemas in the database can still open it.
func createSchema(ctx context.Context, db *sql.DB, schema string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema %s: %w", schema, interpretError(ctx, err))
	}
	defer tx.Rollback()
	// Two processes creating the schema at once would otherwise see one of
	// them fail on pg_namespace's unique index.
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLockID(schema, "create")); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, interpretError(ctx, err))
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, interpretError(ctx, err))
	}
	if exists {
		return nil
	}
	// schema passed validSchema: a plain identifier, safe unquoted.
	if _, err := tx.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, interpretError(ctx, err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, interpretError(ctx, err))
	}
	return nil
}

// createSchemaStmt is the line of the first migration that creates the
// schema for sqlc's sake; createSchema has done it already.
const createSchemaStmt = "CREATE SCHEMA IF NOT EXISTS " + DefaultSchema + ";"

// migrationsIn returns the embedded migrations as goose should run them
// on the store's schema: without the statement that creates the schema
// (see createSchemaStmt) and with the schema's name rewritten into the
// store's. (testing/fstest's MapFS is the standard library's in-memory
// fs.FS; it pulls in no test machinery.)
func migrationsIn(names *qualifier) (fs.FS, error) {
	src := migrations.Postgres()
	files, err := fs.Glob(src, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	out := make(fstest.MapFS, len(files))
	for _, name := range files {
		b, err := fs.ReadFile(src, name)
		if err != nil {
			return nil, fmt.Errorf("load migrations: %w", err)
		}
		lines := strings.Split(string(b), "\n")
		for i, line := range lines {
			if strings.TrimSpace(line) == createSchemaStmt {
				lines[i] = "-- " + line + " (done by pgstore before goose runs)"
			}
		}
		out[name] = &fstest.MapFile{Data: []byte(names.rewrite(strings.Join(lines, "\n"))), Mode: 0o444}
	}
	return out, nil
}

// schemaLockID returns the advisory lock of one purpose in one schema: a
// 64-bit FNV-1a hash, so that it cannot meet the locks of another schema
// or purpose, nor goose's default lock ID, except by a hash collision,
// which only makes two lockers wait for each other.
func schemaLockID(schema, purpose string) int64 {
	h := fnv.New64a()
	h.Write([]byte("flowlite\x00" + purpose + "\x00" + schema))
	return int64(h.Sum64())
}

// uniqueKeyLockID returns the advisory lock of a unique key of a workflow
// in a schema (see UniqueKeyLock in db/queries/postgres/runs.sql).
func uniqueKeyLockID(schema, workflow, key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("flowlite\x00unique\x00" + schema + "\x00" + workflow + "\x00" + key))
	return int64(h.Sum64())
}
