package pgstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"strings"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/migrate"
)

// VersionTable is the table, inside the store's schema, in which goose
// records the migrations applied to it. Keeping it in the schema keeps it
// apart from an application's own goose table, and lets several flowlite
// schemas share one database.
const VersionTable = "goose_db_version"

// migrateSchema creates the schema when it is missing, refuses a schema
// newer than this binary, and applies the pending migrations, through
// internal/migrate with the schema's Dialect.
//
// Several processes may open one schema at once, and most opens find it
// current: that case reads the schema's state, without a lock, and is done.
// Only a schema that is missing, or lacks a migration, takes locks: its
// creation a transaction-level advisory lock (createSchema), its
// migrations the session-level migration lock (migrationLocker), which a
// process waits for with pg_advisory_lock, so that it waits only as long
// as the migration it queues behind runs. (goose's own session locker
// polls pg_try_advisory_lock every 5 seconds, and its GetDBVersion takes
// the lock too: of several processes opening a current schema at once,
// one waited 5 seconds for nothing.)
//
// Each step is sent again on another connection when the session it ran
// on was ended under it (retryDeadSession, and the Dialect's Retry for the
// steps of migrate.Up), as a write's BEGIN is: an
// operator ending flowlite's sessions (pg_terminate_backend), or a server
// restart, while a process opens its store no longer ends that process. A
// migration interrupted so rolls back with its session, which releases the
// lock too, and is applied again by whichever process takes the lock next.
//
// This is the adapter's only SQL outside db/queries: CREATE SCHEMA names an
// identifier, which no bind parameter can stand for, so sqlc cannot
// compile it; goose writes its own statements.
func migrateSchema(ctx context.Context, db *sql.DB, schema string, names *qualifier) error {
	d, err := dialect(db, schema, names)
	if err != nil {
		return err
	}
	if err := retryDeadSession(ctx, db, "create schema "+schema, func() error {
		return createSchema(ctx, db, schema)
	}); err != nil {
		return privilegeHint(err, schema)
	}
	_, err = migrate.Up(ctx, db, d)
	return privilegeHint(err, schema)
}

// insufficientPrivilege is PostgreSQL's SQLSTATE of "permission denied".
const insufficientPrivilege = "42501"

// privilegeHint adds to a permission error of a migration what to do: a
// role that works a schema needs no more than USAGE on it and SELECT,
// INSERT, UPDATE and DELETE on its tables, but creating or migrating it
// takes CREATE on the database, or ownership of the schema.
func privilegeHint(err error, schema string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != insufficientPrivilege {
		return err
	}
	return fmt.Errorf("%w; creating or migrating schema %s takes a role with CREATE on the database (or that owns the schema): "+
		"run `flowlite migrate up --db URL --schema %s` as such a role, and engines as one with the privileges docs/postgresql.md lists", err, schema, schema)
}

// dialect returns the migrate.Dialect of the schema: the migrations
// rewritten into it (migrationsIn), its version table VersionTable inside
// it, its migration lock, and each step sent again on a session the server
// ended under it, with errors in store's terms.
func dialect(db *sql.DB, schema string, names *qualifier) (migrate.Dialect, error) {
	fsys, err := migrationsIn(names)
	if err != nil {
		return migrate.Dialect{}, err
	}
	table := schema + "." + VersionTable
	return migrate.Dialect{
		Goose: goose.DialectPostgres, FS: fsys, Table: table, Name: "schema " + schema,
		// A schema without goose's version table is pending: goose would
		// create the table on its first read, outside the migration lock,
		// where processes creating it at once fail and retry it a second
		// later.
		Find: func(ctx context.Context, db *sql.DB) (string, error) {
			exists, err := pgdb.New(db).TableExists(ctx, pgdb.TableExistsParams{SchemaName: schema, TableName: VersionTable})
			if err != nil {
				return "", fmt.Errorf("read schema version: %w", err)
			}
			if !exists {
				return "", nil
			}
			return table, nil
		},
		Locker: migrationLocker{schema: schema},
		Retry: func(ctx context.Context, step func() error) error {
			for try := 0; ; try++ {
				err := step()
				if err == nil {
					return nil
				}
				if !retryDeadConn(ctx, db, err, try) {
					return interpretError(ctx, err)
				}
			}
		},
	}, nil
}

// migrationLockWait bounds the wait for a schema's migration lock, as
// goose's own locker did (60 tries 5 seconds apart): a process whose
// context has no deadline gives up on a holder that hangs.
const migrationLockWait = 5 * time.Minute

// migrationLocker is goose's session locker of a schema's migrations: the
// advisory lock schemaLockID(schema, "migrate"), waited for with
// pg_advisory_lock (MigrationLock), so that the server grants it the
// moment its holder releases it or its session ends.
type migrationLocker struct{ schema string }

var _ lock.SessionLocker = migrationLocker{}

func (l migrationLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	waitCtx, cancel := context.WithTimeout(ctx, migrationLockWait)
	defer cancel()
	err := pgdb.New(conn).MigrationLock(waitCtx, schemaLockID(l.schema, "migrate"))
	if err != nil && ctx.Err() == nil && waitCtx.Err() != nil {
		// The bound ran out, not the caller's context: say so, rather
		// than give the driver's words for the interrupted statement,
		// which read like a timeout of the connection.
		return fmt.Errorf("wait for the migration lock: another session held it for over %v", migrationLockWait)
	}
	if err != nil {
		return fmt.Errorf("wait for the migration lock: %w", err)
	}
	return nil
}

// SessionUnlock releases the lock. When that fails, the session may still
// hold it: it is then discarded, rather than returned to the pool, where
// it would hold the lock, and keep every later migration of the schema
// waiting, for as long as it lives.
func (l migrationLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	unlocked, err := pgdb.New(conn).MigrationUnlock(ctx, schemaLockID(l.schema, "migrate"))
	if err == nil && unlocked {
		return nil
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	if err != nil {
		return fmt.Errorf("release the migration lock: %w", err)
	}
	return errors.New("release the migration lock: this session did not hold it")
}

// createSchema creates the schema unless it exists. The existence test
// comes first, without a lock, so that opening an existing schema waits
// for no one, and so that a role that owns an existing schema but may not
// create schemas in the database can still open it.
func createSchema(ctx context.Context, db *sql.DB, schema string) error {
	if exists, err := pgdb.New(db).SchemaExists(ctx, schema); err != nil || exists {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	q := pgdb.New(tx)
	// Two processes creating the schema at once would otherwise see one of
	// them fail on pg_namespace's unique index.
	if err := q.SchemaCreateLock(ctx, schemaLockID(schema, "create")); err != nil {
		return err
	}
	exists, err := q.SchemaExists(ctx, schema)
	if err != nil || exists {
		return err
	}
	// schema passed validSchema: a plain identifier, safe unquoted.
	if _, err := tx.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return err
	}
	return tx.Commit()
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
