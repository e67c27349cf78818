// Package flow is the public API of flowlite, a durable workflow and job
// engine that lives in one SQLite file, or in a PostgreSQL database shared
// by many machines.
//
// # Steps and workflows
//
// A Step is a typed function with a stable name, an optional Compensate hook
// that undoes it, a retry policy and a per-attempt timeout. A Workflow is
// plain Go that calls steps through Do:
//
//	var reserve = flow.Step[Order, Reservation]{
//		Name:       "reserve_inventory",
//		Run:        func(ctx context.Context, o Order) (Reservation, error) { … },
//		Compensate: func(ctx context.Context, o Order, r Reservation) error { … },
//	}
//
//	var placeOrder = flow.Workflow[Order, Receipt]{
//		Name: "place_order",
//		Run: func(wc flow.Context, o Order) (Receipt, error) {
//			r, err := flow.Do(wc, reserve, o)
//			…
//		},
//	}
//
// # Durability
//
// Every step's output is checkpointed in the same transaction that advances
// the run. When a run resumes (after a crash, a restart, or on another
// worker), its workflow body runs again from the top and Do returns the
// recorded output of each step that already completed, keyed by step name
// and occurrence, so only new steps execute. The body must therefore be
// deterministic: time, randomness and I/O belong in steps (see Now).
//
// Replays are checked: the n-th call of the body (or of a branch of All or
// First), be it a step, a wait, a child or a race, must be the call the
// history recorded n-th, and a body that returns must have made every
// recorded call. Code that diverges (a deploy that reorders, renames, adds
// or removes calls without a new Version) does not run on: the run is
// suspended with a *NonDeterminismError naming both calls, until matching
// code is deployed and the run resumed, or it is cancelled. Patched
// branches one body between runs recorded before a change and the others,
// without a new Version. A run's history is bounded (Config.MaxHistoryCalls,
// Config.MaxHistoryBytes): every resume replays all of it.
//
// A step body runs at least once: it runs again if its worker dies after the
// body started and before its checkpoint committed. Give side effects an
// idempotency key (the run ID plus the step name is a good one). Steps with
// RunTx receive the engine's transaction, so their database writes commit
// together with their checkpoint: exactly once for local effects. Either
// body is called at most once per attempt, so the attempts a run's record
// counts say how often a body ran (see Step.RunTx).
//
// # Failure and compensation
//
// A failed step is retried per its RetryPolicy; Permanent stops retrying,
// and an attempt interrupted by a crash or a lost lease counts. When its
// attempts are exhausted, Do returns a *StepError that the workflow may
// handle. Its Err is the error as the history records it, on the first
// execution as on replays: an *Error with the message and, when the step's
// error carried one, the Code and Details of its *Error (match it with
// errors.Is against an *Error of the same Code), wrapped in a
// *PermanentError when it was permanent. When the workflow returns an error, the engine runs the
// Compensate hooks of its completed steps in reverse completion order, each
// as a durable, retried unit. If all succeed the run ends FAILED and Result
// returns a *RolledBackError; if one exhausts its retries the run is
// SUSPENDED for an operator, who can Resume, Skip or Cancel it.
//
// # Engine
//
// An Engine runs on a backend, chosen by the package a program imports:
// flow/flowsqlite for a SQLite file, flow/flowpg for PostgreSQL. flowsqlite.Open opens an engine on a
// file with every default, flowsqlite.New on a *sql.DB the caller opened
// with flowsqlite.DSN; flowpg.Open connects to a PostgreSQL database and
// flowpg.New takes the caller's pool; each calls New with its Backend. flow itself
// imports no backend and no database driver, and Config holds only what
// every backend shares; what only SQLite has (synchronous, busy timeout,
// WAL bounds) is flowsqlite.Options, and what only PostgreSQL has (its
// schema, pool size) is flowpg.Options. Register workflows, Start the engine,
// then start runs with Start (or StartTx inside your own transaction) and
// wait with Run.Result. Stop drains gracefully.
//
//	eng, err := flowsqlite.Open(ctx, "app.db", &flow.Config{…}, nil)
//
// # Shards
//
// A SQLite file has one writer, so an engine on one file commits with
// about one core. NewSharded (flowsqlite.OpenShards) runs one engine over
// several files, each with its own writer, and routes every call: a run
// lives in the shard PlaceRun names (by its unique key, else its ID up to
// the first '/', so children stay with their parent), calls by run ID find
// it in any shard, and lists merge every shard. What belongs to one file
// (the change feed, Backup, transactions of the caller) is on Shard(i).
// See shard.go and docs/shards.md.
//
// # Bad input
//
// What comes from outside is checked before anything is recorded, so that
// a bad value gets a clear error instead of a run that cannot go on. Names
// of workflows, jobs, steps, queues, signals and schedules follow the rules
// of MaxNameBytes (a *NameError quotes the name and the rule it breaks);
// run IDs, unique keys, concurrency keys and debounce keys follow them too,
// with a longer limit (MaxKeyBytes).
// Stored values are bounded by Config.MaxPayloadBytes (ErrPayloadTooLarge
// names the value, its size and the limit), because SQLite's single writer
// stalls every run while it writes a huge one. A signal whose payload does
// not decode into the type Receive expects is rejected and recorded
// (EventSignalRejected) while the run keeps waiting: the sender cannot know
// that type, and a payload recorded as received would fail every replay.
// Fields of a payload that the type lacks are ignored, so that a sender may
// add one first (TypedSignal.Strict refuses them); NewSignal declares a
// signal's name and type once, for the workflow and its senders.
//
// # Types
//
// The plain types of the API (the error types, RetryPolicy, RunStatus,
// AttemptInfo, Retention, EngineMetrics, FileHealth…) are defined in
// package flowtype and re-exported here under the same names, so code
// writes flow.RetryPolicy. go doc shows an alias without its fields: read
// them with go doc github.com/flowlite/flowlite/flow/flowtype.
//
// # Guides
//
// The repository's docs/ directory has a guide per subject: workflows.md
// (steps, bodies, waits, start options), jobs.md, testing.md, upgrading.md,
// workflows-as-data.md, operations.md, backups.md, shards.md, postgresql.md,
// architecture.md and performance.md.
//
// It imports flow/flowtype, flow/flowhistory (the exported history format),
// flowlite's internal packages (engine, store, codec, feed, timetravel) and
// golang.org/x/sync/errgroup, never a store adapter or a database driver
// (internal/archtest checks it).
package flow
