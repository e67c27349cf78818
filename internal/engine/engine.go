package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/clock"
	"github.com/flowlite/flowlite/internal/store"
)

// DefaultQueue is the queue of runs started without one.
const DefaultQueue = "default"

// DefaultConcurrency is the concurrency of a queue configured with zero.
const DefaultConcurrency = 10

// Config tunes an Engine. Zero fields take the defaults documented on each.
type Config struct {
	// Queues maps each queue this engine works to its concurrency limit;
	// zero means DefaultConcurrency. Default: {"default": 10}.
	Queues map[string]int
	// PollInterval is how often a queue is polled for runs started by other
	// processes or become due. Default 200ms. A store that notifies
	// (store.Notifier, PostgreSQL) wakes the engine at once when another
	// process starts or wakes a run; polling still finds what a lost
	// notification missed.
	PollInterval time.Duration
	// LeaseTimeout is how long a claimed run stays owned without a
	// heartbeat. Default 30s.
	LeaseTimeout time.Duration
	// HeartbeatInterval is how often a running run's lease is renewed.
	// Default LeaseTimeout/3.
	HeartbeatInterval time.Duration
	// RescueInterval is how often expired leases are looked for. Default
	// LeaseTimeout/2.
	RescueInterval time.Duration
	// BusyTimeout is how long a write of the store may wait for a lock
	// another process holds (zero: unknown, not checked). A heartbeat can
	// wait that long, so LeaseTimeout must exceed HeartbeatInterval plus
	// BusyTimeout, or a live worker's lease could lapse and its run be
	// rescued while it still works on it.
	BusyTimeout time.Duration
	// ClaimBatch caps how many runs one claim transaction takes. Default 32.
	ClaimBatch int
	// DefaultRetry fills the zero fields of every step's retry policy.
	DefaultRetry flowtype.RetryPolicy
	// Logger receives operational logs. Default: slog.Default().
	Logger *slog.Logger
	// Clock tells time. Default: the system clock.
	Clock flowtype.Clock
	// WorkerID names this engine in leases. Default: host-pid-random.
	WorkerID string
	// Intercept, when set, wraps every step and compensation attempt.
	Intercept flowtype.Interceptor

	// Retention is how long finished runs are kept, per state (cleaner.go).
	Retention flowtype.Retention
	// RetentionWaitsForConsumers keeps finished runs with changes a
	// registered change-feed consumer has not acknowledged (cleaner.go).
	RetentionWaitsForConsumers bool
	// CleanInterval is how often the cleaner runs. Default 1m; negative:
	// never (call Clean).
	CleanInterval time.Duration
	// CleanBatch caps how many runs one cleaner transaction deletes.
	// Default 500.
	CleanBatch int
	// ReportInterval is how often the engine writes its metrics to the
	// database when they changed (report.go). Default 10s; negative: never.
	ReportInterval time.Duration
	// ReportRetention is how long the cleaner keeps the reports of engines
	// that stopped writing them. Default 7 days; negative: forever.
	ReportRetention time.Duration
	// StoppedReportRetention is how long the reports of engines that
	// stopped cleanly are kept, counted from their stop; the cleaner and
	// every Start delete older ones. Default 24h; negative: only
	// ReportRetention applies.
	StoppedReportRetention time.Duration
	// MaxPayloadBytes caps the encoded size of every value the engine
	// stores (run inputs, signal payloads, step and workflow outputs; see
	// CheckPayload). Default DefaultMaxPayloadBytes; negative: no limit.
	MaxPayloadBytes int64
	// MaxHistoryCalls and MaxHistoryBytes cap a run's history (see
	// historylimit.go). Default DefaultMaxHistoryCalls and
	// DefaultMaxHistoryBytes; negative: no limit.
	MaxHistoryCalls int
	MaxHistoryBytes int64
}

func (c Config) withDefaults() Config {
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{DefaultQueue: DefaultConcurrency}
	} else {
		// A copy: the caller's map is theirs. Zero is "unset", as for every
		// other field, so Queues{"orders": 0} works the default amount;
		// negative stays an error for validate to name.
		queues := make(map[string]int, len(c.Queues))
		for q, n := range c.Queues {
			if n == 0 {
				n = DefaultConcurrency
			}
			queues[q] = n
		}
		c.Queues = queues
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 200 * time.Millisecond
	}
	if c.LeaseTimeout <= 0 {
		c.LeaseTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.LeaseTimeout / 3
	}
	if c.RescueInterval <= 0 {
		c.RescueInterval = c.LeaseTimeout / 2
	}
	if c.ClaimBatch <= 0 {
		c.ClaimBatch = 32
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.MaxHistoryCalls == 0 {
		c.MaxHistoryCalls = DefaultMaxHistoryCalls
	}
	if c.MaxHistoryBytes == 0 {
		c.MaxHistoryBytes = DefaultMaxHistoryBytes
	}
	c.DefaultRetry = c.DefaultRetry.WithDefaults(DefaultRetryPolicy)
	c = c.withMaintenanceDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(4))
	}
	return c
}

// CheckConfig reports what is wrong with c, with its zero fields taken as
// the defaults, before an engine is made with it: New makes the same check.
func CheckConfig(c Config) error { return c.withDefaults().validate() }

func (c Config) validate() error {
	for q, n := range c.Queues {
		if err := CheckName("queue", q); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if n <= 0 {
			return fmt.Errorf("config: queue %q: concurrency must be positive, got %d", q, n)
		}
	}
	if c.HeartbeatInterval >= c.LeaseTimeout {
		return fmt.Errorf("config: heartbeat interval %s must be shorter than lease timeout %s",
			c.HeartbeatInterval, c.LeaseTimeout)
	}
	if c.BusyTimeout < 0 {
		return fmt.Errorf("config: busy timeout must not be negative, got %s", c.BusyTimeout)
	}
	if c.BusyTimeout > 0 && c.HeartbeatInterval+c.BusyTimeout >= c.LeaseTimeout {
		return fmt.Errorf("config: lease timeout %s must be longer than the heartbeat interval %s plus the busy timeout %s: "+
			"a lease could lapse while its heartbeat waits for the database lock; raise LeaseTimeout or lower BusyTimeout",
			c.LeaseTimeout, c.HeartbeatInterval, c.BusyTimeout)
	}
	return nil
}

// Engine claims and executes runs stored in a store.Store.
type Engine struct {
	store store.Store
	cfg   Config
	log   *slog.Logger

	// streams buffers the stream writes of step attempts (stream.go).

	mu        sync.Mutex
	workflows map[flowtype.WorkflowKey]Workflow
	known     []flowtype.WorkflowKey // sorted keys of workflows; replaced, never mutated
	first     []store.FirstStep      // of the workflows that declare one, for claims; replaced, never mutated
	wake      map[string]chan struct{}
	slots     map[string]*semaphore.Weighted // per queue: free execution slots
	queues    map[string]int                 // the queues worked now, with their concurrency (queues.go)
	stopQueue map[string]context.CancelFunc  // per queue worked while running: stops its claim loop
	active    map[string]*execution
	held      map[string]store.Lease // claimed here and not done executing: the rescuer renews them
	cancelReq map[string]store.Lease // held here, asked to cancel before their execution began (cancelActive)
	begun     map[string]begunStep   // first attempts claims recorded, until their executions take them
	settledCh chan struct{}          // closed and replaced whenever a run settles here
	unwritten map[string]unwritten   // runs whose last write here failed for good (writefail.go)
	metrics   metrics                // instrumentation read by Metrics (metrics.go)
	running   bool
	startedAt time.Time // of the last Start, engine clock
	host      string    // this machine's name, for reports

	reportMu       sync.Mutex     // serializes reports (report.go)
	reportedEvents uint64         // metrics events counted at the last report
	reportedAt     time.Time      // real time of the last report
	warnedQueues   sync.Map       // queue name → struct{}: unworked start logged (unworked.go)
	outage         outages        // loops whose polls find the database unavailable (outage.go)
	outcomes       outcomeBatcher // outcomes of runs written together (outcome.go)
	progress       progressBoard  // step progress waiting for its write (progress.go)
	limits         limitCache     // the queues' flow control, as last read (limits.go)
	stepRatePruned sync.Map       // step rate limiter bucket: when this engine last pruned its starts (steprate.go)
	setLimits      SetLimits      // a shard set's count of global limits across its files, or nil (setlimits.go)

	stopLoops context.CancelFunc // stops claiming and maintenance
	hardStop  context.CancelCauseFunc
	baseCtx   context.Context // parent of every execution
	loopCtx   context.Context // parent of every loop while running (WorkQueue's too)
	loops     *errgroup.Group
	execs     *errgroup.Group
}

// New returns an engine over s. It does not start working until Start.
func New(s store.Store, cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		store:     s,
		cfg:       cfg,
		log:       cfg.Logger,
		workflows: make(map[flowtype.WorkflowKey]Workflow),
		wake:      make(map[string]chan struct{}),
		active:    make(map[string]*execution),
		held:      make(map[string]store.Lease),
		cancelReq: make(map[string]store.Lease),
		begun:     make(map[string]begunStep),
		unwritten: make(map[string]unwritten),
		settledCh: make(chan struct{}),
		outage:    outages{since: make(map[string]time.Time)},
	}
	e.host, _ = os.Hostname() // empty when unknown
	e.slots = make(map[string]*semaphore.Weighted, len(cfg.Queues))
	e.queues = make(map[string]int, len(cfg.Queues))
	e.stopQueue = make(map[string]context.CancelFunc)
	for q, limit := range cfg.Queues {
		e.addQueue(q, limit)
	}
	return e, nil
}

// Config returns the effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// Register adds a workflow version. Registering the same version twice is
// an error, because two bodies for one recorded history cannot both be right.
func (e *Engine) Register(w Workflow) error {
	if err := CheckName("workflow", w.Key.Name); err != nil {
		return fmt.Errorf("register workflow: %w", err)
	}
	if w.Run == nil {
		return fmt.Errorf("register workflow %s: Run is nil", w.Key)
	}
	e.mu.Lock()
	if _, dup := e.workflows[w.Key]; dup {
		e.mu.Unlock()
		return fmt.Errorf("register workflow %s: already registered", w.Key)
	}
	e.workflows[w.Key] = w
	known := append(slices.Clone(e.known), w.Key)
	slices.SortFunc(known, func(a, b flowtype.WorkflowKey) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmp.Compare(a.Version, b.Version))
	})
	e.known = known
	if w.FirstStep.Name != "" {
		e.first = append(slices.Clone(e.first), store.FirstStep{Workflow: w.Key, Name: w.FirstStep.Name, Input: w.FirstStep.Input, Lean: w.FirstStep.Lean})
	}
	running := e.running
	e.mu.Unlock()
	if running { // Start recorded the others; record this one now
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := e.store.Write(ctx, func(tx store.Tx) error { return tx.WorkflowRegister(ctx, w.Key, e.nowMs()) })
		if err != nil {
			return fmt.Errorf("register workflow %s: %w", w.Key, err)
		}
	}
	return nil
}

// Lookup returns the registered workflow version.
func (e *Engine) Lookup(k flowtype.WorkflowKey) (Workflow, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.workflows[k]
	return w, ok
}

// Known lists the registered workflow versions, sorted.
func (e *Engine) Known() []flowtype.WorkflowKey {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.known // the claim reads it on every poll: kept sorted by Register
}

// Start records the registered workflows and starts claiming, heartbeating
// and rescuing. It returns once the engine runs; ctx bounds only the startup.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("start engine: already running")
	}
	e.mu.Unlock()
	known := e.Known()
	err := e.store.Write(ctx, func(tx store.Tx) error {
		for _, k := range known {
			if err := tx.WorkflowRegister(ctx, k, e.nowMs()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	e.startedAt = e.now()
	if e.cfg.ReportInterval >= 0 {
		if err := e.report(ctx, true); err != nil {
			return fmt.Errorf("start engine: %w", err)
		}
	}
	// A short-lived process never lives to its cleaner's first pass: each
	// start prunes the reports of engines stopped past their retention, so
	// a series of short runs does not pile up stopped engines.
	if n, err := e.cleanStoppedReports(ctx); err != nil {
		e.log.Warn("delete the reports of engines stopped past their retention", "err", err)
	} else if n > 0 {
		e.log.Debug("deleted the reports of engines stopped past their retention", "reports", n)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	loopCtx, stopLoops := context.WithCancel(context.Background())
	base, hardStop := context.WithCancelCause(context.WithValue(context.Background(), clockKey{}, e.cfg.Clock))
	e.stopLoops, e.hardStop, e.baseCtx, e.loopCtx = stopLoops, hardStop, base, loopCtx
	e.loops, e.execs = new(errgroup.Group), new(errgroup.Group)
	e.running = true
	for q, limit := range e.queues {
		e.startQueueLoop(loopCtx, q, limit)
	}
	e.loops.Go(func() error { e.runRescuer(loopCtx); return nil })
	e.loops.Go(func() error { e.runUnrunnableReporter(loopCtx); return nil })
	e.loops.Go(func() error { e.runScheduler(loopCtx); return nil })
	e.loops.Go(func() error { e.runCleaner(loopCtx); return nil })
	e.loops.Go(func() error { e.runMaintainer(loopCtx); return nil })
	e.loops.Go(func() error { e.runReporter(loopCtx); return nil })
	e.loops.Go(func() error { e.runListener(loopCtx); return nil })
	e.loops.Go(func() error { e.runProgressFlusher(loopCtx); return nil })
	return nil
}

// Stop stops claiming new runs and waits for runs in flight to finish. When
// ctx ends first, their contexts are cancelled and their leases released, so
// another worker picks them up at once instead of after the lease expires.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return nil
	}
	e.running = false
	e.mu.Unlock()

	e.stopLoops()
	_ = e.loops.Wait()
	e.mu.Lock()
	clear(e.stopQueue)
	e.mu.Unlock()
	drained := make(chan struct{})
	go func() { _ = e.execs.Wait(); close(drained) }()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		e.hardStop(errStopping)
		<-drained
		err = fmt.Errorf("stop engine: runs interrupted: %w", ctx.Err())
	}
	e.hardStop(errStopping)
	e.lastReport()
	return err
}

// Wake makes the claimers of queue look for work now.
func (e *Engine) Wake(queue string) {
	e.mu.Lock()
	ch := e.wake[queue]
	e.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// WakeAll makes every claimer look for work now, e.g. after a test clock
// moved; runs in flight whose deadline the clock passed are cancelled.
func (e *Engine) WakeAll() {
	e.expireDeadlines()
	for _, q := range e.queueNames() {
		e.Wake(q)
	}
}

func (e *Engine) wakeAfter(queue string, d time.Duration) {
	if d <= 0 {
		e.Wake(queue)
		return
	}
	time.AfterFunc(d, func() { e.Wake(queue) })
}

// settled tells waiters that some run reached a settled state.
func (e *Engine) settled() {
	e.mu.Lock()
	close(e.settledCh)
	e.settledCh = make(chan struct{})
	e.mu.Unlock()
}

func (e *Engine) settledSignal() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.settledCh
}

// stopWriteTimeout bounds the writes an engine makes while it stops (its
// last report, giving back a run claimed meanwhile): the context of Stop
// may be done already.
const stopWriteTimeout = 5 * time.Second

// every calls fn every interval until ctx ends, the first time one interval
// after it is called.
func every(ctx context.Context, interval time.Duration, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fn()
	}
}

func (e *Engine) now() time.Time { return e.cfg.Clock.Now() }
func (e *Engine) nowMs() int64   { return e.cfg.Clock.Now().UnixMilli() }

type clockKey struct{}

// ClockFrom returns the engine clock carried by the context of a step, or
// the system clock outside an engine.
func ClockFrom(ctx context.Context) flowtype.Clock {
	if c, ok := ctx.Value(clockKey{}).(flowtype.Clock); ok {
		return c
	}
	return clock.System{}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// runIDEncoding spells run IDs in lowercase base32, without padding.
var runIDEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewRunID returns a new run ID: 48 bits of milliseconds then 64 random
// bits, 23 characters. IDs sort by creation time, which keeps inserts at the
// end of the primary key index, and they are short because every event and
// step row repeats its run's ID.
func NewRunID() string {
	var b [14]byte
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails
	return runIDEncoding.EncodeToString(b[:])
}
