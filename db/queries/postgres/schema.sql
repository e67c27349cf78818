-- name: SchemaExists :one
-- SchemaExists reports whether the schema @schema_name exists. It and the
-- statements below are Open's, around goose's migrations (pgstore/migrate.go):
-- the tests that let a current schema open without taking a lock, and the
-- locks that a schema's creation and its migrations take.
SELECT EXISTS (
  SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = sqlc.arg(schema_name)::text
) AS present;

-- name: TableExists :one
-- TableExists reports whether the table @table_name exists in the schema
-- @schema_name: goose's version table is missing until a first migration
-- creates it.
SELECT EXISTS (
  SELECT 1 FROM pg_catalog.pg_tables
  WHERE schemaname = sqlc.arg(schema_name)::text AND tablename = sqlc.arg(table_name)::text
) AS present;

-- name: SchemaCreateLock :exec
-- SchemaCreateLock serializes the transactions that create a schema, until
-- they commit, so that two processes creating one at once do not meet on
-- pg_namespace's unique index. @lock_key is computed by the adapter from
-- the schema's name.
SELECT pg_advisory_xact_lock(sqlc.arg(lock_key)::bigint);

-- name: MigrationLock :exec
-- MigrationLock waits for the session-level lock of a schema's migrations
-- (@lock_key, computed by the adapter), which the server grants as soon as
-- its holder releases it or its session ends; the caller's context bounds
-- the wait.
SELECT pg_advisory_lock(sqlc.arg(lock_key)::bigint);

-- name: MigrationUnlock :one
-- MigrationUnlock releases the lock MigrationLock took: false when this
-- session did not hold it.
SELECT pg_advisory_unlock(sqlc.arg(lock_key)::bigint) AS unlocked;
