package engine

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// slowHeartbeats is a store whose heartbeats take longer than the
// heartbeat interval, as on a slow or unreachable database, and which
// records when they begin and when runs finish.
type slowHeartbeats struct {
	store.Store
	delay time.Duration

	mu       sync.Mutex
	beats    map[string][]time.Time // by run, when each heartbeat began
	finished map[string]time.Time
}

func (s *slowHeartbeats) Write(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Write(ctx, func(tx store.Tx) error { return fn(slowHeartbeatTx{Tx: tx, s: s}) })
}

type slowHeartbeatTx struct {
	store.Tx
	s *slowHeartbeats
}

func (t slowHeartbeatTx) RunHeartbeat(ctx context.Context, l store.Lease, expiresAt, now int64) (bool, error) {
	t.s.mu.Lock()
	t.s.beats[l.RunID] = append(t.s.beats[l.RunID], time.Now())
	t.s.mu.Unlock()
	time.Sleep(t.s.delay)
	return t.Tx.RunHeartbeat(ctx, l, expiresAt, now)
}

func (t slowHeartbeatTx) RunFinish(ctx context.Context, l store.Lease, p store.RunFinishParams) error {
	err := t.Tx.RunFinish(ctx, l, p)
	if err == nil {
		t.s.mu.Lock()
		t.s.finished[l.RunID] = time.Now()
		t.s.mu.Unlock()
	}
	return err
}

// TestNoHeartbeatAfterTheExecutionEnded: when a heartbeat outlasts the
// interval, the next tick is ready by the time the execution ends; the
// heartbeat loop must stop rather than start another heartbeat, which
// would hold the end of the execution (and an engine's Stop) for one more
// slow write. Before the fix select chose between the two at random, so
// that a run paid for one more heartbeat with a chance of one in two, for
// two more with one in four: among 20 runs, some run does.
func TestNoHeartbeatAfterTheExecutionEnded(t *testing.T) {
	t.Parallel()
	base, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "h.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { base.Close() })
	s := &slowHeartbeats{Store: base, delay: 60 * time.Millisecond, beats: make(map[string][]time.Time), finished: make(map[string]time.Time)}
	e, err := New(s, Config{
		Queues: map[string]int{"b": 1}, PollInterval: 10 * time.Millisecond, // one at a time: heartbeats queue behind no other run's
		LeaseTimeout: 5 * time.Second, HeartbeatInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(Workflow{Key: jobKey, Run: func(rc *RunContext, _ []byte) ([]byte, error) {
		time.Sleep(100 * time.Millisecond) // heartbeats run meanwhile
		return nil, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	const runs = 20
	for i := range runs {
		insertElsewhere(t, s, fmt.Sprintf("r%d", i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.finished)
		s.mu.Unlock()
		if n == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs finished after 10s", n, runs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil { // waits for every execution's end
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// One heartbeat may begin just after its run finished: one whose tick
	// came before the end, queued behind the finish for the database. One
	// that began later than that heartbeat's delay began after the end.
	late := 0
	for id, at := range s.finished {
		for _, b := range s.beats[id] {
			if b.After(at.Add(s.delay + 5*time.Millisecond)) {
				late++
			}
		}
	}
	if late > 0 {
		t.Errorf("%d heartbeats began after their executions ended", late)
	}
}
