// Package flowsqlite runs flowlite on a SQLite file: it is the SQLite
// backend of package flow, and holds everything SQLite-specific a program
// touches. The backend is chosen by the package a program imports, so a
// program that imports only flow and flowsqlite links no PostgreSQL
// driver:
//
//	e, err := flowsqlite.Open(ctx, "app.db", &flow.Config{…}, nil)
//
// Open opens (or creates) the file with WAL and synchronous=FULL and
// migrates its schema; OpenReadOnly reads a file without ever writing it;
// New takes a *sql.DB the caller opened with DSN. OpenShards (and
// NewShards, OpenShardsReadOnly) opens one engine over several files, a
// shard set, to commit with more than one core (see flow.NewSharded). Options holds what only
// SQLite has: the durability setting (Synchronous), the busy timeout of
// its single write lock, the quick check on open, and the bounds of the
// write-ahead log, which the engine keeps checkpointed while it runs.
//
// Inspect and Migrate look at and migrate a file's schema without opening
// an engine, for operator tools (the flowlite CLI) that must neither write
// flowlite's schema into another program's database nor upgrade a file
// its engines are not ready for.
//
// # What stays on flow.Engine
//
// The file operations, Engine.FileHealth, Engine.Backup (SQLite's VACUUM
// INTO), Engine.Check (integrity_check) and Engine.Checkpoint, stay methods
// of flow.Engine that return flow.ErrNotSupported on a backend without a
// file. Operator tools (the flowlite CLI, its dashboard) then work through
// flow.Engine alone, and Checkpoint records the checkpoint under the
// engine's worker ID and clock, which only the engine knows. What is
// SQLite's own vocabulary lives here: the checkpoint modes
// (CheckpointPassive …), which are SQLite's wal_checkpoint modes, and the
// durability settings.
//
// Replication (Options.Replication) takes a Replicator, which
// flow/flowlitestream provides with Litestream: this package links no
// replicator, so that a program that does not replicate links no
// Litestream (internal/archtest checks it). Checkpoints are handed over
// here: while a replicator, or a Litestream process beside the engines
// (Options.Checkpoints), checkpoints the file, the engine does not.
//
// It imports flow, flow/flowtype and internal/store with its SQLite
// adapter internal/store/sqlitestore, which brings in modernc.org/sqlite
// (no cgo). It and that adapter are the only packages of flowlite that may
// import a SQLite driver (internal/archtest checks it).
package flowsqlite
