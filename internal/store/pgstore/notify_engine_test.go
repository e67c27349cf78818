package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// These tests run two engines on one schema, as two machines would: A
// works queue "a" and B queue "b", each with its own store (its own pool
// and listener), and both poll only every 10 seconds, so a run started on
// A in queue b is claimed by B within the test's bounds only if A's start
// woke it.

const slowPoll = 10 * time.Second

var hello = flowtype.WorkflowKey{Name: "hello", Version: 1}

// notifierless hides a store's Notifier: the engine over it polls only.
type notifierless struct{ store.Store }

type enginePair struct {
	a, b *engine.Engine
}

// startPair starts engines A and B on one fresh schema; bodyB runs the
// workflow on B (A never runs it: it does not work queue b).
func startPair(tb testing.TB, poll time.Duration, notify bool, bodyB engine.WorkflowFunc) enginePair {
	tb.Helper()
	schema := freshSchema()
	newEngine := func(queue string, body engine.WorkflowFunc) *engine.Engine {
		s, err := pgstore.Open(context.Background(), needPG(tb), pgstore.Options{Schema: schema, MaxConns: 4})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		var st store.Store = s
		if !notify {
			st = notifierless{s}
		}
		e, err := engine.New(st, engine.Config{
			Queues:       map[string]int{queue: 4},
			PollInterval: poll,
			Logger:       slog.New(slog.DiscardHandler),
			WorkerID:     queue,
		})
		if err != nil {
			tb.Fatal(err)
		}
		if err := e.Register(engine.Workflow{Key: hello, Run: body}); err != nil {
			tb.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.Stop(ctx); err != nil {
				tb.Error(err)
			}
		})
		return e
	}
	a := newEngine("a", func(*engine.RunContext, []byte) ([]byte, error) {
		return nil, errors.New("engine A ran a run of queue b")
	})
	b := newEngine("b", bodyB)
	return enginePair{a: a, b: b}
}

// A run started through engine A in a queue only engine B works is claimed
// by B at once, not at B's next poll.
func TestEngineWokenByOtherEngine(t *testing.T) {
	t.Parallel()
	needPG(t)
	ran := make(chan string, 10)
	p := startPair(t, slowPoll, true, func(rc *engine.RunContext, _ []byte) ([]byte, error) {
		ran <- rc.RunID()
		return []byte(`"ok"`), nil
	})
	// Past B's first poll, so that only a wake can make it look again.
	time.Sleep(500 * time.Millisecond)
	for i := range 3 {
		start := time.Now()
		st, err := p.a.StartRun(t.Context(), engine.StartParams{Workflow: hello, Queue: "b", Input: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-ran:
			if id != st.Run.ID {
				t.Fatalf("B ran %s, want %s", id, st.Run.ID)
			}
			if d := time.Since(start); d >= 2*time.Second {
				t.Fatalf("run %d: B started it %s after A did, want < 2s", i, d)
			}
			t.Logf("run %d: started on A, running on B after %s", i, time.Since(start))
		case <-time.After(2 * time.Second):
			t.Fatalf("run %d: B did not start it within 2s (its poll interval is %s)", i, slowPoll)
		}
	}
}

// A cancellation requested through engine A reaches the run executing on
// engine B at once, not at B's next heartbeat (10s here).
func TestEngineCancelReachesOtherEngine(t *testing.T) {
	t.Parallel()
	needPG(t)
	running := make(chan struct{}, 1)
	stopped := make(chan struct{}, 1)
	p := startPair(t, slowPoll, true, func(rc *engine.RunContext, _ []byte) ([]byte, error) {
		return rc.Step(engine.Step{Name: "block", Run: func(ctx context.Context, _ *sql.Tx) ([]byte, error) {
			running <- struct{}{}
			<-ctx.Done()
			stopped <- struct{}{}
			return nil, ctx.Err()
		}})
	})
	st, err := p.a.StartRun(t.Context(), engine.StartParams{Workflow: hello, Queue: "b", Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(5 * time.Second):
		t.Fatal("B did not start the run")
	}
	start := time.Now()
	if err := p.a.Cancel(t.Context(), st.Run.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
		t.Logf("cancelled on A, step on B stopped after %s", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("the step on B was not cancelled within 2s (its heartbeat interval is 10s)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	run, err := p.b.Wait(ctx, st.Run.ID) // A's Wait would see it at A's next poll
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != flowtype.StatusCancelled {
		t.Fatalf("run is %s, want cancelled", run.Status)
	}
}

// BenchmarkWakeLatency measures start (through engine A) to workflow body
// (on engine B) for runs started one at a time, and reports the p50 and
// p99 of that latency: with notifications (and a 10s poll, which they
// make irrelevant) and, for comparison, with the default 200ms poll alone.
//
//	FLOWLITE_PG_TEST=1 go test ./internal/store/pgstore -run '^$' -bench WakeLatency -benchtime 200x
func BenchmarkWakeLatency(b *testing.B) {
	for _, c := range []struct {
		name   string
		poll   time.Duration
		notify bool
	}{
		{"notify", slowPoll, true},
		{"poll200ms", 200 * time.Millisecond, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			needPG(b)
			var mu sync.Mutex
			ranAt := make(map[string]time.Time)
			ran := make(chan struct{}, 1)
			p := startPair(b, c.poll, c.notify, func(rc *engine.RunContext, _ []byte) ([]byte, error) {
				now := time.Now()
				mu.Lock()
				if _, seen := ranAt[rc.RunID()]; !seen {
					ranAt[rc.RunID()] = now
				}
				mu.Unlock()
				select {
				case ran <- struct{}{}:
				default:
				}
				return nil, nil
			})
			time.Sleep(500 * time.Millisecond) // past B's first poll and its listener's start
			var lat []time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				st, err := p.a.StartRun(context.Background(), engine.StartParams{Workflow: hello, Queue: "b", Input: []byte(`{}`)})
				if err != nil {
					b.Fatal(err)
				}
				for {
					mu.Lock()
					at, ok := ranAt[st.Run.ID]
					mu.Unlock()
					if ok {
						lat = append(lat, at.Sub(start))
						break
					}
					select {
					case <-ran:
					case <-time.After(30 * time.Second):
						b.Fatalf("run %s not started on B within 30s", st.Run.ID)
					}
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
			b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
			b.Logf("%s: %d runs, start on A → body on B: p50 %s, p99 %s, max %s",
				c.name, len(lat), pct(0.50), pct(0.99), lat[len(lat)-1])
		})
	}
}

// BenchmarkInsertWakes measures what wakes cost writers: concurrent
// single-run inserts, each its own transaction, with wakes (and a
// listener receiving them) and with Options.NoWakes. A notifying commit
// holds the server's notification queue lock, so the difference grows
// with the number of concurrent writers.
//
//	FLOWLITE_PG_TEST=1 go test ./internal/store/pgstore -run '^$' -bench InsertWakes -benchtime 3000x
func BenchmarkInsertWakes(b *testing.B) {
	for _, c := range []struct {
		name    string
		noWakes bool
	}{{"wakes", false}, {"nowakes", true}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := pgstore.Open(context.Background(), needPG(b), pgstore.Options{Schema: freshSchema(), MaxConns: 8, NoWakes: c.noWakes})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithCancel(context.Background())
			var received sync.WaitGroup
			if !c.noWakes {
				listening := make(chan struct{})
				var once sync.Once
				received.Go(func() {
					_ = s.Listen(ctx, func(store.Wake) { once.Do(func() { close(listening) }) })
				})
				<-listening
			}
			var n atomicCounter
			b.SetParallelism(4) // 4 × GOMAXPROCS writers
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("r%d", n.next())
					if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, id, "q", base) }); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
			cancel()
			received.Wait()
		})
	}
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}
