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
