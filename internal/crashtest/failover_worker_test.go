package crashtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// The workflow of the failover tests (failover_test.go) and the worker
// process that works it (envChild=childFailover).
//
// A failover run: step f1, then flow.Receive of the signal "go" the parent
// sends (payload 7n), then step f2, which works long (a second or more)
// for every fourth run, so that some bodies are running when the primary
// dies, then step f3. Every output is a function of the input and the
// signal, so the parent can check each run's.

const (
	childFailover  = "failover"
	failoverSignal = "go"
)

type failoverIn struct {
	N      int `json:"n"`
	LongMs int `json:"long_ms"` // f2's extra work
}

type failoverF2In struct {
	V      int `json:"v"`
	Sig    int `json:"sig"`
	LongMs int `json:"long_ms"`
}

type failoverOut struct {
	F1  int `json:"f1"`
	Sig int `json:"sig"`
	F2  int `json:"f2"`
	F3  int `json:"f3"`
}

func failoverPayload(n int) int { return n * 7 }

// wantFailover is run n's output.
func wantFailover(n int) failoverOut {
	f1 := n*10 + 1
	f2 := f1 + failoverPayload(n)
	return failoverOut{F1: f1, Sig: failoverPayload(n), F2: f2, F3: f2 * 2}
}

// failoverLong is f2's extra work for run n.
func failoverLong(n int) int {
	if n%4 != 3 {
		return 0
	}
	return 800 + (n*37)%1700
}

// sleepCtx sleeps d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

var (
	foF1 = flow.Step[int, int]{Name: "f1", Retry: fastRetry, Run: func(ctx context.Context, n int) (int, error) {
		if err := work(ctx); err != nil {
			return 0, err
		}
		return n*10 + 1, nil
	}}
	foF2 = flow.Step[failoverF2In, int]{Name: "f2", Retry: fastRetry, Run: func(ctx context.Context, in failoverF2In) (int, error) {
		if err := sleepCtx(ctx, time.Duration(in.LongMs)*time.Millisecond); err != nil {
			return 0, err
		}
		if err := work(ctx); err != nil {
			return 0, err
		}
		return in.V + in.Sig, nil
	}}
	foF3 = flow.Step[int, int]{Name: "f3", Retry: fastRetry, Run: func(ctx context.Context, v int) (int, error) {
		if err := work(ctx); err != nil {
			return 0, err
		}
		return v * 2, nil
	}}
	failoverWorkflow = flow.Workflow[failoverIn, failoverOut]{
		Name: "crash_failover",
		Run: func(wc flow.Context, in failoverIn) (failoverOut, error) {
			f1, err := flow.Do(wc, foF1, in.N)
			if err != nil {
				return failoverOut{}, err
			}
			sig, err := flow.Receive[int](wc, failoverSignal, 0)
			if err != nil {
				return failoverOut{}, err
			}
			f2, err := flow.Do(wc, foF2, failoverF2In{V: f1, Sig: sig, LongMs: in.LongMs})
			if err != nil {
				return failoverOut{}, err
			}
			f3, err := flow.Do(wc, foF3, f2)
			if err != nil {
				return failoverOut{}, err
			}
			return failoverOut{F1: f1, Sig: sig, F2: f2, F3: f3}, nil
		},
	}
)

// failoverLedger appends one fsynced line per begin and end of a step
// attempt to the ledger file, with the wall clock:
//
//	<unix ns> <worker> <kind> <run> <step> <attempt>
//
// kind is start (the engine recorded the attempt's begin; the body is
// about to run) or done or fail (the body returned; the engine has not
// committed its checkpoint yet). Lines of all workers go to one file
// opened with O_APPEND, so their order is the order they were written in.
type failoverLedger struct {
	mu  sync.Mutex
	f   *os.File
	inc int
}

func (l *failoverLedger) record(kind string, info flow.AttemptInfo) error {
	line := fmt.Sprintf("%d %d %s %s %s %d\n", time.Now().UnixNano(), l.inc, kind, info.RunID, info.Step, info.Attempt)
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(line); err != nil {
		return err
	}
	return l.f.Sync()
}

func (l *failoverLedger) intercept(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
	if err := l.record("start", info); err != nil {
		return fmt.Errorf("ledger: %w", err) // not recorded means not run
	}
	err := call(ctx)
	kind := "done"
	if err != nil {
		kind = "fail"
	}
	if lerr := l.record(kind, info); lerr != nil && err == nil {
		return fmt.Errorf("ledger: %w", lerr)
	}
	return err
}

// failoverChildMain is a failover worker: it opens an engine on the
// multi-host DSN envPGDSN names and works runs until SIGTERM. It is never
// restarted: finding the new primary is its engine's business.
func failoverChildMain() int {
	exitWithParent()
	inc, err := strconv.Atoi(os.Getenv(envInc))
	if err != nil {
		fmt.Fprintf(os.Stderr, "failover child: bad %s: %v\n", envInc, err)
		return 2
	}
	f, err := os.OpenFile(os.Getenv(envLedger), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "failover child: open ledger: %v\n", err)
		return 2
	}
	defer f.Close()
	lw := &failoverLedger{f: f, inc: inc}
	c, code := newWorkerEnv("failover child")
	if c == nil {
		return code
	}
	defer c.close()
	cfg := failoverConfig(inc)
	cfg.Logger = c.log
	cfg.Intercept = lw.intercept
	e, err := flowpg.Open(c.ctx, os.Getenv(envPGDSN), cfg, &flowpg.Options{
		Schema: os.Getenv(envPGSchema), ApplicationName: os.Getenv(envPGApp),
	})
	if err != nil {
		return c.fail("open: %v", err)
	}
	defer e.Close()
	if err := flow.RegisterSafely(e, failoverWorkflow); err != nil {
		return c.fail("register: %v", err)
	}
	return workChild(c.ctx, e, c.fail)
}

// exitWithParent ends this worker process when its parent, the test, is
// gone: a test that runs into go test's -timeout panics without its
// cleanups, and a worker left behind would go on working (and writing
// to a ledger nobody reads) on whatever server takes the test's ports
// next, another run's.
func exitWithParent() {
	parent := os.Getppid()
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			if os.Getppid() != parent {
				os.Exit(4)
			}
		}
	}()
}

// failoverConfig is the engine configuration of failover worker inc:
// leases of 6s renewed every 300ms, as the shared workers have.
func failoverConfig(inc int) *flow.Config {
	return &flow.Config{
		Queues:            map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 16}},
		LeaseTimeout:      6 * time.Second,
		HeartbeatInterval: 300 * time.Millisecond,
		RescueInterval:    300 * time.Millisecond,
		PollInterval:      50 * time.Millisecond,
		DefaultRetry:      *fastRetry,
		WorkerID:          "child-" + strconv.Itoa(inc),
	}
}
