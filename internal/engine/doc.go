// Package engine executes durable workflow runs over the store seam: it
// claims ready runs per queue, replays each workflow body against the run's
// checkpoints, executes new steps with retries and timeouts, unwinds
// completed steps through their compensations when the workflow fails, keeps
// leases alive by heartbeat, and rescues runs whose worker vanished.
//
// The engine is untyped: workflows and steps reach it as byte-level
// definitions built by package flow, which owns the typed API. It imports
// internal/store, internal/clock, golang.org/x/sync and robfig/cron (the
// schedules' cron expressions), never flow or an
// adapter; the one exception is flow/flowtype, the leaf package that defines
// the types flow shows its users (errors, RetryPolicy, metrics…), which the
// engine uses under their flowtype names, so that each has one name.
//
// It speaks no database dialect: a store's own upkeep (the SQLite adapter's
// WAL watch) is a store.Maintainer that the engine merely starts, handing
// it MaintainHooks, and the file operations (FileHealth, Checkpoint,
// Backup, Check) pass through to store.FileMaintainer.
package engine
