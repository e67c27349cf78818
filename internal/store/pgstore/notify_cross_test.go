package pgstore_test

import (
	"context"
	"errors"
	"github.com/jackc/pgx/v5"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// These tests drive two engines on one schema through the public flow API,
// as two machines would: A works queue "a" and B queue "b". The first
// three give both engines a 10-second poll (slowPoll), so that what B does
// within a couple of seconds of something done through A can only come
// from A's wake, or, for a timer, from B's own. The last one turns wakes
// off and checks that polling alone still completes everything.

// promptly bounds a wake in the tests with a slow poll: well under
// slowPoll, far over the tens of milliseconds a wake takes, for a loaded
// 2-core CI machine running with -race.
const promptly = 3 * time.Second

// pgBackend is a flow.Backend opening a pgstore.Store with opts, which
// flowpg.Options does not expose in full (NoWakes).
type pgBackend struct {
	dsn  string
	opts pgstore.Options
}

func (b pgBackend) OpenStore(ctx context.Context) (store.Opened, error) {
	s, err := pgstore.Open(ctx, b.dsn, b.opts)
	if err != nil {
		return store.Opened{}, err
	}
	return store.Opened{Store: s}, nil
}

type flowPair struct {
	a, b   *flow.Engine
	schema string
}

// startFlowPair starts flow engines A (queue a) and B (queue b) on one
// fresh schema, with cfg's timings; register registers the workflows on
// each (both engines know all of them, as a deployment's would).
func startFlowPair(t *testing.T, cfg flow.Config, noWakes bool, register func(*flow.Engine)) flowPair {
	t.Helper()
	dsn := needPG(t)
	schema := freshSchema()
	newEngine := func(queue string) *flow.Engine {
		c := cfg
		c.Queues = map[string]flow.QueueConfig{queue: {Concurrency: 4}}
		c.Logger = slog.New(slog.DiscardHandler)
		c.WorkerID = queue
		e, err := flow.New(t.Context(), pgBackend{dsn: dsn, opts: pgstore.Options{Schema: schema, MaxConns: 4, NoWakes: noWakes}}, &c)
		if err != nil {
			t.Fatal(err)
		}
		register(e)
		if err := e.Start(context.Background()); err != nil {
			e.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.Stop(ctx); err != nil {
				t.Error(err)
			}
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
		return e
	}
	return flowPair{a: newEngine("a"), b: newEngine("b"), schema: schema}
}

// waitStatus waits until run id is in status want, for at most 10s.
func waitStatus(t *testing.T, e *flow.Engine, id string, want flow.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := e.Inspect(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 10s, want %s", id, info.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// resultOn waits for the result of run id on engine e (the engine that
// executes it: its Wait returns when it settles the run, where another
// engine's would wait for its own poll), for at most d.
func resultOn[In, Out any](t *testing.T, e *flow.Engine, wf flow.Workflow[In, Out], id string, d time.Duration) (Out, error) {
	t.Helper()
	r, err := flow.Lookup(t.Context(), e, wf, id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return r.Result(ctx)
}

// A signal sent through engine A to a run waiting for it on engine B
// wakes the run on B at once: B polls only every 10s, and the run, parked
// in the database, holds no goroutine there that could see the signal.
// The wake is the RunWake that follows the signal's SignalSend.
func TestSignalFromOtherEngineWakesWaitingRun(t *testing.T) {
	t.Parallel()
	needPG(t)
	waiter := flow.Workflow[string, string]{Name: "cross_signal", Run: func(wc flow.Context, _ string) (string, error) {
		v, err := flow.Receive[string](wc, "go", 0)
		if err != nil {
			return "", err
		}
		return "got " + v, nil
	}}
	p := startFlowPair(t, flow.Config{PollInterval: slowPoll}, false, func(e *flow.Engine) { flow.Register(e, waiter) })
	for i := range 3 {
		run, err := flow.Start(t.Context(), p.a, waiter, "", &flow.StartOptions{Queue: "b"})
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, p.a, run.ID(), flow.StatusWaiting)
		// B's claimer has gone back to sleep on its 10s poll.
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		if sent, err := flow.Signal(t.Context(), p.a, run.ID(), "go", "x", nil); err != nil || !sent {
			t.Fatalf("signal: sent %v, err %v", sent, err)
		}
		out, err := resultOn(t, p.b, waiter, run.ID(), promptly)
		if err != nil {
			t.Fatalf("run %d: signalled through A, not done on B within %s (its poll interval is %s): %v", i, promptly, slowPoll, err)
		}
		if out != "got x" {
			t.Fatalf("run %d: output %q, want %q", i, out, "got x")
		}
		t.Logf("run %d: signalled through A, completed on B after %s", i, time.Since(start))
	}
}

// A run sleeping on engine B for less than B's poll interval resumes on
// time, from B's own timer: a run released until a time sooner than the
// next poll sets one (execution.releaseUntil). A sleep longer than the
// poll is found by a poll, as the engine promises, so none is tested here.
// No wake is involved: RunRelease sends none.
func TestSleepResumesOnOwnTimer(t *testing.T) {
	t.Parallel()
	needPG(t)
	const nap = time.Second
	sleeper := flow.Workflow[string, string]{Name: "cross_sleep", Run: func(wc flow.Context, _ string) (string, error) {
		if err := flow.Sleep(wc, nap); err != nil {
			return "", err
		}
		return "slept", nil
	}}
	p := startFlowPair(t, flow.Config{PollInterval: slowPoll}, false, func(e *flow.Engine) { flow.Register(e, sleeper) })
	start := time.Now()
	run, err := flow.Start(t.Context(), p.a, sleeper, "", &flow.StartOptions{Queue: "b"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := resultOn(t, p.b, sleeper, run.ID(), nap+promptly)
	if err != nil {
		t.Fatalf("a %s sleep on B did not end within %s (B's poll interval is %s): %v", nap, nap+promptly, slowPoll, err)
	}
	d := time.Since(start)
	if out != "slept" {
		t.Fatalf("output %q, want %q", out, "slept")
	}
	if d < nap {
		t.Fatalf("run completed %s after its start, before its %s sleep ended", d, nap)
	}
	t.Logf("started through A, slept %s on B, completed after %s", nap, d)
}

// A child finishing on engine A wakes its parent waiting for it on engine
// B at once (the RunWake of the parent in the child's outcome write).
func TestChildOnOtherEngineWakesParent(t *testing.T) {
	t.Parallel()
	needPG(t)
	childRunning := make(chan string, 1)
	gate := make(chan struct{})
	var openGate sync.Once
	child := flow.Workflow[string, string]{Name: "cross_child", Run: func(wc flow.Context, in string) (string, error) {
		select {
		case childRunning <- wc.RunID():
		default:
		}
		select {
		case <-gate:
		case <-wc.Done():
			return "", wc.Err()
		}
		return "child of " + in, nil
	}}
	parent := flow.Workflow[string, string]{Name: "cross_parent", Run: func(wc flow.Context, in string) (string, error) {
		c, err := flow.StartChild(wc, child, in, &flow.ChildOptions{Queue: "a"})
		if err != nil {
			return "", err
		}
		out, err := c.Result(wc)
		if err != nil {
			return "", err
		}
		return "parent got " + out, nil
	}}
	p := startFlowPair(t, flow.Config{PollInterval: slowPoll}, false, func(e *flow.Engine) {
		flow.Register(e, child)
		flow.Register(e, parent)
	})
	t.Cleanup(func() { openGate.Do(func() { close(gate) }) }) // before the engines stop
	run, err := flow.Start(t.Context(), p.a, parent, "p", &flow.StartOptions{Queue: "b"})
	if err != nil {
		t.Fatal(err)
	}
	var childID string
	select {
	case childID = <-childRunning:
	case <-time.After(10 * time.Second):
		t.Fatal("the child did not start on A within 10s")
	}
	waitStatus(t, p.a, run.ID(), flow.StatusWaiting)
	if info, err := p.a.Inspect(t.Context(), childID); err != nil || info.ParentID != run.ID() || info.Queue != "a" {
		t.Fatalf("child %s: %+v, %v; want a child of %s in queue a", childID, info, err, run.ID())
	}
	time.Sleep(100 * time.Millisecond) // B's claimer is back on its 10s poll
	start := time.Now()
	openGate.Do(func() { close(gate) })
	out, err := resultOn(t, p.b, parent, run.ID(), promptly)
	if err != nil {
		t.Fatalf("child finished on A, parent not done on B within %s (its poll interval is %s): %v", promptly, slowPoll, err)
	}
	if out != "parent got child of p" {
		t.Fatalf("output %q, want %q", out, "parent got child of p")
	}
	t.Logf("child finished on A, parent completed on B after %s", time.Since(start))
}

// With wakes turned off (Options.NoWakes: no pg_notify, no listener),
// polling alone completes what another engine asks for: a run started
// through A, a signal sent through A, and cancellations through A of a
// waiting run (whose compensation B runs when its poll finds it) and of a
// running one (which B's heartbeat finds cancelled).
func TestPollingAloneCompletesOtherEnginesWork(t *testing.T) {
	t.Parallel()
	needPG(t)
	const (
		poll  = 100 * time.Millisecond
		beat  = 200 * time.Millisecond
		bound = 3 * time.Second // 30 polls, 15 heartbeats
	)
	greeter := flow.Workflow[string, string]{Name: "poll_hello", Run: func(_ flow.Context, in string) (string, error) {
		return "hello " + in, nil
	}}
	waiter := flow.Workflow[string, string]{Name: "poll_signal", Run: func(wc flow.Context, _ string) (string, error) {
		v, err := flow.Receive[string](wc, "go", 0)
		if err != nil {
			return "", err
		}
		return "got " + v, nil
	}}
	compensated := make(chan string, 1)
	reserve := flow.Step[string, string]{
		Name: "reserve",
		Run:  func(_ context.Context, in string) (string, error) { return "seat for " + in, nil },
		Compensate: func(_ context.Context, _ string, out string) error {
			compensated <- out
			return nil
		},
	}
	reserver := flow.Workflow[string, string]{Name: "poll_reserve", Run: func(wc flow.Context, in string) (string, error) {
		if _, err := flow.Do(wc, reserve, in); err != nil {
			return "", err
		}
		return flow.Receive[string](wc, "never", 0)
	}}
	running := make(chan struct{}, 1)
	stopped := make(chan struct{}, 1)
	block := flow.Step[string, string]{Name: "block", Run: func(ctx context.Context, _ string) (string, error) {
		running <- struct{}{}
		<-ctx.Done()
		stopped <- struct{}{}
		return "", ctx.Err()
	}}
	blocker := flow.Workflow[string, string]{Name: "poll_block", Run: func(wc flow.Context, in string) (string, error) {
		return flow.Do(wc, block, in)
	}}
	p := startFlowPair(t, flow.Config{PollInterval: poll, HeartbeatInterval: beat, LeaseTimeout: 5 * time.Second}, true, func(e *flow.Engine) {
		flow.Register(e, greeter)
		flow.Register(e, waiter)
		flow.Register(e, reserver)
		flow.Register(e, blocker)
	})
	status := func(id string) flow.RunStatus {
		t.Helper()
		info, err := p.b.Inspect(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Status
	}
	// A session listening on the schema's wake channel hears nothing
	// however much work the engines do: polling alone moves it.
	heard := listenRaw(t, p.schema+"_wake")
	defer func() {
		if n := heard(); n > 0 {
			t.Errorf("%d wakes were sent by engines opened with NoWakes", n)
		}
	}()

	// Runs started through A.
	for i, in := range []string{"x", "y", "z"} {
		start := time.Now()
		run, err := flow.Start(t.Context(), p.a, greeter, in, &flow.StartOptions{Queue: "b"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := resultOn(t, p.b, greeter, run.ID(), bound)
		if err != nil {
			t.Fatalf("start %d: not done on B within %s (poll %s): %v", i, bound, poll, err)
		}
		if out != "hello "+in || status(run.ID()) != flow.StatusCompleted {
			t.Fatalf("start %d: output %q, status %s; want %q, completed", i, out, status(run.ID()), "hello "+in)
		}
		t.Logf("start %d: started through A, completed on B after %s", i, time.Since(start))
	}

	// A signal sent through A.
	run, err := flow.Start(t.Context(), p.a, waiter, "", &flow.StartOptions{Queue: "b"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, p.b, run.ID(), flow.StatusWaiting)
	start := time.Now()
	if sent, err := flow.Signal(t.Context(), p.a, run.ID(), "go", "x", nil); err != nil || !sent {
		t.Fatalf("signal: sent %v, err %v", sent, err)
	}
	out, err := resultOn(t, p.b, waiter, run.ID(), bound)
	if err != nil {
		t.Fatalf("signal: not done on B within %s (poll %s): %v", bound, poll, err)
	}
	if out != "got x" || status(run.ID()) != flow.StatusCompleted {
		t.Fatalf("signal: output %q, status %s; want %q, completed", out, status(run.ID()), "got x")
	}
	t.Logf("signal: sent through A, run completed on B after %s", time.Since(start))

	// A cancellation through A of a run waiting with a compensable step:
	// the run is left compensating, for B's poll to find.
	run, err = flow.Start(t.Context(), p.a, reserver, "r", &flow.StartOptions{Queue: "b"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, p.b, run.ID(), flow.StatusWaiting)
	start = time.Now()
	if err := p.a.Cancel(t.Context(), run.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-compensated:
		if got != "seat for r" {
			t.Fatalf("compensated %q, want %q", got, "seat for r")
		}
	case <-time.After(bound):
		t.Fatalf("cancel of a waiting run: B did not compensate it within %s (poll %s); it is %s", bound, poll, status(run.ID()))
	}
	_, err = resultOn(t, p.b, reserver, run.ID(), bound)
	if !errors.Is(err, flow.ErrCancelled) || status(run.ID()) != flow.StatusCancelled {
		t.Fatalf("cancel of a waiting run: result error %v, status %s; want ErrCancelled, cancelled", err, status(run.ID()))
	}
	t.Logf("cancel of a waiting run: cancelled through A, compensated and cancelled on B after %s", time.Since(start))

	// A cancellation through A of a run executing a step on B.
	run, err = flow.Start(t.Context(), p.a, blocker, "s", &flow.StartOptions{Queue: "b"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(bound):
		t.Fatalf("B did not start the blocking step within %s", bound)
	}
	start = time.Now()
	if err := p.a.Cancel(t.Context(), run.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(bound):
		t.Fatalf("cancel of a running run: its step on B was not cancelled within %s (heartbeat %s)", bound, beat)
	}
	_, err = resultOn(t, p.b, blocker, run.ID(), bound)
	if !errors.Is(err, flow.ErrCancelled) || status(run.ID()) != flow.StatusCancelled {
		t.Fatalf("cancel of a running run: result error %v, status %s; want ErrCancelled, cancelled", err, status(run.ID()))
	}
	t.Logf("cancel of a running run: cancelled through A, ended cancelled on B after %s", time.Since(start))
}

// listenRaw listens on channel on a connection of its own and returns how
// many notifications arrived there so far.
func listenRaw(t *testing.T, channel string) (heard func() int) {
	t.Helper()
	c, err := pgx.Connect(t.Context(), needPG(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(t.Context(), "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return func() int {
		n := 0
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, err := c.WaitForNotification(ctx)
			cancel()
			if err != nil {
				return n
			}
			n++
		}
	}
}
