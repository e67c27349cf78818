package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// awayStore is a store whose database is unavailable to reads of runs
// while away is set, and to writes while awayWrites is, as a PostgreSQL
// server is while it restarts.
type awayStore struct {
	store.Store
	away       atomic.Bool  // reads of runs fail
	awayWrites atomic.Bool  // writes fail
	reads      atomic.Int32 // reads refused
}

func (s *awayStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	if s.awayWrites.Load() {
		return fmt.Errorf("begin write: %w (dial tcp: connection refused)", flowtype.ErrUnavailable)
	}
	return s.Store.Write(ctx, fn)
}

func (s *awayStore) Reader() store.Reader { return awayReader{Reader: s.Store.Reader(), s: s} }

type awayReader struct {
	store.Reader
	s *awayStore
}

func (r awayReader) RunGet(ctx context.Context, id string) (store.Run, error) {
	if r.s.away.Load() {
		r.s.reads.Add(1)
		return store.Run{}, fmt.Errorf("read run %s: %w (dial tcp: connection refused)", id, flowtype.ErrUnavailable)
	}
	return r.Reader.RunGet(ctx, id)
}

// Wait rides out a database that is unavailable for a while: the run goes
// on once it is back, and so does the wait. When ctx ends meanwhile, the
// error says both.
func TestWaitThroughUnavailableDatabase(t *testing.T) {
	t.Parallel()
	s := openTestStore(t)
	as := &awayStore{Store: s}
	e, err := New(as, Config{PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	err = e.Register(Workflow{Key: jobKey, Run: func(*RunContext, []byte) ([]byte, error) {
		<-release
		return []byte(`"done"`), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	startTestEngine(t, e)
	// Runs before Stop's cleanup: a failed test leaves no body blocked.
	let := sync.OnceFunc(func() { close(release) })
	t.Cleanup(let)
	ctx := t.Context()
	if _, err := e.StartRun(ctx, StartParams{ID: "r", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}

	// Unavailable until ctx ends: ctx's error, and the database's.
	as.away.Store(true)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = e.Wait(short, "r")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, flowtype.ErrUnavailable) {
		t.Fatalf("Wait while the database is away until ctx ends = %v, want the deadline and ErrUnavailable", err)
	}

	// Unavailable for a while, then back: the wait goes on to the outcome.
	done := make(chan error, 1)
	go func() {
		run, err := e.Wait(ctx, "r")
		if err == nil && run.Status != flowtype.StatusCompleted {
			err = fmt.Errorf("run %s, want completed", run.Status)
		}
		done <- err
	}()
	for as.reads.Load() < 5 {
		time.Sleep(5 * time.Millisecond)
	}
	let()
	time.Sleep(50 * time.Millisecond)
	as.away.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait through an unavailable database: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return 10s after the database came back")
	}
}

// A run parked by a sleep is waiting and leased by no one, so that any
// engine may pick it up when it is due (moved from flow's
// TestSleepIsDurableAndKeepsItsDueTime, which read the lease owner from
// the raw table).
func TestSleepingRunHoldsNoLease(t *testing.T) {
	t.Parallel()
	s := openTestStore(t)
	e, err := New(s, Config{PollInterval: 10 * time.Millisecond, WorkerID: "sleeper", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Register(Workflow{Key: jobKey, Run: func(rc *RunContext, _ []byte) ([]byte, error) {
		if err := rc.Sleep(24 * time.Hour); err != nil {
			return nil, err
		}
		return []byte(`"woke"`), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	startTestEngine(t, e)
	if _, err := e.StartRun(t.Context(), StartParams{ID: "r", Workflow: jobKey, Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var run store.Run
	for {
		if run, err = s.Reader().RunGet(t.Context(), "r"); err != nil {
			t.Fatal(err)
		}
		if run.Status == flowtype.StatusWaiting || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if run.Status != flowtype.StatusWaiting {
		t.Fatalf("run is %s after 10s, want waiting", run.Status)
	}
	if run.LeaseOwner != "" || run.LeaseExpiresAt != 0 {
		t.Errorf("sleeping run is leased by %q until %d, want no lease", run.LeaseOwner, run.LeaseExpiresAt)
	}
}
