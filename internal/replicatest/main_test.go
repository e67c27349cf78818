package replicatest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// Environment of the engine process. The test binary re-executes itself
// with envChild=1; TestMain then runs the engine instead of the tests.
const (
	envChild   = "FLOWLITE_REPLICA_CHILD"   // "1": run as the engine process
	envDB      = "FLOWLITE_REPLICA_DB"      // database file
	envMode    = "FLOWLITE_REPLICA_MODE"    // a setUp
	envReplica = "FLOWLITE_REPLICA_DIR"     // replica directory (in-process)
	envSync    = "FLOWLITE_REPLICA_SYNC"    // sync interval
	envRate    = "FLOWLITE_REPLICA_RATE"    // runs enqueued per second
	envWorkers = "FLOWLITE_REPLICA_WORKERS" // goroutines that enqueue
)

// setUp is who replicates the file.
type setUp string

const (
	inProcess   setUp = "in-process"   // flowsqlite.Options.Replication
	sideProcess setUp = "side-process" // a litestream process beside the engine
	// control: a litestream process beside an engine that checkpoints
	// anyway (Options.Checkpoints: CheckpointsByEngine), the set-up issue 26
	// measured.
	control setUp = "side-process, engine checkpoints"
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// work is the job the engine process enqueues and works: it does nothing,
// so that the enqueue rate, not the work, loads the file.
var work = flow.Job[int]{Name: "replicated_noop", Handler: func(context.Context, int) error { return nil }}

// childMain is the engine process: it opens the file as the set-up says,
// works it, and enqueues runs at the rate asked for, printing "ack <run
// ID>" as soon as each Enqueue returned (the run committed), until it is
// killed.
func childMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "replica child: "+format+"\n", args...)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	interval, err := time.ParseDuration(os.Getenv(envSync))
	if err != nil {
		return fail("bad %s: %v", envSync, err)
	}
	rate, err := strconv.Atoi(os.Getenv(envRate))
	if err != nil || rate <= 0 {
		return fail("bad %s: %q", envRate, os.Getenv(envRate))
	}
	workers, err := strconv.Atoi(os.Getenv(envWorkers))
	if err != nil || workers <= 0 {
		workers = 4
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var opts *flowsqlite.Options
	switch setUp(os.Getenv(envMode)) {
	case inProcess:
		opts = &flowsqlite.Options{Replication: &flowlitestream.Replication{URL: os.Getenv(envReplica), SyncInterval: interval, Logger: log}}
	case sideProcess:
		opts = &flowsqlite.Options{Checkpoints: flowsqlite.CheckpointsByLitestream}
	case control:
		opts = &flowsqlite.Options{Checkpoints: flowsqlite.CheckpointsByEngine}
	default:
		return fail("bad %s: %q", envMode, os.Getenv(envMode))
	}
	e, err := flowsqlite.Open(ctx, os.Getenv(envDB), &flow.Config{Logger: log}, opts)
	if err != nil {
		return fail("open: %v", err)
	}
	defer e.Close()
	if err := flow.RegisterJobSafely(e, work); err != nil {
		return fail("register: %v", err)
	}
	if err := e.Start(ctx); err != nil {
		return fail("start: %v", err)
	}
	var mu sync.Mutex
	say := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = os.Stdout.WriteString(line)
	}
	if setUp(os.Getenv(envMode)) == inProcess {
		// A replica that never synced holds nothing to restore: the load
		// starts once it holds the file, as a user's would have long before.
		if err := waitFirstSync(ctx, e, 30*time.Second); err != nil {
			return fail("%v", err)
		}
	}
	say("ready\n")

	// A pacer hands out numbers at the rate; the workers enqueue them, so
	// that one slow commit does not hold the rate back.
	due := make(chan int)
	go func() {
		defer close(due)
		began := time.Now()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for sent := 0; ; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for want := int(time.Since(began).Seconds() * float64(rate)); sent < want; sent++ {
				select {
				case due <- sent:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for n := range due {
				r, err := flow.Enqueue(ctx, e, work, n, nil)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				say("ack " + r.ID() + "\n")
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			return fail("enqueue: %v", err)
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(stopCtx); err != nil {
		return fail("stop: %v", err)
	}
	return 0
}

// waitFirstSync waits until the engine's replica acknowledged its first
// write (the snapshot of the file).
func waitFirstSync(ctx context.Context, e *flow.Engine, timeout time.Duration) error {
	return waitUntil("the replica's first sync", timeout, func() (bool, error) {
		h, err := e.FileHealth(ctx)
		if err != nil {
			return false, fmt.Errorf("file health: %w", err)
		}
		return h.Replication != nil && !h.Replication.LastSync.IsZero(), nil
	})
}

// waitUntil polls done every 20ms until it holds or fails, or timeout
// passed, which is an error naming what.
func waitUntil(what string, timeout time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
