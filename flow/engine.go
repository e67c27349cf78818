package flow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// DefaultQueue is the queue of runs started without one.
const DefaultQueue = engine.DefaultQueue

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
	// Limits, when set, are the queue's flow control for every engine of
	// the database (see Engine.SetQueueLimits), recorded when this engine
	// starts: the last engine started with Limits for a queue sets them.
	// Leave it nil to keep what the database has (set by the CLI, say).
	Limits *QueueLimits
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
	// PollInterval bounds how late a run started by another process, or
	// becoming due, is noticed. Default 200ms. On PostgreSQL, other
	// processes' starts, signals and cancellations wake the engine at once
	// (LISTEN/NOTIFY); the poll still finds what a lost wake missed.
	PollInterval time.Duration
	// LeaseTimeout is how long a run stays owned by a worker that stopped
	// heartbeating (e.g. crashed) before another takes it over. Default 30s.
	// It must be longer than HeartbeatInterval plus the backend's busy
	// timeout (flowsqlite's Options.BusyTimeout; New refuses it otherwise),
	// because a heartbeat may wait that long for the database lock, and a
	// lease that lapsed meanwhile would let another worker rescue a run
	// whose worker is alive.
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
	// RetentionWaitsForConsumers makes retention keep a finished run
	// while a registered change-feed consumer (ChangesOptions.Consumer)
	// has not acknowledged all of its changes, so no consumer falls behind
	// retention; a consumer that stops for good then keeps runs forever
	// until it is deleted (DeleteChangeConsumer, flowlite changes
	// --delete). False (the default): retention deletes them anyway, and a
	// consumer that falls behind gets a *FeedBehindError.
	RetentionWaitsForConsumers bool
	// CleanInterval is how often finished runs past their retention are
	// deleted. Default 1m; negative: never automatically (call Clean).
	CleanInterval time.Duration
	// ReportInterval is how often a started engine writes its metrics
	// (EngineMetrics) to the database when they changed, so that processes
	// that run no workflows, like flowlite serve, can show them (see
	// Reports). Default 10s; negative: never.
	ReportInterval time.Duration
	// ReportRetention is how long the reports of engines that stopped
	// writing them are kept. Default 7 days; negative: forever.
	ReportRetention time.Duration
	// StoppedReportRetention is how long the report of an engine that
	// stopped (Stop) is kept, counted from its stop: every short-lived
	// process leaves one. The cleaner and every Start delete older ones.
	// Default 24h; negative: only ReportRetention applies.
	StoppedReportRetention time.Duration
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
	// MaxHistoryCalls caps the calls a run's history records (steps,
	// sleeps, receives, signals sent, children, races, patch markers), and
	// MaxHistoryBytes their recorded inputs, outputs and errors: every
	// resume reads and replays the whole history, so a run that grows it
	// without end resumes ever slower. Past 80% of either the engine logs
	// a warning (once per execution); at the limit the run is suspended
	// before its next call with a *HistoryLimitError naming the run, the
	// count and the limit. Suspended, not failed: nothing is compensated,
	// and an operator can raise the limit and resume the run, or cancel
	// it. A workflow that loops for months should split its work into
	// child workflows, each with a history of its own. Defaults
	// DefaultMaxHistoryCalls (50,000) and DefaultMaxHistoryBytes (50 MiB);
	// negative: no limit. The limits of the engine that executes the run
	// apply.
	MaxHistoryCalls int
	MaxHistoryBytes int64
}

// Engine runs workflows stored in one database, or in a set of SQLite
// files, its shards (NewSharded), to which it routes every call.
//
// Its methods are named by what they do, to what:
//
//   - Start, Stop and Close begin, drain and end the engine's own work;
//     Rescue, Clean and WakeAll do at once what it does on its timers.
//   - Runs are made by the package's functions, which take the typed
//     workflow or job (methods cannot have type parameters): Start,
//     Enqueue, StartMany, EnqueueMany, their Tx forms, and Schedule.
//     Requeue, RequeueDead and Fork make new runs from recorded ones.
//   - A verb given a run ID acts on that run: Cancel, Resume, Skip, Reset,
//     Revive, RunNow, RunAt, DeleteRun, Requeue, Fork.
//   - A verb given a filter acts on every run it matches: RequeueDead,
//     PurgeDead; PurgeDeadRuns acts on the runs it names.
//   - Inspect, its variants (InspectWithHistory, InspectAt, InspectAfter)
//     and History read one run; ExportHistory exports it, and Replay runs
//     an exported one against this program's code. ListRuns and CountRuns
//     read many.
//   - A noun reads what it names: DeadLetters, Waiting, QueueStats,
//     UnworkedQueues, Schedules, Reports, Metrics, Changes,
//     ChangeConsumers, FileHealth.
//   - A verb and a noun act on something named other than a run: queues
//     (PauseQueue, ResumeQueue), schedules (PauseSchedule, ResumeSchedule,
//     DeleteSchedule, LookupSchedule), stored definitions (PutDefinition,
//     GetDefinition, ListDefinitions) and change consumers
//     (DeleteChangeConsumer).
//   - Checkpoint, Backup and Check tend the database file; Shards, Shard
//     and PlaceRun tell the files of a sharded engine apart.
type Engine struct {
	core  *engine.Engine
	store store.Store
	// readOnly names the database of an engine whose backend opened it
	// only to read (flowsqlite.OpenReadOnly).
	readOnly string
	// limits are the queues' flow control Config.Queues sets, recorded by
	// Start.
	limits map[string]QueueLimits
	// route picks the inner engines that serve each call: the engine
	// itself, or the shards of a set (NewSharded), whose shard 0's core
	// and store are then core and store.
	route router
}

// Backend is a database an Engine runs on. A backend package makes one and
// passes it to New: flow/flowsqlite for a SQLite file (flowsqlite.Open
// does both), flow/flowpg for PostgreSQL. flow itself imports no backend
// and no database driver, so a program links only the one it chooses.
//
// The set of backends is sealed: OpenStore returns a type of flowlite's
// internal packages, which no package outside this module can name, so
// only this module's backend packages can implement Backend. It is the
// one place where flow's API shows an internal type.
type Backend interface {
	// OpenStore opens the store of one engine. New calls it once and the
	// engine closes the store.
	OpenStore(ctx context.Context) (store.Opened, error)
}

// New returns an engine on the database of b, a backend made by a backend
// package; most programs call that package's Open instead (flowsqlite.Open),
// which calls New. Errors of opening the database are the backend's (see
// its Open). When New fails, the store b opened is closed.
func New(ctx context.Context, b Backend, cfg *Config) (*Engine, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	// A bad Config is refused before the backend opens (and, for SQLite,
	// creates or migrates) anything; what depends on the opened database,
	// like its busy timeout, is checked again once it is open.
	if err := engine.CheckConfig(engineConfig(cfg, 0)); err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	o, err := b.OpenStore(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkNotShard(ctx, o); err != nil {
		o.Store.Close()
		return nil, fmt.Errorf("new engine: %w", err)
	}
	e, err := newEngine(o, cfg)
	if err != nil {
		o.Store.Close()
		return nil, err
	}
	return e, nil
}

func newEngine(o store.Opened, cfg *Config) (*Engine, error) {
	core, err := engine.New(o.Store, engineConfig(cfg, o.BusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	e := &Engine{core: core, store: o.Store, readOnly: o.ReadOnly, limits: configLimits(cfg)}
	e.route = alone(e)
	return e, nil
}

// engineConfig is cfg in the engine's terms, for a database whose writes
// wait up to busy for a lock.
func engineConfig(cfg *Config, busy time.Duration) engine.Config {
	queues := make(map[string]int, len(cfg.Queues))
	for name, q := range cfg.Queues {
		queues[name] = q.Concurrency
	}
	return engine.Config{
		Queues:            queues,
		PollInterval:      cfg.PollInterval,
		LeaseTimeout:      cfg.LeaseTimeout,
		HeartbeatInterval: cfg.HeartbeatInterval,
		RescueInterval:    cfg.RescueInterval,
		BusyTimeout:       busy,
		DefaultRetry:      cfg.DefaultRetry,
		Logger:            cfg.Logger,
		Clock:             cfg.Clock,
		WorkerID:          cfg.WorkerID,
		Intercept:         cfg.Intercept,

		Retention:                  cfg.Retention,
		CleanInterval:              cfg.CleanInterval,
		RetentionWaitsForConsumers: cfg.RetentionWaitsForConsumers,
		ReportInterval:             cfg.ReportInterval,
		ReportRetention:            cfg.ReportRetention,
		StoppedReportRetention:     cfg.StoppedReportRetention,
		MaxPayloadBytes:            cfg.MaxPayloadBytes,
		MaxHistoryCalls:            cfg.MaxHistoryCalls,
		MaxHistoryBytes:            cfg.MaxHistoryBytes,
	}
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
	for _, inner := range e.route.all() {
		if err := inner.core.Register(wf.definition(e)); err != nil {
			return err
		}
	}
	return nil
}

// Start starts working: claiming runs of the configured queues, renewing
// leases and rescuing runs of crashed workers. Runs can be started and
// inspected before Start.
// An engine opened only to read (flowsqlite.OpenReadOnly, flowpg.Open on a
// standby) cannot start: it returns ErrReadOnly.
func (e *Engine) Start(ctx context.Context) error {
	if e.readOnly != "" {
		return fmt.Errorf("start engine on %s: %w: it was opened only to read", e.readOnly, ErrReadOnly)
	}
	for name, l := range e.limits {
		if err := e.SetQueueLimits(ctx, name, l); err != nil {
			return fmt.Errorf("start engine: %w", err)
		}
	}
	return e.route.startAll(ctx)
}

// Stop stops claiming runs and waits for those in flight to settle. If ctx
// ends first, they are interrupted and released for another worker at once;
// Stop then returns an error saying so. Nothing recorded is lost either way.
func (e *Engine) Stop(ctx context.Context) error {
	// The inner engines drain at once, each within ctx.
	_, err := each(ctx, e, func(_ context.Context, inner *Engine) (struct{}, error) {
		return struct{}{}, inner.core.Stop(ctx)
	})
	return err
}

// Close stops the engine at once (interrupting runs in flight, which are
// released and resume later) and closes its store, and the database if the
// backend opened it (a pool the caller opened stays open).
// Call Stop first for a graceful drain.
func (e *Engine) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	inners := e.route.all()
	// Every shard stops before any store closes: a shard's claims read the
	// other files, and lock beside shard 0's (shardlimits.go), which
	// closes last.
	for _, inner := range inners {
		_ = inner.core.Stop(ctx)
	}
	var errs []error
	for i := len(inners) - 1; i >= 0; i-- {
		errs = append(errs, inners[i].store.Close())
	}
	return errors.Join(errs...)
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
func (e *Engine) Cancel(ctx context.Context, runID string) error {
	return e.onRun(runID, func(c *engine.Engine) error { return c.Cancel(ctx, runID) })
}

// Resume puts a suspended run back to work: failed compensations get a fresh
// set of attempts; a run suspended before its workflow failed runs again.
func (e *Engine) Resume(ctx context.Context, runID string) error {
	return e.onRun(runID, func(c *engine.Engine) error { return c.Resume(ctx, runID) })
}

// Skip marks the failed compensations of a suspended run as done without
// running them and continues its unwind.
func (e *Engine) Skip(ctx context.Context, runID string) error {
	return e.onRun(runID, func(c *engine.Engine) error { return c.Skip(ctx, runID) })
}

// Rescue re-queues runs whose lease expired now, instead of at the next
// rescue tick, and returns how many.
func (e *Engine) Rescue(ctx context.Context) (int, error) {
	return sumAll(e, func(inner *Engine) (int, error) { return inner.core.Rescue(ctx) })
}

// WakeAll makes the engine look for due runs now and cancels runs in flight
// whose deadline the clock passed, e.g. after a test clock moved.
func (e *Engine) WakeAll() {
	for _, inner := range e.route.all() {
		inner.core.WakeAll()
	}
}
