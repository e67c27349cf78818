// Package flowpg runs flowlite on PostgreSQL: it is the PostgreSQL backend
// of package flow, for when one machine is not enough and several engines,
// on several machines, work the same runs. The workflows, steps and queues
// a program declares do not change; only how it opens the engine does:
//
//	e, err := flowpg.Open(ctx, "postgres://app@db:5432/app", &flow.Config{…}, nil)
//
// Open connects with a pool of its own and creates and migrates
// flowlite's tables in their own schema (Options.Schema, default
// "flowlite"), so they can share a database with the application's
// tables: a RunTx step's writes and its checkpoint then commit in one
// transaction. Every transaction of the engine, a RunTx step's SQL
// included, runs at READ COMMITTED, whatever the server's, database's or
// role's default isolation: the engine's locking is designed for it. New takes a *sql.DB the caller opened with pgx's
// database/sql driver (pgx/v5/stdlib), for a program that shares its pool.
//
// Engines in any number of processes may share one schema. Claims take
// their runs FOR UPDATE SKIP LOCKED, and what SQLite's single writer
// guarantees (lease checks, unique keys, cron slots) rests on row locks,
// constraints and advisory locks (see internal/store/pgstore).
//
// # Opening one schema from many processes
//
// The workers of a deployment often start together, each opening the
// schema. Open and New read the schema's version without taking any lock,
// so a schema that is current opens at once, however many processes open
// it. Only a schema that is missing or lacks migrations takes a lock: one
// process applies the migrations under the schema's migration lock (a
// session-level advisory lock), and the others wait for that lock with
// pg_advisory_lock, which the server grants as soon as it is released: they
// wait as long as the migration runs, up to the context's deadline and at
// most 5 minutes, then find nothing left to apply.
//
// A session the server ends while Open runs (a restart, an operator's
// pg_terminate_backend) is replaced and the step sent again, as the
// engine's writes are, rather than failing the open: a migration it
// interrupted rolls back with its session, which also releases the lock,
// and is applied again by whichever process takes the lock next.
//
// Inspect reads a schema's state (missing, not flowlite's, its version)
// without creating, migrating or locking anything, for operator tools (the
// flowlite CLI) that must not do what Open does to a missing or older
// schema.
//
// # What is not here
//
// The file operations of flow.Engine, FileHealth, Checkpoint, Backup and
// Check, are SQLite's (WAL checkpoints, VACUUM INTO, integrity_check):
// on PostgreSQL they return flow.ErrNotSupported, and the server's own
// tools (pg_dump, its checkpointer, amcheck) do that work. There is no
// read-only open either: a reader is an engine that is not started.
//
// It imports flow, internal/store with its PostgreSQL adapter
// internal/store/pgstore, and pgx v5 (github.com/jackc/pgx/v5, with its
// database/sql driver). It and that adapter are the only packages of
// flowlite that may import pgx (internal/archtest checks it), so a program
// that imports flowsqlite alone links no PostgreSQL driver.
package flowpg
