//go:build linux

package netfault

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/flowlite/flowlite/internal/pgtest"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// Environment of a worker process. The test starts this binary again in a
// namespace with envWorker set; TestMain then runs a worker, not the tests.
const (
	envWorker = "FLOWLITE_NETFAULT_WORKER" // the worker's ID
	envDSN    = "FLOWLITE_NETFAULT_DSN"    // the server, through the worker's link
	envSchema = "FLOWLITE_NETFAULT_SCHEMA" // flowlite's schema, and the effects table's
	envLedger = "FLOWLITE_NETFAULT_LEDGER" // the attempt ledger file
)

func TestMain(m *testing.M) {
	if id := os.Getenv(envWorker); id != "" {
		os.Exit(workerMain(id))
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.OwnDatabase()))
}

// The workflow: a step s0 whose checkpoint commits with the engine's next
// write (Run), then three steps that run in the engine's transaction
// (RunTx) and each insert one row into the effects table there, so that a
// step's effect commits exactly when its checkpoint does. s0 is slow in
// one run of slowEvery, so that an execution of the cut worker can outlive
// a short cut and come back with a stale checkpoint. s1 and s2 have
// compensations; s3 fails for good when the input says so (a third of the
// runs), which rolls the run back.

type sagaIn struct {
	N    int  `json:"n"`
	Fail bool `json:"fail"`
	Slow bool `json:"slow"`
}

type stepIn struct {
	N    int  `json:"n"`
	Fail bool `json:"fail"`
	Slow bool `json:"slow"`
}

const slowEvery = 12

// slowS0 says whether run n's s0 is slow.
func slowS0(n int) bool { return n%slowEvery == 0 }

// A slow s0 takes longer than the short cut, and so outlives it.
const (
	slowS0Min = 8 * time.Second
	slowS0Max = 10 * time.Second
)

// sagaFails says whether run n's s3 fails for good.
func sagaFails(n int) bool { return n%3 == 2 }

const errS3 = "s3 refused"

func runID(n int) string { return fmt.Sprintf("run-%04d", n) }

// pause sleeps a little, like a step that does some work between its
// statements: the engine's transaction, with the run's row locked, stays
// open meanwhile, so a cut often catches a worker inside one.
func pause(ctx context.Context, minMs, maxMs int) error {
	t := time.NewTimer(time.Duration(minMs+rand.IntN(maxMs-minMs+1)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// newSaga returns the workflow, whose steps record their effects in
// schema.effects as worker.
func newSaga(schema, worker string) flow.Workflow[sagaIn, int] {
	effect := func(ctx context.Context, tx *sql.Tx, fail bool) (int, error) {
		info, ok := flow.Attempt(ctx)
		if !ok {
			return 0, errors.New("step body without attempt info")
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO "+schema+".effects (run_id, step, attempt, worker) VALUES ($1, $2, $3, $4)",
			info.RunID, info.Step, info.Attempt, worker)
		if err != nil {
			return 0, fmt.Errorf("record effect: %w", err)
		}
		if err := pause(ctx, 20, 80); err != nil {
			return 0, err
		}
		if fail {
			return 0, flow.Permanent(errors.New(errS3))
		}
		return info.Attempt, nil
	}
	undo := func(ctx context.Context, _ stepIn, _ int) error { return pause(ctx, 5, 20) }
	s0 := flow.Step[stepIn, int]{Name: "s0",
		Run: func(ctx context.Context, in stepIn) (int, error) {
			lo, hi := 5, 15
			if in.Slow {
				lo, hi = int(slowS0Min.Milliseconds()), int(slowS0Max.Milliseconds())
			}
			if err := pause(ctx, lo, hi); err != nil {
				return 0, err
			}
			return 0, nil
		}}
	s1 := flow.Step[stepIn, int]{Name: "s1", Compensate: undo,
		RunTx: func(ctx context.Context, tx *sql.Tx, in stepIn) (int, error) { return effect(ctx, tx, false) }}
	s2 := flow.Step[stepIn, int]{Name: "s2", Compensate: undo,
		RunTx: func(ctx context.Context, tx *sql.Tx, in stepIn) (int, error) { return effect(ctx, tx, false) }}
	s3 := flow.Step[stepIn, int]{Name: "s3",
		RunTx: func(ctx context.Context, tx *sql.Tx, in stepIn) (int, error) { return effect(ctx, tx, in.Fail) }}
	return flow.Workflow[sagaIn, int]{
		Name: "netfault_saga",
		Run: func(wc flow.Context, in sagaIn) (int, error) {
			total := 0
			for _, s := range []flow.Step[stepIn, int]{s0, s1, s2, s3} {
				v, err := flow.Do(wc, s, stepIn{N: in.N, Fail: in.Fail && s.Name == "s3", Slow: in.Slow && s.Name == "s0"})
				if err != nil {
					return 0, err
				}
				total += v
			}
			return total, nil
		},
	}
}

// Worker engine timings: short leases, so that a cut worker's runs are
// rescued within seconds.
const (
	leaseTimeout      = 2 * time.Second
	heartbeat         = 400 * time.Millisecond
	rescueEvery       = 300 * time.Millisecond
	workerStopTimeout = 5 * time.Second
)

// workerMain is a worker process: it works the schema until SIGTERM.
func workerMain(id string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "worker %s: "+format+"\n", append([]any{id}, args...)...)
		return 2
	}
	lw, err := openLedger(os.Getenv(envLedger), id)
	if err != nil {
		return fail("%v", err)
	}
	defer lw.f.Close()
	schema := os.Getenv(envSchema)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg := &flow.Config{
		Queues:            map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 8}},
		LeaseTimeout:      leaseTimeout,
		HeartbeatInterval: heartbeat,
		RescueInterval:    rescueEvery,
		PollInterval:      100 * time.Millisecond,
		CleanInterval:     -1,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		WorkerID:          id,
		Intercept:         lw.intercept,
	}
	// Opening may meet a link the test has not finished setting up, or cut.
	var e *flow.Engine
	for attempt := 1; ; attempt++ {
		e, err = flowpg.Open(ctx, os.Getenv(envDSN), cfg, &flowpg.Options{Schema: schema})
		if err == nil || attempt == 10 || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return fail("open: %v", err)
	}
	defer e.Close()
	if err := flow.RegisterSafely(e, newSaga(schema, id)); err != nil {
		return fail("register: %v", err)
	}
	if err := e.Start(ctx); err != nil {
		return fail("start: %v", err)
	}
	fmt.Println("ready")
	<-ctx.Done()
	cfg.Logger.Info("stopping")
	stopCtx, cancel := context.WithTimeout(context.Background(), workerStopTimeout)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: stop: %v\n", id, err)
		return 3 // runs interrupted: expected when the server is out of reach
	}
	return 0
}

// ledgerWriter appends one line per event of a step or compensation attempt
// to a file the workers share (O_APPEND keeps each line whole):
//
//	<worker> <kind> <run> <step> <attempt>
//
// kind is start, done or fail for a step attempt, comp-start, comp-done or
// comp-fail for a compensation attempt. "start" is written after the
// engine recorded the attempt's begin and before the body runs, "done"
// after the body returned and before the engine commits its checkpoint.
type ledgerWriter struct {
	mu sync.Mutex
	f  *os.File
	id string
}

func openLedger(path, id string) (*ledgerWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &ledgerWriter{f: f, id: id}, nil
}

func (l *ledgerWriter) record(kind string, info flow.AttemptInfo) error {
	line := fmt.Sprintf("%s %s %s %s %d\n", l.id, kind, info.RunID, info.Step, info.Attempt)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.WriteString(line)
	return err
}

func (l *ledgerWriter) intercept(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
	prefix := ""
	if info.Compensation {
		prefix = "comp-"
	}
	if err := l.record(prefix+"start", info); err != nil {
		return fmt.Errorf("ledger: %w", err) // not recorded means not run
	}
	err := call(ctx)
	kind := "done"
	if err != nil {
		kind = "fail"
	}
	if lerr := l.record(prefix+kind, info); lerr != nil && err == nil {
		return fmt.Errorf("ledger: %w", lerr)
	}
	return err
}
