// Package store is the storage seam of flowlite: the interfaces a database
// adapter implements, the record types they exchange, and the sentinel errors
// they return. The engine depends on this package only, never on an adapter,
// so an adapter (sqlitestore, pgstore) can be swapped, and a
// group-commit writer can be put behind Write, without the engine changing.
//
// It imports the standard library and flow/flowtype only: the record types
// flow shows its users (RunStatus, CatchUp, checkpoint modes…) and the
// sentinel errors are defined there, in a leaf package go doc can show, and
// used here under their flowtype names.
//
// # Layout
//
// The seam is cut by entity, and every entity has four files with the same
// name: its queries (db/queries/<dialect>/runs.sql), its interfaces and
// records here (run.go: RunReader, RunTx), each adapter's methods
// (sqlitestore/runs.go) and its conformance tests (storetest/runs.go). The
// entities are runs, steps, signals, events, workflows, schedules, queues,
// reports, maintenance, operator actions, workflow definitions, the change
// feed, queue limits, debounce keys, shard sets, run options and copies
// between stores (storecopy). store.go only assembles them:
// Reader embeds every XReader, Tx every XTx.
//
// # The contract
//
// The engine relies on the guarantees below, not on how SQLite provides
// them. SQLite gets most of them from its single writer (every write
// transaction is BEGIN IMMEDIATE, so it holds the database's write lock
// from its first statement); a database without a global write lock, such
// as PostgreSQL under READ COMMITTED, must provide each one itself.
//
// Write. Store.Write runs fn as one atomic unit of work: all of fn's writes
// commit or none do, and Write returns nil only after they are durable. An
// error or a panic of fn rolls back fn's writes and nothing else: one
// caller's failure never spoils another caller's work, even when an adapter
// commits many callers in one database transaction (the SQLite adapter's
// group commit runs each caller inside its own SAVEPOINT). Reads inside fn
// see fn's own writes. ctx is honoured until fn starts; after that Write
// waits for the outcome. Write calls fn once, with one exception: an
// adapter that commits many callers in one transaction may call fn again
// when that transaction was lost as a whole through another caller (an
// interrupted statement, a full disk), fn's writes rolled back with it, so
// that one caller's fault fails no other. The engine's own functions
// tolerate it; a unit of work that runs code with effects outside the
// transaction (a RunTx step's body) is marked OnlyOnce, and its fn is
// never called twice: the SQLite adapter runs at most one such caller per
// transaction, last, so that only a loss during its own fn can lose its
// work, and then returns the error. An adapter whose database aborts a
// transaction (a serialization failure, a deadlock) returns that error
// instead of calling fn again. (pgstore calls every fn once, each in its
// own READ COMMITTED transaction, where no serialization failure arises.)
//
// Read. Store.Read runs fn's reads on one snapshot: a view made of several
// reads (a run, its steps, its history) is of one instant. The reads of
// Reader outside it each see their own; a user-facing view that joins
// several of them (flow's Inspect, History, InspectAt) reads through Read.
//
// Fencing. A claim (RunTx.RunClaim) gives a run a lease: an owner and a
// fence token that grows with every claim. Every write that takes a Lease is
// conditioned on the run's row still holding that (owner, fence) and returns
// ErrLeaseLost, changing nothing, when it does not; the engine then rolls
// the whole unit of work back. RunFinishMany fences each of its runs on its
// own row instead and reports the lost ones by index, so that one lost lease
// does not roll back the other runs of a batch; the engine rolls back only
// when it fails otherwise. EventAppendLeased is fenced the same way, per
// event, reporting a lost lease (or a run that is gone) as false rather
// than ErrLeaseLost, and takes no lock on the run's row: it is for events
// that stay true of the attempt that wrote them (step progress), which the
// engine batches across runs. Guarded state changes that take no lease
// (RunSetStatus, ScheduleAdvance, StepComplete…) are compare-and-sets in one
// statement and return flowtype.ErrConflict, or report false, when the row
// is not in the expected state.
//
// Reads that must lock. Some reads inside a Tx decide a write that commits
// later in the same transaction. Under a global write lock their answer
// cannot change before the commit; elsewhere the adapter must make it so:
//
//   - RunTx.RunLeaseCheck proves the lease "until the transaction commits":
//     it must hold the run's row, so a rescuer or another claim cannot
//     take the lease between the check and the commit. pgstore locks it
//     FOR NO KEY UPDATE: FOR SHARE would deadlock two writes of one run
//     that both checked the lease and then update the row, and FOR UPDATE
//     would also block other transactions' inserts of the run's steps and
//     events (their foreign key checks).
//   - RunTx.RunGetForUpdate holds the run it reads in the same way, for
//     Cancel, which decides from it between cancelling a run no worker
//     executes and asking the worker that does: pgstore locks it FOR NO
//     KEY UPDATE, which a claim's FOR UPDATE SKIP LOCKED skips, so a claim
//     cannot commit between the read and the guarded update it decided.
//   - RunTx.RunClaim must never hand one run to two workers, and should not
//     make concurrent claimers wait on each other: on PostgreSQL, select
//     the candidates with FOR UPDATE SKIP LOCKED and update only those.
//     A Claimer's ClaimAndBegin, a claim in one statement that commits on
//     its own, owes the same, and records what the engine would record
//     around RunClaim in Write (see Claimer).
//     RunRescue reads the expired leases and then clears them; its update
//     repeats the expiry test, so a lease renewed in between stays, and on
//     PostgreSQL its read can skip locked rows the same way.
//   - Unique keys (RunInsert and RunInsertMany with a UniqueKey,
//     UniqueHoldTake, RunRequeue)
//     must stay unique under concurrent inserts: the key held for good is
//     a unique index (runs_unique in both dialects' migrations); the test
//     against current holds needs a constraint, a row lock on the hold or
//     an advisory lock on (workflow, key). pgstore takes a transaction
//     advisory lock of the key before that test (RunInsertMany: of every
//     key of the batch, in lock-ID order, so that batches cannot deadlock).
//   - Debounce keys (DebounceTx): the transactions that debounce one key
//     of a workflow must take turns from DebounceLock to their commit, so
//     that two of them cannot both find no pending run and insert one
//     each; pgstore takes a transaction advisory lock of (workflow, key),
//     and the key's row is the debounces table's primary key. The pending
//     run is read with RunGetForUpdate (so a claim skips it) and changed
//     only by the guarded RunDebounceReplace.
//   - Cron slots: ScheduleAdvance is the compare-and-set that decides which
//     engine starts a slot's runs, in the same transaction; it must be one
//     guarded UPDATE (which takes the schedule's row lock on PostgreSQL),
//     never a read followed by a write.
//   - Signals: a signal key is unique per run (a unique index). SignalNext
//     followed by SignalConsume must not hand one signal to two waits; the
//     engine calls them only in a transaction that checked the run's lease
//     first, so the row lock of RunLeaseCheck keeps a second worker out.
//   - Definitions: (name, version) is the primary key, so one insert of a
//     new version wins; DefinitionPut then reads the row it did not insert
//     with DefinitionGetForUpdate (FOR UPDATE on PostgreSQL), so that two
//     puts of one version are decided one after the other. Whether a
//     version is in use (a run or a registered workflow of it exists) is
//     read in the same transaction; a run inserted concurrently is not
//     seen, but a version a started engine registered (WorkflowRegister,
//     written when the engine starts) counts as in use from then on, so
//     the window is a run started by an engine that was never started.
//
// Time. Every time crossing the seam is Unix milliseconds in an int64,
// stored as a 64-bit integer (INTEGER on SQLite, BIGINT on PostgreSQL),
// never a database timestamp type: both dialects then store and compare the
// same numbers, and the engine's clock (real or fake) is the only clock.
// Adapters never read the database's clock; every method that needs "now"
// takes it as an argument.
//
// IDs. Run IDs are strings the caller chooses (the engine's are 23
// characters of lowercase base32 that sort by creation time); inserting a
// taken ID reports false, which makes a run ID an idempotency key. Events
// and signals get int64 IDs from the database, and a run's events and
// signals are listed by ID, which is the order they were inserted in. A
// run's sequence number (RunSeqMax) grows with its insertion.
//
// The change feed. FeedReader.EventFeed reads every run's events in
// position order, where an event's position is its ID. Its guarantees:
//
//   - A position is never handed out twice, even after the events holding
//     the newest positions were deleted. PostgreSQL's identity sequence
//     gives that; SQLite's plain rowids (chosen over AUTOINCREMENT, which
//     writes sqlite_sequence on every insert) would not, so sqlitestore's
//     EventAppend takes one above both the newest event and the highest
//     position ever deleted, in the same statement.
//   - EventFeed returns final events only: once it returned position P, no
//     event at or below P commits later. So a reader that resumes after
//     the last position it handled misses nothing. On SQLite the single
//     writer commits in ID order, so every visible event is final. On
//     PostgreSQL IDs are drawn in insertion order, not commit order:
//     pgstore holds back every ID a transaction in progress could still
//     fill, up to a horizon it proves final with the sequence's last value
//     and the snapshot's xmin (pgstore/feed.go has the argument and why
//     the alternatives were not taken). Its only cost to writers is that
//     EventAppend gives its transaction an ID before drawing the event's.
//     A transaction left open anywhere on the server holds the feed back
//     until it ends.
//   - Retention is visible. Events go with their runs; the highest
//     position ever deleted is recorded (FeedPurgedThrough, kept by a
//     trigger on the events table, whatever deleted them), so a reader
//     below it can be told that it may have missed events.
//     RunDeleteFinished's KeepAfter spares runs with events after the
//     lowest acknowledged position, for engines configured to let
//     retention wait for the feed's consumers.
//   - Followers are woken, never told state: FeedNotifier's channel closes
//     after a commit that appended events (pgstore also hears other
//     processes' commits, by a NOTIFY on <schema>_feed sent after the
//     commit, coalesced like the engines' wakes); a reader then reads from
//     its own position, and polls as the correctness path.
//   - Consumers are rows: FeedConsumerAck moves a named consumer's
//     position forward, never back, in a write transaction like any
//     other, so an acknowledged position survives a crash and a stale
//     acknowledgement changes nothing.
//
// Errors. Adapters map their driver's errors onto the sentinels below
// (flowtype.ErrRunNotFound for no row, flowtype.ErrDiskFull, flowtype.ErrReadOnly,
// ErrNotDatabase…), wrapped with what they were doing, so callers test them
// with errors.Is whatever the database.
//
// # Adding an adapter
//
// A new adapter adds these files, in this order, translating one entity
// at a time, as pgstore did after sqlitestore:
//
//  1. db/queries/<dialect>/*.sql: the queries of each entity, one file per
//     entity, with the same file and query names as every file of
//     db/queries/sqlite (runs.sql, steps.sql, signals.sql, events.sql, …,
//     limits.sql, debounce.sql, shards.sql).
//  2. db/migrations/<dialect>/: the goose migrations, the one source of
//     that dialect's schema, embedded by db/migrations/migrations.go, with
//     every table in flowlite's own namespace (a prefix on SQLite, a schema
//     on PostgreSQL) so it can share a database with the application's.
//  3. sqlc.yaml: an entry generating dbgen/<dialect>db from those two
//     trees; `go generate ./dbgen` regenerates it and CI fails on drift.
//     Only the adapter imports dbgen/<dialect>db.
//  4. internal/store/<adapter>/: an Open, a Store with Write, WriteInTx,
//     Reader and Close, and one file per entity holding the reader and tx
//     methods of that entity (runs.go, steps.go, signals.go, events.go,
//     …, operator.go, limits.go), as in sqlitestore and pgstore.
//  5. A test calling storetest.Exercise with a function that opens a fresh,
//     empty store; the adapter is done when it passes.
//
// Optional interfaces extend a Store for what only some databases have;
// callers type-assert to them and fall back to flowtype.ErrNotSupported.
// FileMaintainer is one: stores kept in one database file report its size,
// checkpoint its write-ahead log, back it up and check its integrity.
// Maintainer is another: a store with upkeep of its own (the SQLite WAL
// watch) runs it while the engine works, with MaintainHooks for what it
// needs from the engine. Claimer and Starter are two more: a store where a
// statement costs a round trip makes a whole claim, and a whole start of a
// run without a unique key, one statement each, and the engine goes through
// them instead of RunClaim, and RunInsert and EventAppend, in Write (a
// fallback, not flowtype.ErrNotSupported). An adapter implements the ones
// its database has and no others; the dialect's policies live in the
// adapter, never in the engine.
//
// # Wakes
//
// Notifier is the optional interface of stores that can tell engines in
// other processes, at once, that work appeared; the engine otherwise
// learns of it at its next poll. Its contract:
//
//   - Asked for by the write, delivered after its commit. The adapter's
//     write methods that make work appear ask for the wake themselves, and
//     it is delivered only once their transaction committed: a listener
//     never hears of a run it cannot yet read, nor of one that was rolled
//     back. (pgstore sends it in the transaction when the caller owns it,
//     WriteInTx, where PostgreSQL delivers it on the caller's commit, and
//     right after the commit in Write, because notifying transactions
//     commit one at a time.) These are RunInsert, RunInsertMany, RunWake, RunRequeue, RunMakeDue, RunRescue,
//     RunCancelToUnwind, RunSetStatus to pending, RunReschedule, RunReset
//     and RunForkInsert (WakeReady for the run), QueueSetPaused resuming a
//     queue (WakeReady for the queue), and
//     RunRequestCancel and RunCancelChildren (WakeCancel for the run). A
//     write that changed nothing sends nothing. RunRelease sends nothing:
//     the engine releasing a run works its queue and wakes itself.
//     SignalSend sends nothing either: the engine follows it with RunWake,
//     the write that makes the waiting run due.
//   - Never a cause of failure for writers. A wake is small (queue, run ID,
//     due time: far under PostgreSQL's 8000-byte NOTIFY limit), so sending
//     it cannot fail a write that would otherwise succeed, a failed send
//     after the commit is dropped, and no writer waits for a listener.
//   - A hint, never state. Wakes can be lost (a listener's connection
//     drops), repeated, or stale (another engine took the run). Polling,
//     heartbeats and the rescuer remain the correctness path; a wake only
//     makes the engine do sooner what they would do anyway. Listen calls
//     fn with a WakeAll once listening and after every reconnection, since
//     wakes sent meanwhile are lost.
//   - Scoped to the store. Stores in different namespaces of one database
//     (PostgreSQL schemas) do not wake each other (pgstore: one channel
//     per schema, <schema>_wake).
//   - A connection of its own. Listen must not hold a connection writers
//     need, and ends when its context does (the engine's Stop).
package store
