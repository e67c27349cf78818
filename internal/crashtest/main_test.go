package crashtest

import (
	"context"
	"errors"
	"fmt"
	"github.com/flowlite/flowlite/internal/pgtest"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// Environment of a child process. The test binary re-executes itself with
// envChild=1; TestMain then runs a worker instead of the tests.
const (
	envChild  = "FLOWLITE_CRASH_CHILD"  // "1": run as a worker
	envDB     = "FLOWLITE_CRASH_DB"     // database file
	envLedger = "FLOWLITE_CRASH_LEDGER" // ledger file
	envInc    = "FLOWLITE_CRASH_INC"    // incarnation number, 1-based
	envDrain  = "FLOWLITE_CRASH_DRAIN"  // "1": exit once every run settled
	envHold   = "FLOWLITE_CRASH_HOLD"   // "1": park the first step attempt (see ledgerWriter.hold)
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(childMain())
	}
	if os.Getenv(envChild) == childWaits {
		os.Exit(waitsChildMain())
	}
	if os.Getenv(envChild) == childShared {
		os.Exit(sharedChildMain())
	}
	if os.Getenv(envChild) == childDAG {
		os.Exit(dagChildMain())
	}
	if os.Getenv(envChild) == childFeed {
		os.Exit(feedChildMain())
	}
	if os.Getenv(envChild) == childStream {
		os.Exit(streamChildMain())
	}
	if os.Getenv(envChild) == childLimits {
		os.Exit(limitsChildMain())
	}
	if os.Getenv(envChild) == childFailover {
		os.Exit(failoverChildMain())
	}
	if os.Getenv(envChild) == childContinue {
		os.Exit(continueChildMain())
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase()))
}

// The saga workflow of the crash test: three steps, s1 and s2 with
// compensations; s3 fails for good when the input says so (a third of the
// runs), which rolls the run back.

type sagaIn struct {
	N    int  `json:"n"`
	Fail bool `json:"fail"`
}

type sagaOut struct {
	S1 int `json:"s1"`
	S2 int `json:"s2"`
	S3 int `json:"s3"`
}

type stepIn struct {
	N    int  `json:"n"`
	V    int  `json:"v"`
	Fail bool `json:"fail"`
}

// Expected outputs of the steps for input n.
func wantS1(n int) int { return n*10 + 1 }
func wantS2(n int) int { return wantS1(n) * 3 }
func wantS3(n int) int { return wantS2(n) + 7 }

// sagaFails says whether run n's s3 fails for good.
func sagaFails(n int) bool { return n%3 == 2 }

// Transient failures injected by the child's interceptor on attempt 1, so
// that retries (and compensation retries) happen under kills too.
func transientS2(n int) bool     { return n%4 == 1 }
func transientCompS1(n int) bool { return n%5 == 0 }

const errS3 = "s3 refused"

// work sleeps a little, like a step talking to the outside world.
func work(ctx context.Context) error {
	t := time.NewTimer(time.Duration(5+rand.IntN(35)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func undo(ctx context.Context, _ stepIn, _ int) error { return work(ctx) }

// fastRetry retries quickly. An attempt a kill interrupts counts, so on a
// loaded machine, where a child may be killed before it finishes a single
// step, one step can lose an attempt to several kills in a row; 20 attempts
// keep the injected failure plus a run of such kills (15 in the bounded
// test) from exhausting a step that must complete.
var fastRetry = &flow.RetryPolicy{
	MaxAttempts: 20, InitialInterval: 10 * time.Millisecond, Coefficient: 2,
	MaxInterval: 50 * time.Millisecond, Jitter: 0.2,
}

var (
	stepS1 = flow.Step[stepIn, int]{
		Name: "s1", Retry: fastRetry, Compensate: undo,
		Run: func(ctx context.Context, in stepIn) (int, error) {
			if err := work(ctx); err != nil {
				return 0, err
			}
			return in.N*10 + 1, nil
		},
	}
	stepS2 = flow.Step[stepIn, int]{
		Name: "s2", Retry: fastRetry, Compensate: undo,
		Run: func(ctx context.Context, in stepIn) (int, error) {
			if err := work(ctx); err != nil {
				return 0, err
			}
			return in.V * 3, nil
		},
	}
	stepS3 = flow.Step[stepIn, int]{
		Name: "s3", Retry: fastRetry,
		Run: func(ctx context.Context, in stepIn) (int, error) {
			if err := work(ctx); err != nil {
				return 0, err
			}
			if in.Fail {
				return 0, flow.Permanent(errors.New(errS3))
			}
			return in.V + 7, nil
		},
	}
	sagaWorkflow = flow.Workflow[sagaIn, sagaOut]{
		Name: "crash_saga",
		Run: func(wc flow.Context, in sagaIn) (sagaOut, error) {
			v1, err := flow.Do(wc, stepS1, stepIn{N: in.N})
			if err != nil {
				return sagaOut{}, err
			}
			v2, err := flow.Do(wc, stepS2, stepIn{N: in.N, V: v1})
			if err != nil {
				return sagaOut{}, err
			}
			v3, err := flow.Do(wc, stepS3, stepIn{N: in.N, V: v2, Fail: in.Fail})
			if err != nil {
				return sagaOut{}, err
			}
			return sagaOut{S1: v1, S2: v2, S3: v3}, nil
		},
	}
)

// runID names run n of the crash test; runNumber inverts it.
func runID(n int) string { return fmt.Sprintf("run-%04d", n) }

func runNumber(id string) (int, error) {
	var n int
	_, err := fmt.Sscanf(id, "run-%d", &n)
	return n, err
}

// childOptions are the SQLite options of every child.
var childOptions = &flowsqlite.Options{BusyTimeout: shortBusy}

// childConfig is the engine configuration of every child: short leases so
// that the runs of a killed child are taken over quickly (with childOptions'
// short busy timeout, which such leases need).
func childConfig(inc int, ledger *ledgerWriter, log *slog.Logger) *flow.Config {
	return &flow.Config{
		Queues:            map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 8}},
		LeaseTimeout:      time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		RescueInterval:    200 * time.Millisecond,
		PollInterval:      20 * time.Millisecond,
		DefaultRetry:      *fastRetry,
		Logger:            log,
		WorkerID:          "child-" + strconv.Itoa(inc),
		Intercept:         ledger.intercept,
	}
}

// workerEnv is what a worker process reads from its environment: its
// incarnation, its ledger, a logger, and a context that SIGTERM ends.
type workerEnv struct {
	name string
	inc  int
	lw   *ledgerWriter
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
}

// newWorkerEnv reads the environment of the worker process name; when it is
// bad, it prints why and returns nil and the exit code.
func newWorkerEnv(name string) (*workerEnv, int) {
	c := &workerEnv{name: name}
	var err error
	if c.inc, err = strconv.Atoi(os.Getenv(envInc)); err != nil {
		return nil, c.fail("bad %s: %v", envInc, err)
	}
	if c.lw, err = openLedger(os.Getenv(envLedger), c.inc); err != nil {
		return nil, c.fail("%v", err)
	}
	c.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c.ctx, c.stop = signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	return c, 0
}

// fail prints a failure for the parent and gives the exit code.
func (c *workerEnv) fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, c.name+": "+format+"\n", args...)
	return 2
}

func (c *workerEnv) close() {
	c.stop()
	c.lw.f.Close()
}

// childMain is a worker process: it works the shared database until it is
// killed, or in drain mode until no run is left to do.
func childMain() int {
	c, code := newWorkerEnv("crash child")
	if c == nil {
		return code
	}
	defer c.close()
	inc, lw, log, ctx, fail := c.inc, c.lw, c.log, c.ctx, c.fail
	// envDB names one file, or the files of a shard set, comma-separated.
	e, err := flowsqlite.OpenShards(ctx, strings.Split(os.Getenv(envDB), ","), childConfig(inc, lw, log), childOptions)
	if err != nil {
		return fail("open: %v", err)
	}
	defer e.Close()
	if err := flow.RegisterSafely(e, sagaWorkflow); err != nil {
		return fail("register: %v", err)
	}
	return workChild(ctx, e, fail)
}

// workChild starts e, prints "ready" for the parent, and works until ctx
// ends (SIGTERM) or, in the draining child (envDrain), until no run is left
// unfinished; fail reports a failure and gives the exit code.
func workChild(ctx context.Context, e *flow.Engine, fail func(format string, args ...any) int) int {
	return workChildUntil(ctx, e, fail, 0)
}

// workChildUntil is workChild whose draining child also waits until at
// least finished runs completed or failed (runs another child is still
// enqueueing are not there yet).
func workChildUntil(ctx context.Context, e *flow.Engine, fail func(format string, args ...any) int, finished int64) int {
	if err := e.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return 0
		}
		return fail("start: %v", err)
	}
	fmt.Println("ready")
	drain := os.Getenv(envDrain) == "1"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return stopEngine(e)
		case <-tick.C:
		}
		if !drain {
			continue
		}
		counts, err := e.CountRuns(ctx)
		if err != nil {
			return fail("count runs: %v", err)
		}
		if counts[flow.StatusPending]+counts[flow.StatusRunning]+counts[flow.StatusWaiting]+counts[flow.StatusCompensating] == 0 &&
			counts[flow.StatusCompleted]+counts[flow.StatusFailed] >= finished {
			return stopEngine(e)
		}
	}
}

func stopEngine(e *flow.Engine) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "crash child: stop: %v\n", err)
		return 3
	}
	return 0
}

// ledgerWriter appends one fsynced line per event of a step or compensation
// attempt to a file the engine does not own:
//
//	<incarnation> <kind> <run> <step> <attempt>
//
// kind is start, done or fail for a step attempt, comp-start, comp-done or
// comp-fail for a compensation attempt. "start" is written after the
// engine recorded the attempt's begin and before the body runs; "done"
// after the body returned and before the engine commits its checkpoint.
//
// A child started with envHold=1 parks its first step attempt after its
// "start" line until it is killed (or 30s pass), so that the parent, which
// waits for that line (harness.killInFlight), kills it with a run certainly
// in flight: a random kill moment alone can miss every run on a fast
// machine, and then the test proves nothing.
type ledgerWriter struct {
	mu     sync.Mutex
	f      *os.File
	inc    int
	hold   bool
	parked atomic.Bool
}

func openLedger(path string, inc int) (*ledgerWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &ledgerWriter{f: f, inc: inc, hold: os.Getenv(envHold) == "1"}, nil
}

func (l *ledgerWriter) record(kind string, info flow.AttemptInfo) error {
	line := fmt.Sprintf("%d %s %s %s %d\n", l.inc, kind, info.RunID, info.Step, info.Attempt)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(line); err != nil {
		return err
	}
	return l.f.Sync()
}

// intercept writes the ledger around every attempt and injects the
// transient failures.
func (l *ledgerWriter) intercept(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
	prefix := ""
	if info.Compensation {
		prefix = "comp-"
	}
	if err := l.record(prefix+"start", info); err != nil {
		// Not recorded means not run: the oracle must see every execution.
		return fmt.Errorf("ledger: %w", err)
	}
	if l.hold && !info.Compensation && l.parked.CompareAndSwap(false, true) {
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
	}
	n, _ := runNumber(info.RunID)
	var err error
	switch {
	case info.Attempt == 1 && !info.Compensation && info.Step == "s2" && transientS2(n):
		err = errors.New("injected transient failure")
	case info.Attempt == 1 && info.Compensation && info.Step == "s1" && transientCompS1(n):
		err = errors.New("injected transient compensation failure")
	default:
		err = call(ctx)
	}
	kind := "done"
	if err != nil {
		kind = "fail"
	}
	if lerr := l.record(prefix+kind, info); lerr != nil && err == nil {
		return fmt.Errorf("ledger: %w", lerr)
	}
	return err
}
