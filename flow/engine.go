package flow

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// DefaultQueue is the queue of runs started without one.
const DefaultQueue = engine.DefaultQueue

// Synchronous is the SQLite durability setting (PRAGMA synchronous) of the
// connections Open makes, or SQLiteDSN describes: how much of a commit
// survives a crash. The database runs in WAL mode, where only FULL and
// NORMAL make sense, so those are the two values; the empty value means
// SynchronousFull.
type Synchronous string

// Durability settings.
const (
	// SynchronousFull syncs the WAL on every commit, so that every commit
	// survives power loss. It is the default: a workflow engine that loses
	// a checkpoint repeats a step's side effect.
	SynchronousFull Synchronous = "FULL"
	// SynchronousNormal syncs at checkpoints only: commits survive a crash
	// of the process but possibly not a power loss, for several times the
	// write throughput.
	SynchronousNormal Synchronous = "NORMAL"
)

// Clock tells the engine the time; flowtest provides one that tests move.
// See [flowtype.Clock] for its method.
type Clock = flowtype.Clock

// AttemptInfo describes a step or compensation attempt to an Interceptor.
// See [flowtype.AttemptInfo] for its fields.
type AttemptInfo = flowtype.AttemptInfo

// Interceptor wraps every step and compensation attempt. It must call call to
// run the body, or return an error instead. See [flowtype.Interceptor].
type Interceptor = flowtype.Interceptor

// DefaultConcurrency is the concurrency of a queue whose QueueConfig leaves
// it zero.
const DefaultConcurrency = engine.DefaultConcurrency

// QueueConfig configures how this engine works one queue.
type QueueConfig struct {
	// Concurrency is the most runs of the queue this engine executes at once.
	// Zero means DefaultConcurrency (10), like every zero field of Config,
	// so Queues{"orders": {}} works a queue without tuning it; a negative
	// value is an error naming the queue.
	Concurrency int
}

// Config configures an Engine. A nil *Config, and every zero field, means
// the default.
type Config struct {
	// Queues are the queues this engine works, each with its QueueConfig.
	// Default: DefaultQueue alone, with concurrency DefaultConcurrency. An
	// engine claims runs of its queues only: runs started in any other queue
	// (StartOptions.Queue, Job.Queue) stay pending until an engine that
	// lists the queue runs. Listing a queue replaces the default, so list
	// DefaultQueue too if this engine should also work it.
	Queues map[string]QueueConfig
	// Synchronous applies to Open only. Default SynchronousFull.
	Synchronous Synchronous
	// SkipQuickCheck leaves out the check Open and New make before they
	// write to a database: SQLite's PRAGMA quick_check, which reads every
	// page of the file (about 0.3 s for a 63 MiB file of 50,000 finished
	// runs on a 2-core machine, warm cache; linear in the file's size) and
	// refuses a damaged file with ErrCorrupt, so that an engine never
	// writes into a file whose b-trees are broken. Skip it for very large
	// files whose integrity flowlite check (or a backup's) vouches for.
	SkipQuickCheck bool
	// BusyTimeout is how long a write waits for the database lock another
	// process holds (SQLite's busy_timeout) before it fails with ErrBusy.
	// Several processes may share one file: the engine's own writes
	// (starts, claims, heartbeats, checkpoints of steps) wait and retry
	// within this bound, so with each process holding the lock briefly no
	// caller sees ErrBusy. Default 5s; it is set in the DSN, in whole
	// milliseconds. New takes the busy_timeout of the caller's pool and
	// refuses a different non-zero BusyTimeout.
	BusyTimeout time.Duration
	// PollInterval bounds how late a run started by another process, or
	// becoming due, is noticed. Default 200ms.
	PollInterval time.Duration
	// LeaseTimeout is how long a run stays owned by a worker that stopped
	// heartbeating (e.g. crashed) before another takes it over. Default 30s.
	// It must be longer than HeartbeatInterval plus BusyTimeout (Open and
	// New refuse it otherwise), because a heartbeat may wait that long for
	// the database lock, and a lease that lapsed meanwhile would let
	// another worker rescue a run whose worker is alive.
	LeaseTimeout time.Duration
	// HeartbeatInterval is how often leases are renewed; default a third of
	// LeaseTimeout. Cancellation by another process is seen at the latest
	// one heartbeat later.
	HeartbeatInterval time.Duration
	// RescueInterval is how often expired leases are looked for; default
	// half of LeaseTimeout.
	RescueInterval time.Duration
	// DefaultRetry is the retry policy of steps that set none.
	DefaultRetry RetryPolicy
	// Logger receives the engine's logs. Default slog.Default(): a library
	// that holds back progress (a write the disk refuses, a version it
	// lacks) must not be silent. Pass slog.New(slog.DiscardHandler) to
	// opt out.
	Logger *slog.Logger
	// Clock tells time; default the system clock.
	Clock Clock
	// WorkerID names this engine in leases and history; default
	// host-pid-random.
	WorkerID string
	// Intercept, when set, wraps every step and compensation attempt, e.g.
	// for tracing or to inject failures in tests.
	Intercept Interceptor
	// Retention is how long finished runs are kept, per state; see
	// Retention for the defaults.
	Retention Retention
	// CleanInterval is how often finished runs past their retention are
	// deleted. Default 1m; negative: never automatically (call Clean).
	CleanInterval time.Duration
	// CheckpointInterval is how often the WAL is checkpointed routinely
	// (truncated when no run is in flight). Its size is checked several
	// times a second regardless. Default 1s; negative: no automatic
	// checkpoints beyond SQLite's own.
	CheckpointInterval time.Duration
	// WALLimit is the size in bytes the WAL file should stay under; past
	// half of it the engine truncates the WAL, briefly holding writes back
	// until readers move on. Default 64 MiB.
	WALLimit int64
	// ReportInterval is how often a started engine writes its metrics
	// (EngineMetrics) to the database when they changed, so that processes
	// that run no workflows, like flowlite serve, can show them (see
	// Reports). Default 10s; negative: never.
	ReportInterval time.Duration
	// ReportRetention is how long the reports of engines that stopped
	// writing them are kept. Default 7 days; negative: forever.
	ReportRetention time.Duration
	// MaxPayloadBytes caps the JSON encoding of every value the engine
	// stores: run inputs (Start, StartTx, Enqueue, EnqueueTx, StartChild,
	// Schedule), signal payloads, step outputs and workflow outputs. A
	// value over it is refused with an error matching ErrPayloadTooLarge
	// that names the value, its size and the limit. SQLite has one writer:
	// a single write of a hundred megabytes holds every other run for
	// seconds, and each replay reads it again, so large data belongs in
	// your own tables or files, with its key in the run. Default
	// DefaultMaxPayloadBytes (4 MiB); negative: no limit. Each process
	// applies its own limit to what it writes.
	MaxPayloadBytes int64
}

// Engine runs workflows stored in one database.
type Engine struct {
	core  *engine.Engine
	store store.Store
	// readOnly is the file of an engine opened with OpenReadOnly.
	readOnly string
}

// Open opens an engine on the SQLite file at path (created when missing)
// with WAL, synchronous=FULL unless cfg says NORMAL, and the schema migrated.
// Before writing anything it checks the file's pages (see
// Config.SkipQuickCheck). A file that is not a SQLite database, is corrupt,
// is read-only, or was migrated by a newer flowlite is refused with
// ErrNotDatabase, ErrCorrupt, ErrReadOnly or ErrSchemaTooNew naming the
// file, and left untouched.
func Open(ctx context.Context, path string, cfg *Config) (*Engine, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{
		Synchronous: sqlitestore.Synchronous(cfg.Synchronous), BusyTimeout: cfg.BusyTimeout,
		SkipQuickCheck: cfg.SkipQuickCheck,
	})
	if err != nil {
		return nil, err
	}
	e, err := newEngine(s, cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	return e, nil
}

// OpenReadOnly opens an engine that only reads the existing SQLite file at
// path: Inspect, ListRuns, History, Check, QueueStats and the other reads
// work, while every write (Start, Cancel, Signal, Checkpoint…) and Engine.Start
// fail with ErrReadOnly naming the file. It never creates, migrates or
// changes the file and leaves no -wal or -shm file behind, so it reads a
// file that is read-only, in a read-only directory or on a read-only mount,
// as well as one engines are working. The schema must be this flowlite's
// version: an older one cannot be migrated without writing.
//
// On a file this process could write, the engine reads through ordinary
// SQLite connections that refuse writes (query_only). On a file it cannot
// write, it opens SQLite read-only (mode=ro), reading the WAL through its
// -shm if engines have the file open; if there is no WAL, SQLite's
// immutable mode reads the main file, which then holds every commit, and
// creates nothing beside it (sqlite.org/wal.html#readonly). Writes by
// another process that start after OpenReadOnly may then go unseen until
// the engine is opened again.
func OpenReadOnly(ctx context.Context, path string, cfg *Config) (*Engine, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	s, err := sqlitestore.OpenReadOnly(ctx, path, sqlitestore.Options{BusyTimeout: cfg.BusyTimeout})
	if err != nil {
		return nil, err
	}
	e, err := newEngine(s, cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	e.readOnly = path
	return e, nil
}

// SQLiteDSN returns the data source name to open a database for New with
// sql.Open("sqlite", …) (modernc.org/sqlite): WAL, busy timeout, foreign
// keys and BEGIN IMMEDIATE write transactions.
func SQLiteDSN(path string, sync Synchronous) string {
	return sqlitestore.DSN(path, sqlitestore.Synchronous(sync))
}

// SQLiteDSNBusy is SQLiteDSN with a busy timeout other than the default
// 5s (see Config.BusyTimeout); zero or less means the default.
func SQLiteDSNBusy(path string, sync Synchronous, busy time.Duration) string {
	return sqlitestore.DSNBusy(path, sqlitestore.Synchronous(sync), busy)
}

// New returns an engine on a SQLite database the caller opened (see
// SQLiteDSN) and migrates its schema. The pool is used as it is; Close does
// not close it.
func New(ctx context.Context, db *sql.DB, cfg *Config) (*Engine, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	s, err := sqlitestore.OpenDB(ctx, db, sqlitestore.Options{SkipQuickCheck: cfg.SkipQuickCheck})
	if err != nil {
		return nil, err
	}
	if cfg.BusyTimeout != 0 && cfg.BusyTimeout != s.BusyTimeout() {
		s.Close()
		return nil, fmt.Errorf("new engine: Config.BusyTimeout is %s but the pool's busy_timeout is %s: open the pool with SQLiteDSNBusy(path, sync, %s) or leave BusyTimeout zero",
			cfg.BusyTimeout, s.BusyTimeout(), cfg.BusyTimeout)
	}
	e, err := newEngine(s, cfg)
	if err != nil {
		s.Close()
		return nil, err
	}
	return e, nil
}

func newEngine(s *sqlitestore.Store, cfg *Config) (*Engine, error) {
	queues := make(map[string]int, len(cfg.Queues))
	for name, q := range cfg.Queues {
		queues[name] = q.Concurrency
	}
	core, err := engine.New(s, engine.Config{
		Queues:            queues,
		PollInterval:      cfg.PollInterval,
		LeaseTimeout:      cfg.LeaseTimeout,
		HeartbeatInterval: cfg.HeartbeatInterval,
		RescueInterval:    cfg.RescueInterval,
		BusyTimeout:       s.BusyTimeout(),
		DefaultRetry:      cfg.DefaultRetry,
		Logger:            cfg.Logger,
		Clock:             cfg.Clock,
		WorkerID:          cfg.WorkerID,
		Intercept:         cfg.Intercept,

		Retention:          cfg.Retention,
		CleanInterval:      cfg.CleanInterval,
		CheckpointInterval: cfg.CheckpointInterval,
		WALLimit:           cfg.WALLimit,
		ReportInterval:     cfg.ReportInterval,
		ReportRetention:    cfg.ReportRetention,
		MaxPayloadBytes:    cfg.MaxPayloadBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	return &Engine{core: core, store: s}, nil
}

// Register adds a workflow version to the engine, or panics if it is
// invalid or already registered. Use it at program start; see
// RegisterSafely for an error instead.
func Register[In, Out any](e *Engine, wf Workflow[In, Out]) {
	if err := RegisterSafely(e, wf); err != nil {
		panic(err)
	}
}

// RegisterSafely is Register returning an error instead of panicking.
func RegisterSafely[In, Out any](e *Engine, wf Workflow[In, Out]) error {
	if err := engine.CheckName("workflow", wf.Name); err != nil {
		return fmt.Errorf("register workflow: %w", err)
	}
	if wf.Run == nil {
		return fmt.Errorf("register workflow %q: Run is nil", wf.Name)
	}
	if wf.Version < 0 {
		return fmt.Errorf("register workflow %q: negative version %d", wf.Name, wf.Version)
	}
	return e.core.Register(wf.definition())
}

// Start starts working: claiming runs of the configured queues, renewing
// leases and rescuing runs of crashed workers. Runs can be started and
// inspected before Start.
// An engine opened with OpenReadOnly cannot start: it returns ErrReadOnly.
func (e *Engine) Start(ctx context.Context) error {
	if e.readOnly != "" {
		return fmt.Errorf("start engine on %s: %w: it was opened with OpenReadOnly", e.readOnly, ErrReadOnly)
	}
	return e.core.Start(ctx)
}

// Stop stops claiming runs and waits for those in flight to settle. If ctx
// ends first, they are interrupted and released for another worker at once;
// Stop then returns an error saying so. Nothing recorded is lost either way.
func (e *Engine) Stop(ctx context.Context) error { return e.core.Stop(ctx) }

// Close stops the engine at once (interrupting runs in flight, which are
// released and resume later) and closes the database if Open opened it.
// Call Stop first for a graceful drain.
func (e *Engine) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = e.core.Stop(ctx)
	return e.store.Close()
}

// Cancel cancels a run. A run that a worker executes sees it through its
// context (at once in this process, within a heartbeat in another), its
// completed steps are compensated, and it ends CANCELLED. A run that no
// worker executes (pending, delayed, waiting, in a paused queue or in one
// no engine works) and a suspended run end CANCELLED within the call, unless
// they completed steps with compensations: those runs become COMPENSATING,
// and the next engine to claim them runs the compensations and ends them
// CANCELLED (Result waits until then, as the steps' effects stand until
// undone). Unfinished children are cancelled with their parent.
// Cancelling a finished run returns ErrRunFinished; an unknown run,
// ErrRunNotFound.
func (e *Engine) Cancel(ctx context.Context, runID string) error { return e.core.Cancel(ctx, runID) }

// Resume puts a suspended run back to work: failed compensations get a fresh
// set of attempts; a run suspended before its workflow failed runs again.
func (e *Engine) Resume(ctx context.Context, runID string) error { return e.core.Resume(ctx, runID) }

// Skip marks the failed compensations of a suspended run as done without
// running them and continues its unwind.
func (e *Engine) Skip(ctx context.Context, runID string) error { return e.core.Skip(ctx, runID) }

// Rescue re-queues runs whose lease expired now, instead of at the next
// rescue tick, and returns how many.
func (e *Engine) Rescue(ctx context.Context) (int, error) { return e.core.Rescue(ctx) }

// WakeAll makes the engine look for due runs now and cancels runs in flight
// whose deadline the clock passed, e.g. after a test clock moved.
func (e *Engine) WakeAll() { e.core.WakeAll() }
