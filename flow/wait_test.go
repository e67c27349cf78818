package flow_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowtest"
	"github.com/flowlite/flowlite/internal/clock"
	"golang.org/x/sync/errgroup"
)

// epoch is where the manual clocks of these tests start.
var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// manualConfig is testConfig on the manual clock clk.
func manualConfig(clk *clock.Manual) *flow.Config {
	cfg := testConfig()
	cfg.Clock = clk
	return cfg
}

// engineSession opens an engine on path, registers its workflows with
// register and starts it. The returned func closes the engine, as a crash or
// deploy would (runs in flight are interrupted and released); calling it
// again, or the test's cleanup, does nothing more.
func engineSession(t *testing.T, path string, cfg *flow.Config, register func(*flow.Engine)) (*flow.Engine, func()) {
	t.Helper()
	e := openEngine(t, path, cfg)
	if register != nil {
		register(e)
	}
	startEngine(t, e)
	var once sync.Once
	return e, func() { once.Do(func() { e.Close() }) }
}

// handle returns a handle on the run runID of wf through e, e.g. after the
// engine that started it was closed.
func handle[In, Out any](t *testing.T, e *flow.Engine, wf flow.Workflow[In, Out], runID string) *flow.Run[Out] {
	t.Helper()
	r, err := flow.Lookup(context.Background(), e, wf, runID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// inspect returns the run, failing the test on error.
func inspect(t *testing.T, e *flow.Engine, runID string) flow.RunInfo {
	t.Helper()
	info, err := e.Inspect(context.Background(), runID)
	if err != nil {
		t.Fatalf("inspect %s: %v", runID, err)
	}
	return info
}

// awaitStatus polls until the run is in status.
func awaitStatus(t *testing.T, e *flow.Engine, runID string, status flow.RunStatus) flow.RunInfo {
	t.Helper()
	var info flow.RunInfo
	eventually(t, fmt.Sprintf("run %s to be %s", runID, status), func() bool {
		info = inspect(t, e, runID)
		return info.Status == status
	})
	return info
}

// countKind counts the events of kind in the run's history.
func countKind(t *testing.T, e *flow.Engine, runID, kind string) int {
	t.Helper()
	n := 0
	for _, k := range eventKinds(t, e, runID) {
		if k == kind {
			n++
		}
	}
	return n
}

// storedSignal is a signal stored for a run, as ExportHistory shows it.
type storedSignal struct {
	Name       string
	Payload    string
	Key        string
	ConsumedBy string
}

// storedSignals lists the signals stored for a run, oldest first, with
// what received or rejected each: ExportHistory's signals.
func storedSignals(t *testing.T, e *flow.Engine, runID string) []storedSignal {
	t.Helper()
	h, err := e.ExportHistory(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedSignal
	for _, s := range h.Signals {
		out = append(out, storedSignal{Name: s.Name, Payload: string(s.Payload), Key: s.Key, ConsumedBy: s.ReceivedBy})
	}
	return out
}

// counter counts step executions by name, across engines.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

// inc counts one execution of name and returns how many there were.
func (c *counter) inc(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[name]++
	return c.n[name]
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// countedStep returns a step that counts its executions and returns its
// input with its name appended.
func countedStep(c *counter, name string) flow.Step[string, string] {
	return flow.Step[string, string]{Name: name, Run: func(_ context.Context, in string) (string, error) {
		c.inc(name)
		return in + "+" + name, nil
	}}
}

// undoLog records compensations in the order they ran.
type undoLog struct {
	mu   sync.Mutex
	undo []string
}

func (u *undoLog) add(s string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.undo = append(u.undo, s)
}

func (u *undoLog) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.undo)
}

// compensable returns a step that counts its executions and logs its
// compensation.
func compensable(c *counter, u *undoLog, name string) flow.Step[string, string] {
	s := countedStep(c, name)
	s.Compensate = func(_ context.Context, _, _ string) error {
		u.add(name)
		return nil
	}
	return s
}

// A run sleeping for a day survives the engine being closed and another
// opened on the database, keeps the due time recorded the first
// time when it is replayed early, and wakes once the clock passes it. That
// it holds no lease while it sleeps is internal/engine's
// TestSleepingRunHoldsNoLease, which reads the lease from the store.
func TestSleepIsDurableAndKeepsItsDueTime(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(epoch)
	var c counter
	before, after := countedStep(&c, "before"), countedStep(&c, "after")
	wf := flow.Workflow[string, string]{Name: "day-sleeper", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, before, in)
		if err != nil {
			return "", err
		}
		if err := flow.Sleep(wc, 24*time.Hour); err != nil {
			return "", err
		}
		return flow.Do(wc, after, s)
	}}
	register := func(e *flow.Engine) { flow.Register(e, wf) }
	due := epoch.Add(24 * time.Hour)

	e1, close1 := engineSession(t, path, manualConfig(clk), register)
	run, err := flow.Start(ctx, e1, wf, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	info := awaitStatus(t, e1, run.ID(), flow.StatusWaiting)
	if !info.RunAt.Equal(due) {
		t.Fatalf("waiting run due at %s, want %s", info.RunAt.UTC(), due)
	}
	close1()

	// A new engine, an hour later: the run still sleeps.
	clk.Advance(time.Hour)
	e2, _ := engineSession(t, path, manualConfig(clk), register)
	if info := inspect(t, e2, run.ID()); info.Status != flow.StatusWaiting || !info.RunAt.Equal(due) {
		t.Fatalf("after reopen: run %s due %s, want waiting due %s", info.Status, info.RunAt.UTC(), due)
	}
	// A signal wakes it early; the replay must park it again at the due
	// time recorded the first time, not an hour later.
	if _, err := flow.Signal(ctx, e2, run.ID(), "poke", 1, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the early replay to park the run again", func() bool {
		kinds := eventKinds(t, e2, run.ID())
		return countKind(t, e2, run.ID(), flow.EventRunClaimed) == 2 && kinds[len(kinds)-1] == flow.EventRunWaiting
	})
	if info := inspect(t, e2, run.ID()); info.Status != flow.StatusWaiting || !info.RunAt.Equal(due) {
		t.Fatalf("after early replay: run %s due %s, want waiting due %s", info.Status, info.RunAt.UTC(), due)
	}

	// Exactly at the due time, polling alone picks it up.
	clk.Set(due)
	out, err := handle(t, e2, wf, run.ID()).Result(ctx)
	if err != nil || out != "x+before+after" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if c.get("before") != 1 || c.get("after") != 1 {
		t.Fatalf("steps ran before=%d after=%d times, want once each", c.get("before"), c.get("after"))
	}
	if n := countKind(t, e2, run.ID(), flow.EventTimerStarted); n != 1 {
		t.Fatalf("%d timer_started events, want 1", n)
	}
	events, err := e2.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	fired := 0
	for _, ev := range events {
		switch ev.Kind {
		case flow.EventTimerStarted:
			if !strings.Contains(ev.Detail, due.Format(time.RFC3339Nano)) {
				t.Fatalf("timer started %q, want it to name %s", ev.Detail, due.Format(time.RFC3339Nano))
			}
		case flow.EventTimerFired:
			fired++
			if ev.At.Before(due) {
				t.Fatalf("timer fired at %s, before its due time %s", ev.At.UTC(), due)
			}
		}
	}
	if fired != 1 {
		t.Fatalf("timer fired %d times, want 1", fired)
	}
}

// SleepUntil waits for an absolute time on the engine clock: moving the
// clock short of it changes nothing, moving it past wakes the run.
func TestSleepUntilWakesOnceTheClockPassesIt(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	var c counter
	after := countedStep(&c, "after")
	wf := flow.Workflow[time.Time, string]{Name: "until-sleeper", Run: func(wc flow.Context, until time.Time) (string, error) {
		if err := flow.SleepUntil(wc, until); err != nil {
			return "", err
		}
		return flow.Do(wc, after, "woke")
	}}
	until := env.Now().Add(48 * time.Hour)
	run := flowtest.Start(env, wf, until, nil)
	awaitStatus(t, env.Engine, run.ID(), flow.StatusWaiting)
	env.Advance(47 * time.Hour)
	// Give the engine a few polls: the run must stay asleep.
	for range 3 {
		time.Sleep(3 * flowtest.DefaultPollInterval)
		if info := env.Inspect(run.ID()); info.Status != flow.StatusWaiting || c.get("after") != 0 {
			t.Fatalf("run %s, after ran %d times, one hour before its time", info.Status, c.get("after"))
		}
	}
	env.Advance(time.Hour)
	out, err := flowtest.Await(env, run)
	if err != nil || out != "woke+after" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if c.get("after") != 1 {
		t.Fatalf("after ran %d times, want 1", c.get("after"))
	}
}

type approval struct {
	By     string `json:"by"`
	Amount int    `json:"amount"`
}

// A signal carries a typed payload to one run by ID and name; signals of
// other names or to other runs are not received.
func TestSignalDeliversTypedPayloadByRunAndName(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := flow.Workflow[string, approval]{Name: "approver", Run: func(wc flow.Context, _ string) (approval, error) {
		return flow.Receive[approval](wc, "approve", 0)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	a, err := flow.Start(ctx, e, wf, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := flow.Start(ctx, e, wf, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, a.ID(), flow.StatusWaiting)
	if _, err := flow.Signal(ctx, e, a.ID(), "reject", approval{By: "mallory"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, b.ID(), "approve", approval{By: "bob", Amount: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, a.ID(), "approve", approval{By: "alice", Amount: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Result(ctx); err != nil || got != (approval{By: "alice", Amount: 1}) {
		t.Fatalf("run a got %+v, %v", got, err)
	}
	if got, err := b.Result(ctx); err != nil || got != (approval{By: "bob", Amount: 2}) {
		t.Fatalf("run b got %+v, %v", got, err)
	}
	if n := countKind(t, e, a.ID(), flow.EventSignalReceived); n != 1 {
		t.Fatalf("run a received %d signals, want 1", n)
	}
}

// receiveOrTimeout receives an int signal "n" with a one-hour timeout and
// tells a value from a timeout.
var receiveOrTimeout = flow.Workflow[string, string]{Name: "receive-or-timeout", Run: func(wc flow.Context, _ string) (string, error) {
	v, err := flow.Receive[int](wc, "n", time.Hour)
	switch {
	case errors.Is(err, flow.ErrTimedOut):
		return "timed out", nil
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("got %d", v), nil
}}

// Receive with a timeout returns the value when a signal comes in time and
// ErrTimedOut when the clock passes the timeout first. The timeout is
// recorded: an engine restarted later keeps the first deadline.
func TestReceiveTimeoutIsDistinctFromAValueAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(epoch)
	register := func(e *flow.Engine) { flow.Register(e, receiveOrTimeout) }
	e1, close1 := engineSession(t, path, manualConfig(clk), register)
	got, err := flow.Start(ctx, e1, receiveOrTimeout, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	late, err := flow.Start(ctx, e1, receiveOrTimeout, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e1, got.ID(), flow.StatusWaiting)
	awaitStatus(t, e1, late.ID(), flow.StatusWaiting)
	close1()

	clk.Advance(30 * time.Minute)
	e2, _ := engineSession(t, path, manualConfig(clk), register)
	if _, err := flow.Signal(ctx, e2, got.ID(), "n", 7, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := handle(t, e2, receiveOrTimeout, got.ID()).Result(ctx); err != nil || out != "got 7" {
		t.Fatalf("signalled run: %q, %v", out, err)
	}
	if info := inspect(t, e2, late.ID()); info.Status != flow.StatusWaiting || !info.RunAt.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("unsignalled run %s due %s, want waiting due %s", info.Status, info.RunAt.UTC(), epoch.Add(time.Hour))
	}
	clk.Set(epoch.Add(time.Hour))
	e2.WakeAll()
	if out, err := handle(t, e2, receiveOrTimeout, late.ID()).Result(ctx); err != nil || out != "timed out" {
		t.Fatalf("unsignalled run: %q, %v", out, err)
	}
	for id, want := range map[string]string{got.ID(): flow.EventSignalReceived, late.ID(): flow.EventSignalTimedOut} {
		received, timedOut := countKind(t, e2, id, flow.EventSignalReceived), countKind(t, e2, id, flow.EventSignalTimedOut)
		if received+timedOut != 1 || countKind(t, e2, id, want) != 1 {
			t.Fatalf("run %s: %d received, %d timed out; want one %s", id, received, timedOut, want)
		}
	}
}

// Signals sent before the run waits, even before any engine works the run,
// are kept and received in the order they were sent, each once.
func TestSignalsSentEarlyAreKeptAndReceivedInOrder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openEngine(t, path, nil)
	wf := flow.Workflow[int, []int]{Name: "collector", Run: func(wc flow.Context, n int) ([]int, error) {
		var got []int
		for range n {
			v, err := flow.Receive[int](wc, "item", 0)
			if err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		return got, nil
	}}
	flow.Register(e, wf)
	run, err := flow.Start(ctx, e, wf, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := flow.Signal(ctx, e, run.ID(), "item", i, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := flow.Signal(ctx, e, run.ID(), "other", -i, nil); err != nil {
			t.Fatal(err)
		}
	}
	startEngine(t, e)
	got, err := run.Result(ctx)
	if err != nil || !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("received %v, %v; want [1 2 3 4 5]", got, err)
	}
	consumed := 0
	for _, s := range storedSignals(t, e, run.ID()) {
		if s.ConsumedBy != "" {
			consumed++
			if s.Name != "item" {
				t.Fatalf("signal %s was consumed by %s", s.Name, s.ConsumedBy)
			}
		}
	}
	if consumed != 5 {
		t.Fatalf("%d signals consumed, want 5", consumed)
	}
}

// Signalling an unknown run is ErrRunNotFound; signalling a finished run is
// ErrRunFinished and records nothing.
func TestSignalToUnknownOrFinishedRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openEngine(t, path, nil)
	wf := flow.Workflow[int, int]{Name: "quick", Run: func(_ flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)
	startEngine(t, e)
	if _, err := flow.Signal(ctx, e, "no-such-run", "x", 1, nil); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("signal to unknown run: %v, want ErrRunNotFound", err)
	}
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	before := eventKinds(t, e, run.ID())
	_, err = flow.Signal(ctx, e, run.ID(), "x", 1, &flow.SignalOptions{Key: "k"})
	if !errors.Is(err, flow.ErrRunFinished) {
		t.Fatalf("signal to finished run: %v, want ErrRunFinished", err)
	}
	if after := eventKinds(t, e, run.ID()); !slices.Equal(before, after) {
		t.Fatalf("history changed from %v to %v", before, after)
	}
	if s := storedSignals(t, e, run.ID()); len(s) != 0 {
		t.Fatalf("signals stored for a finished run: %v", s)
	}
}

// Two signals with one key are one signal: the run receives the first, and
// its next Receive times out.
func TestSignalKeyMakesSendingIdempotent(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(epoch)
	e := openEngine(t, path, manualConfig(clk))
	wf := flow.Workflow[string, []string]{Name: "twice", Run: func(wc flow.Context, _ string) ([]string, error) {
		first, err := flow.Receive[string](wc, "pay", 0)
		if err != nil {
			return nil, err
		}
		second, err := flow.Receive[string](wc, "pay", time.Hour)
		if errors.Is(err, flow.ErrTimedOut) {
			second = "timed out"
		} else if err != nil {
			return nil, err
		}
		return []string{first, second}, nil
	}}
	flow.Register(e, wf)
	run, err := flow.Start(ctx, e, wf, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, payload := range []string{"first", "retry of first"} {
		sent, err := flow.Signal(ctx, e, run.ID(), "pay", payload, &flow.SignalOptions{Key: "payment-1"})
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 0; sent != want {
			t.Errorf("send %d with key payment-1: sent = %v, want %v", i+1, sent, want)
		}
	}
	startEngine(t, e)
	eventually(t, "the second receive to wait", func() bool {
		info := inspect(t, e, run.ID())
		return info.Status == flow.StatusWaiting && len(info.Steps) == 2
	})
	clk.Advance(time.Hour)
	e.WakeAll()
	got, err := run.Result(ctx)
	if err != nil || !slices.Equal(got, []string{"first", "timed out"}) {
		t.Fatalf("got %q, %v; want [first, timed out]", got, err)
	}
	if s := storedSignals(t, e, run.ID()); len(s) != 1 || s[0].Key != "payment-1" {
		t.Fatalf("stored signals %+v, want one with key payment-1", s)
	}
	if n := countKind(t, e, run.ID(), flow.EventSignalSent); n != 1 {
		t.Fatalf("%d signal_sent events, want 1", n)
	}
}

// SignalRun from one run to another is sent exactly once, even when the
// sender is replayed for the retries of a later step and when the signal
// step itself runs again after sending (as after a crash before its
// checkpoint).
func TestSignalRunSendsOnceAcrossSenderReplays(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var signalAttempts atomic.Int32
	cfg := testConfig()
	cfg.Intercept = func(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
		if info.Step != "flow.signal:ping" {
			return call(ctx)
		}
		signalAttempts.Add(1)
		err := call(ctx)
		if err == nil && info.Attempt == 1 {
			return errors.New("lost the checkpoint after sending")
		}
		return err
	}
	e := openEngine(t, path, cfg)
	receiver := flow.Workflow[string, []string]{Name: "ping-receiver", Run: func(wc flow.Context, _ string) ([]string, error) {
		first, err := flow.Receive[string](wc, "ping", 0)
		if err != nil {
			return nil, err
		}
		second, err := flow.Receive[string](wc, "ping", 300*time.Millisecond)
		if errors.Is(err, flow.ErrTimedOut) {
			second = "timed out"
		} else if err != nil {
			return nil, err
		}
		return []string{first, second}, nil
	}}
	var flakyAttempts atomic.Int32
	flaky := flow.Step[string, string]{Name: "flaky", Run: func(context.Context, string) (string, error) {
		if flakyAttempts.Add(1) < 3 {
			return "", errors.New("not yet")
		}
		return "done", nil
	}}
	sender := flow.Workflow[string, string]{Name: "ping-sender", Run: func(wc flow.Context, to string) (string, error) {
		if err := flow.SignalRun(wc, to, "ping", "hello"); err != nil {
			return "", err
		}
		return flow.Do(wc, flaky, to)
	}}
	flow.Register(e, receiver)
	flow.Register(e, sender)
	startEngine(t, e)
	recv, err := flow.Start(ctx, e, receiver, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	send, err := flow.Start(ctx, e, sender, recv.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := send.Result(ctx); err != nil || out != "done" {
		t.Fatalf("sender: %q, %v", out, err)
	}
	if n := countKind(t, e, send.ID(), flow.EventRunClaimed); n < 3 {
		t.Fatalf("sender was executed %d times, want at least 3 (replays)", n)
	}
	if n := signalAttempts.Load(); n != 2 {
		t.Fatalf("signal step attempted %d times, want 2", n)
	}
	if s := storedSignals(t, e, recv.ID()); len(s) != 1 {
		t.Fatalf("receiver has %d stored signals (%+v), want 1", len(s), s)
	}
	got, err := recv.Result(ctx)
	if err != nil || !slices.Equal(got, []string{"hello", "timed out"}) {
		t.Fatalf("receiver got %q, %v; want [hello, timed out]", got, err)
	}
}

// A signal sent while the run executes a slow step before its Receive is
// received when the run gets there.
func TestSignalDuringStepBeforeReceiveIsReceived(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	entered, release := make(chan struct{}), make(chan struct{})
	slow := flow.Step[string, string]{Name: "slow", Run: func(ctx context.Context, s string) (string, error) {
		close(entered)
		select {
		case <-release:
			return s, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	wf := flow.Workflow[string, string]{Name: "slow-then-receive", Run: func(wc flow.Context, s string) (string, error) {
		if _, err := flow.Do(wc, slow, s); err != nil {
			return "", err
		}
		return flow.Receive[string](wc, "go", 0)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the slow step never ran")
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "go", "now", nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	if out, err := run.Result(ctx); err != nil || out != "now" {
		t.Fatalf("result = %q, %v", out, err)
	}
}

// A signal that arrives after the run found no signal but before it was
// released (a parallel branch still runs a step) must wake the run: the
// release sees the wake and makes the run due at once.
func TestSignalBetweenWaitAndReleaseIsNotMissed(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	slow := flow.Step[string, string]{Name: "slow", Run: func(ctx context.Context, s string) (string, error) {
		once.Do(func() { close(entered) })
		select {
		case <-release:
			return s, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}}
	wf := flow.Workflow[string, []string]{Name: "receive-beside-step", Run: func(wc flow.Context, s string) ([]string, error) {
		return flow.All(wc,
			func(wc flow.Context) (string, error) { return flow.Receive[string](wc, "go", 0) },
			func(wc flow.Context) (string, error) { return flow.Do(wc, slow, s) },
		)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "step", nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the step never ran: the receive branch parking stopped its sibling branch")
	}
	eventually(t, "the receive to find no signal", func() bool {
		return countKind(t, e, run.ID(), flow.EventSignalWaiting) == 1
	})
	if info := inspect(t, e, run.ID()); info.Status != flow.StatusRunning {
		t.Fatalf("run is %s, want running (leased, the step in flight)", info.Status)
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "go", "signal", nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	out, err := run.Result(ctx)
	if err != nil || !slices.Equal(out, []string{"signal", "step"}) {
		t.Fatalf("result = %q, %v", out, err)
	}
}

// A signal sent exactly when the receive's timeout passes is either
// received or left stored while the receive times out: never both, never
// neither, and the history agrees with the outcome.
func TestSignalRacingTimeoutHasExactlyOneOutcome(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	clk := clock.NewManual(epoch)
	e := openEngine(t, path, manualConfig(clk))
	flow.Register(e, receiveOrTimeout)
	startEngine(t, e)
	const n = 16
	runs := make([]*flow.Run[string], n)
	for i := range runs {
		var err error
		if runs[i], err = flow.Start(ctx, e, receiveOrTimeout, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range runs {
		awaitStatus(t, e, r.ID(), flow.StatusWaiting)
	}
	clk.Set(epoch.Add(time.Hour)) // exactly the receives' deadline
	e.WakeAll()
	sendErrs := make([]error, n)
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			time.Sleep(time.Duration(i%4) * 5 * time.Millisecond) // spread the sends over the claims
			_, sendErrs[i] = flow.Signal(ctx, e, r.ID(), "n", i, nil)
		})
	}
	wg.Wait()
	outcomes := map[string]int{}
	for i, r := range runs {
		out, err := r.Result(ctx)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		received, timedOut := countKind(t, e, r.ID(), flow.EventSignalReceived), countKind(t, e, r.ID(), flow.EventSignalTimedOut)
		stored := storedSignals(t, e, r.ID())
		switch {
		case sendErrs[i] != nil && !errors.Is(sendErrs[i], flow.ErrRunFinished):
			t.Fatalf("run %d: signal: %v", i, sendErrs[i])
		case out == fmt.Sprintf("got %d", i):
			outcomes["received"]++
			if sendErrs[i] != nil || received != 1 || timedOut != 0 || len(stored) != 1 || stored[0].ConsumedBy == "" {
				t.Fatalf("run %d received: send err %v, %d received, %d timed out, stored %+v", i, sendErrs[i], received, timedOut, stored)
			}
		case out == "timed out":
			outcomes["timed out"]++
			if received != 0 || timedOut != 1 {
				t.Fatalf("run %d timed out: %d received, %d timed out events", i, received, timedOut)
			}
			if sendErrs[i] == nil && (len(stored) != 1 || stored[0].ConsumedBy != "") {
				t.Fatalf("run %d timed out, its signal was sent but stored as %+v", i, stored)
			}
			if sendErrs[i] != nil && len(stored) != 0 {
				t.Fatalf("run %d: signal refused (%v) but stored as %+v", i, sendErrs[i], stored)
			}
		default:
			t.Fatalf("run %d: unexpected outcome %q", i, out)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// Fifty runs wait with short timeouts while signals are sent to them at
// random: each run ends with exactly one outcome, a received signal is the
// oldest one sent to it, and every other signal that was accepted is still
// stored, unconsumed.
func TestSignalsAndTimeoutsUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	cfg := testConfig()
	cfg.Queues = map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 16}}
	e := openEngine(t, path, cfg)
	wf := flow.Workflow[int, int]{Name: "short-wait", Run: func(wc flow.Context, timeoutMs int) (int, error) {
		v, err := flow.Receive[int](wc, "s", time.Duration(timeoutMs)*time.Millisecond)
		if errors.Is(err, flow.ErrTimedOut) {
			return -1, nil
		}
		return v, err
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	const n = 50
	type send struct {
		payload int
		err     error
	}
	runs := make([]*flow.Run[int], n)
	sent := make([][]send, n)
	var wg sync.WaitGroup
	for i := range runs {
		// Timeouts of 100 to 500ms; 0 to 2 signals, each 0 to 400ms after
		// the previous one: a pseudo-random mix of signals in time, too
		// late, and racing the timeout.
		r, err := flow.Start(ctx, e, wf, 100+(i*37)%400, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = r
		wg.Go(func() {
			for j := range (i * 7) % 3 {
				time.Sleep(time.Duration((i*53+j*31)%400) * time.Millisecond)
				p := i*10 + j
				_, err := flow.Signal(ctx, e, r.ID(), "s", p, nil)
				sent[i] = append(sent[i], send{p, err})
			}
		})
	}
	wg.Wait()
	outcomes := map[string]int{}
	for i, r := range runs {
		got, err := r.Result(ctx)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		received, timedOut := countKind(t, e, r.ID(), flow.EventSignalReceived), countKind(t, e, r.ID(), flow.EventSignalTimedOut)
		if received+timedOut != 1 {
			t.Fatalf("run %d: %d received and %d timed out events", i, received, timedOut)
		}
		stored := map[string]storedSignal{}
		var oldest string
		for _, s := range storedSignals(t, e, r.ID()) {
			stored[s.Payload] = s
			if oldest == "" {
				oldest = s.Payload
			}
		}
		for _, s := range sent[i] {
			row, ok := stored[fmt.Sprint(s.payload)]
			switch {
			case s.err != nil && !errors.Is(s.err, flow.ErrRunFinished):
				t.Fatalf("run %d: signal %d: %v", i, s.payload, s.err)
			case s.err != nil && ok:
				t.Fatalf("run %d: signal %d refused (%v) but stored", i, s.payload, s.err)
			case s.err != nil:
			case !ok:
				t.Fatalf("run %d: accepted signal %d is lost", i, s.payload)
			case s.payload == got && row.ConsumedBy == "":
				t.Fatalf("run %d received %d, which is not marked consumed", i, got)
			case s.payload != got && row.ConsumedBy != "":
				t.Fatalf("run %d: signal %d consumed by %s but the run got %d", i, s.payload, row.ConsumedBy, got)
			}
		}
		if got >= 0 {
			outcomes["received"]++
			if received != 1 || oldest != fmt.Sprint(got) {
				t.Fatalf("run %d got %d; %d received events; oldest stored signal %s", i, got, received, oldest)
			}
		} else {
			outcomes["timed out"]++
			if timedOut != 1 {
				t.Fatalf("run %d timed out without a timed out event", i)
			}
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// Cancelling a run ends it cancelled with its completed steps compensated,
// whatever it was doing: pending (before any execution, or between step
// retries), running a step, sleeping, or waiting for a signal. A second
// cancel is ErrRunFinished.
func TestCancelRunInEveryState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// hold makes the run hold somewhere after "reserve" completed (or,
		// for pending-new, before it ran).
		hold   func(wc flow.Context, h *holds) error
		status flow.RunStatus // the run's status while it holds
		// started: the engine works the run before the cancel.
		started bool
		undone  []string
	}{
		{name: "pending-new", hold: nil, status: flow.StatusPending, undone: nil},
		{name: "pending-retry", hold: func(wc flow.Context, h *holds) error {
			_, err := flow.Do(wc, h.failing, "x")
			return err
		}, status: flow.StatusPending, started: true, undone: []string{"reserve"}},
		{name: "running", hold: func(wc flow.Context, h *holds) error {
			_, err := flow.Do(wc, h.blocking, "x")
			return err
		}, status: flow.StatusRunning, started: true, undone: []string{"reserve"}},
		{name: "sleeping", hold: func(wc flow.Context, _ *holds) error {
			return flow.Sleep(wc, 24*time.Hour)
		}, status: flow.StatusWaiting, started: true, undone: []string{"reserve"}},
		{name: "receiving", hold: func(wc flow.Context, _ *holds) error {
			_, err := flow.Receive[string](wc, "never", 0)
			return err
		}, status: flow.StatusWaiting, started: true, undone: []string{"reserve"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := waitCtx(t)
			clk := clock.NewManual(epoch)
			cfg := manualConfig(clk)
			cfg.DefaultRetry = flow.RetryPolicy{MaxAttempts: 5, InitialInterval: time.Hour, Jitter: -1}
			e := openEngine(t, dbPath(t), cfg)
			var c counter
			var u undoLog
			h := newHolds()
			reserve, after := compensable(&c, &u, "reserve"), countedStep(&c, "after")
			wf := flow.Workflow[string, string]{Name: "cancel-" + tc.name, Run: func(wc flow.Context, in string) (string, error) {
				if tc.hold == nil {
					return flow.Do(wc, after, in)
				}
				s, err := flow.Do(wc, reserve, in)
				if err != nil {
					return "", err
				}
				if err := tc.hold(wc, h); err != nil {
					return "", err
				}
				return flow.Do(wc, after, s)
			}}
			flow.Register(e, wf)
			if tc.started {
				startEngine(t, e)
			}
			run, err := flow.Start(ctx, e, wf, "in", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.started {
				eventually(t, "the run to hold", func() bool {
					return inspect(t, e, run.ID()).Status == tc.status && c.get("reserve") == 1 && (tc.name != "running" || h.inside.Load())
				})
			} else if st := inspect(t, e, run.ID()).Status; st != tc.status {
				t.Fatalf("run is %s, want %s", st, tc.status)
			}
			if err := run.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			if !tc.started {
				startEngine(t, e)
			}
			if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
				t.Fatalf("result err = %v, want ErrCancelled", err)
			}
			if st := inspect(t, e, run.ID()).Status; st != flow.StatusCancelled {
				t.Fatalf("run is %s, want cancelled", st)
			}
			if got := u.list(); !slices.Equal(got, tc.undone) {
				t.Fatalf("compensated %v, want %v", got, tc.undone)
			}
			if c.get("after") != 0 {
				t.Fatal("the step after the hold ran")
			}
			if tc.name == "running" {
				if cause := h.cause(); !errors.Is(cause, flow.ErrCancelled) {
					t.Fatalf("running step's context cause = %v, want ErrCancelled", cause)
				}
			}
			if err := run.Cancel(ctx); !errors.Is(err, flow.ErrRunFinished) {
				t.Fatalf("second cancel: %v, want ErrRunFinished", err)
			}
		})
	}
}

// holds are steps where a run can be held for a cancellation test.
type holds struct {
	failing  flow.Step[string, string]
	blocking flow.Step[string, string]
	inside   atomic.Bool

	mu       sync.Mutex
	ctxCause error
}

func newHolds() *holds {
	h := &holds{}
	h.failing = flow.Step[string, string]{Name: "failing", Run: func(context.Context, string) (string, error) {
		return "", errors.New("try again in an hour")
	}}
	h.blocking = flow.Step[string, string]{Name: "blocking", Run: func(ctx context.Context, _ string) (string, error) {
		h.inside.Store(true)
		<-ctx.Done()
		h.mu.Lock()
		h.ctxCause = context.Cause(ctx)
		h.mu.Unlock()
		return "", ctx.Err()
	}}
	return h
}

func (h *holds) cause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ctxCause
}

// A run sleeping past its deadline is cancelled and compensated once the
// clock passes the deadline; the run is due at the deadline, not at the end
// of its sleep.
func TestDeadlineCancelsSleepingRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(epoch)
	e := openEngine(t, dbPath(t), manualConfig(clk))
	var c counter
	var u undoLog
	reserve, after := compensable(&c, &u, "reserve"), countedStep(&c, "after")
	wf := flow.Workflow[string, string]{Name: "sleeps-past-deadline", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, reserve, in)
		if err != nil {
			return "", err
		}
		if err := flow.Sleep(wc, 24*time.Hour); err != nil {
			return "", err
		}
		return flow.Do(wc, after, s)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	deadline := epoch.Add(time.Hour)
	run, err := flow.Start(ctx, e, wf, "in", &flow.StartOptions{Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	info := awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	if !info.RunAt.Equal(deadline) || !info.Deadline.Equal(deadline) {
		t.Fatalf("sleeping run due %s with deadline %s, want both %s", info.RunAt.UTC(), info.Deadline.UTC(), deadline)
	}
	clk.Advance(30 * time.Minute)
	e.WakeAll()
	time.Sleep(50 * time.Millisecond)
	if info := inspect(t, e, run.ID()); info.Status != flow.StatusWaiting {
		t.Fatalf("run is %s before its deadline", info.Status)
	}
	clk.Advance(31 * time.Minute)
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("result err = %v, want ErrCancelled", err)
	}
	if got := u.list(); !slices.Equal(got, []string{"reserve"}) || c.get("after") != 0 {
		t.Fatalf("compensated %v, after ran %d times; want [reserve], 0", got, c.get("after"))
	}
	if st := inspect(t, e, run.ID()).Status; st != flow.StatusCancelled {
		t.Fatalf("run is %s, want cancelled", st)
	}
}

// A step running when the run's deadline passes sees its context cancelled
// with ErrDeadlineExceeded (which matches ErrCancelled); the run is
// compensated and ends cancelled.
func TestDeadlineCancelsRunningStep(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	var u undoLog
	h := newHolds()
	reserve := compensable(&c, &u, "reserve")
	wf := flow.Workflow[string, string]{Name: "runs-past-deadline", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, reserve, in)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, h.blocking, s)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "in", &flow.StartOptions{Deadline: time.Now().Add(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("result err = %v, want ErrCancelled", err)
	}
	if !h.inside.Load() {
		t.Fatal("the blocking step never ran")
	}
	if cause := h.cause(); !errors.Is(cause, flow.ErrDeadlineExceeded) || !errors.Is(cause, flow.ErrCancelled) {
		t.Fatalf("step context cause = %v, want ErrDeadlineExceeded", cause)
	}
	if got := u.list(); !slices.Equal(got, []string{"reserve"}) {
		t.Fatalf("compensated %v, want [reserve]", got)
	}
	if st := inspect(t, e, run.ID()).Status; st != flow.StatusCancelled {
		t.Fatalf("run is %s, want cancelled", st)
	}
}

// The deadline is on the engine clock: moving a manual clock past it
// cancels a step in flight at once, with ErrDeadlineExceeded as the cause.
func TestDeadlineOnManualClockCancelsRunningStep(t *testing.T) {
	t.Parallel()
	env := flowtest.New(t, nil)
	env.WaitLimit = 10 * time.Second
	var c counter
	var u undoLog
	h := newHolds()
	reserve := compensable(&c, &u, "reserve")
	wf := flow.Workflow[string, string]{Name: "manual-deadline", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, reserve, in)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, h.blocking, s)
	}}
	run := flowtest.Start(env, wf, "in", &flow.StartOptions{Deadline: env.Now().Add(time.Hour)})
	eventually(t, "the blocking step to run", h.inside.Load)
	env.Advance(2 * time.Hour)
	if _, err := flowtest.Await(env, run); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("result err = %v, want ErrCancelled", err)
	}
	if cause := h.cause(); !errors.Is(cause, flow.ErrDeadlineExceeded) {
		t.Fatalf("step context cause = %v, want ErrDeadlineExceeded", cause)
	}
	if got := u.list(); !slices.Equal(got, []string{"reserve"}) {
		t.Fatalf("compensated %v, want [reserve]", got)
	}
}

type quote struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type priced struct {
	SKU   string `json:"sku"`
	Cents int    `json:"cents"`
}

var priceStep = flow.Step[quote, priced]{Name: "price", Run: func(_ context.Context, q quote) (priced, error) {
	return priced{SKU: q.SKU, Cents: q.Qty * 250}, nil
}}

var pricer = flow.Workflow[quote, priced]{Name: "pricer", Run: func(wc flow.Context, q quote) (priced, error) {
	return flow.Do(wc, priceStep, q)
}}

// A child's typed result reaches its parent, through StartChild and
// Child.Result or through Call; the child records its parent.
func TestChildResultIsTyped(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	parent := flow.Workflow[[]quote, []priced]{Name: "order-pricer", Run: func(wc flow.Context, qs []quote) ([]priced, error) {
		var children []*flow.Child[priced]
		for _, q := range qs[1:] {
			c, err := flow.StartChild(wc, pricer, q, nil)
			if err != nil {
				return nil, err
			}
			children = append(children, c)
		}
		first, err := flow.Call(wc, pricer, qs[0], &flow.ChildOptions{RunID: wc.RunID() + "/first"})
		if err != nil {
			return nil, err
		}
		out := []priced{first}
		for _, c := range children {
			p, err := c.Result(wc)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}}
	flow.Register(e, pricer)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, []quote{{"a", 1}, {"b", 2}, {"c", 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run.Result(ctx)
	want := []priced{{"a", 250}, {"b", 500}, {"c", 750}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("result = %+v, %v; want %+v", got, err, want)
	}
	children, err := e.ListRuns(ctx, flow.RunFilter{Workflow: "pricer"})
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 3 {
		t.Fatalf("%d child runs, want 3", len(children))
	}
	for _, c := range children {
		if c.ParentID != run.ID() || c.Status != flow.StatusCompleted {
			t.Fatalf("child %s: parent %q, status %s", c.ID, c.ParentID, c.Status)
		}
	}
	if _, err := e.Inspect(ctx, run.ID()+"/first"); err != nil {
		t.Fatalf("child with the chosen run ID: %v", err)
	}
	for kind, want := range map[string]int{flow.EventChildStarted: 3, flow.EventChildFinished: 3} {
		if n := countKind(t, e, run.ID(), kind); n != want {
			t.Fatalf("%d %s events, want %d", n, kind, want)
		}
	}
}

// A child that fails is compensated and reaches its parent as a
// *flow.ChildError matching ErrRolledBack, which the parent may handle.
func TestChildFailureReachesParentAsChildError(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	var u undoLog
	hold := compensable(&c, &u, "hold")
	charge := flow.Step[string, string]{Name: "charge", Run: func(context.Context, string) (string, error) {
		return "", flow.Permanent(errors.New("card declined"))
	}}
	child := flow.Workflow[string, string]{Name: "payment", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, hold, in)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, charge, s)
	}}
	var mu sync.Mutex
	var seen *flow.ChildError
	parent := flow.Workflow[string, string]{Name: "checkout", Run: func(wc flow.Context, in string) (string, error) {
		out, err := flow.Call(wc, child, in, nil)
		var ce *flow.ChildError
		switch {
		case errors.As(err, &ce) && errors.Is(err, flow.ErrRolledBack):
			mu.Lock()
			seen = ce
			mu.Unlock()
			return "handled: " + string(ce.Status), nil
		case err != nil:
			return "", err
		}
		return out, nil
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, "order", nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Result(ctx); err != nil || out != "handled: failed" {
		t.Fatalf("result = %q, %v", out, err)
	}
	mu.Lock()
	ce := seen
	mu.Unlock()
	if ce == nil || ce.Status != flow.StatusFailed || !strings.Contains(ce.Cause, "card declined") || errors.Is(ce, flow.ErrCancelled) {
		t.Fatalf("child error = %+v", ce)
	}
	info := inspect(t, e, ce.RunID)
	if info.Status != flow.StatusFailed || info.ParentID != run.ID() {
		t.Fatalf("child %s is %s with parent %q", ce.RunID, info.Status, info.ParentID)
	}
	if got := u.list(); !slices.Equal(got, []string{"hold"}) {
		t.Fatalf("compensated %v, want [hold]", got)
	}
}

// Cancelling a parent while its child runs a step cancels the child: its
// step sees ErrCancelled through its context at once (not at the next
// heartbeat), both runs are compensated and end cancelled.
func TestCancelParentCancelsRunningChild(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	cfg := testConfig()
	cfg.LeaseTimeout = time.Hour // heartbeats far apart: only a direct cancel reaches the step
	e := openEngine(t, dbPath(t), cfg)
	var c counter
	var u undoLog
	h := newHolds()
	childHold, parentHold := compensable(&c, &u, "child-hold"), compensable(&c, &u, "parent-hold")
	child := flow.Workflow[string, string]{Name: "cancel-child", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, childHold, in)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, h.blocking, s)
	}}
	parent := flow.Workflow[string, string]{Name: "cancel-parent", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, parentHold, in)
		if err != nil {
			return "", err
		}
		return flow.Call(wc, child, s, nil)
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, parent, "in", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child's step to run and the parent to wait", func() bool {
		return h.inside.Load() && inspect(t, e, run.ID()).Status == flow.StatusWaiting
	})
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("parent result err = %v, want ErrCancelled", err)
	}
	children, err := e.ListRuns(ctx, flow.RunFilter{Workflow: child.Name})
	if err != nil || len(children) != 1 {
		t.Fatalf("child runs: %v, %v", children, err)
	}
	childRun, err := flow.Lookup(ctx, e, child, children[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := childRun.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("child result err = %v, want ErrCancelled", err)
	}
	if cause := h.cause(); !errors.Is(cause, flow.ErrCancelled) {
		t.Fatalf("child step's context cause = %v, want ErrCancelled", cause)
	}
	for _, id := range []string{run.ID(), childRun.ID()} {
		if st := inspect(t, e, id).Status; st != flow.StatusCancelled {
			t.Fatalf("run %s is %s, want cancelled", id, st)
		}
	}
	got := u.list()
	slices.Sort(got)
	if !slices.Equal(got, []string{"child-hold", "parent-hold"}) {
		t.Fatalf("compensated %v, want child-hold and parent-hold", got)
	}
}

// A parent waiting for its child survives an engine restart, is woken once
// when the child finishes on the next engine, and neither re-runs its steps
// nor starts the child again.
func TestParentWaitingForChildSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var c counter
	before, after := countedStep(&c, "before"), countedStep(&c, "after")
	child := flow.Workflow[string, string]{Name: "slow-child", Run: func(wc flow.Context, in string) (string, error) {
		v, err := flow.Receive[string](wc, "finish", 0)
		return in + "+" + v, err
	}}
	parent := flow.Workflow[string, string]{Name: "patient-parent", Run: func(wc flow.Context, in string) (string, error) {
		s, err := flow.Do(wc, before, in)
		if err != nil {
			return "", err
		}
		if s, err = flow.Call(wc, child, s, nil); err != nil {
			return "", err
		}
		return flow.Do(wc, after, s)
	}}
	register := func(e *flow.Engine) {
		flow.Register(e, child)
		flow.Register(e, parent)
	}
	e1, close1 := engineSession(t, path, nil, register)
	run, err := flow.Start(ctx, e1, parent, "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	var childID string
	eventually(t, "parent and child to wait", func() bool {
		children, err := e1.ListRuns(ctx, flow.RunFilter{Workflow: child.Name})
		if err != nil || len(children) != 1 || children[0].Status != flow.StatusWaiting {
			return false
		}
		childID = children[0].ID
		return inspect(t, e1, run.ID()).Status == flow.StatusWaiting
	})
	close1()

	e2, _ := engineSession(t, path, nil, register)
	if _, err := flow.Signal(ctx, e2, childID, "finish", "done", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := handle(t, e2, parent, run.ID()).Result(ctx); err != nil || out != "p+before+done+after" {
		t.Fatalf("result = %q, %v", out, err)
	}
	if c.get("before") != 1 || c.get("after") != 1 {
		t.Fatalf("before ran %d, after %d times; want once each", c.get("before"), c.get("after"))
	}
	children, err := e2.ListRuns(ctx, flow.RunFilter{Workflow: child.Name})
	if err != nil || len(children) != 1 {
		t.Fatalf("child runs: %v, %v; want one", children, err)
	}
	for kind, want := range map[string]int{
		flow.EventChildStarted: 1, flow.EventChildWaiting: 1, flow.EventChildFinished: 1,
		// Claimed when started, then once more when the child finished.
		flow.EventRunClaimed: 2,
	} {
		if n := countKind(t, e2, run.ID(), kind); n != want {
			t.Fatalf("parent has %d %s events, want %d: %v", n, kind, want, eventKinds(t, e2, run.ID()))
		}
	}
}

// waiter waits for the signal "go" and returns its payload.
var waiter = flow.Workflow[int, int]{Name: "waiter", Run: func(wc flow.Context, _ int) (int, error) {
	return flow.Receive[int](wc, "go", 0)
}}

// A detached child outlives its parent's cancellation, where an attached
// sibling is cancelled with it; it inherits no deadline from the parent,
// and still names it as its parent.
func TestDetachedChildOutlivesItsParentsCancellation(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	parent := flow.Workflow[int, int]{Name: "detaching-parent", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/attached"}); err != nil {
			return 0, err
		}
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/detached", Detached: true}); err != nil {
			return 0, err
		}
		return flow.Receive[int](wc, "never", 0)
	}}
	flow.Register(e, waiter)
	flow.Register(e, parent)
	startEngine(t, e)
	ctx := waitCtx(t)
	p, err := flow.Start(ctx, e, parent, 1, &flow.StartOptions{RunID: "p", Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"p/attached", "p/detached"} {
		eventually(t, id+" waiting", func() bool {
			info, err := e.Inspect(ctx, id)
			return err == nil && info.Status == flow.StatusWaiting
		})
	}
	attached, _ := e.Inspect(ctx, "p/attached")
	detached, _ := e.Inspect(ctx, "p/detached")
	if attached.Deadline.IsZero() || !detached.Deadline.IsZero() {
		t.Errorf("deadlines: attached %s, detached %s; want the parent's and none", attached.Deadline, detached.Deadline)
	}
	if !detached.Detached || attached.Detached || detached.ParentID != "p" {
		t.Errorf("detached child: Detached %v, parent %q; attached child: Detached %v", detached.Detached, detached.ParentID, attached.Detached)
	}
	if err := e.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	var cancelled *flow.CancelledError
	if _, err := p.Result(ctx); !errors.As(err, &cancelled) {
		t.Fatalf("parent = %v, want cancelled", err)
	}
	eventually(t, "the attached child cancelled", func() bool {
		info, err := e.Inspect(ctx, "p/attached")
		return err == nil && info.Status == flow.StatusCancelled
	})
	if info, _ := e.Inspect(ctx, "p/detached"); info.Status != flow.StatusWaiting || info.CancelRequested {
		t.Fatalf("detached child after the parent's cancellation: %s (cancel requested %v), want waiting on", info.Status, info.CancelRequested)
	}
	if _, err := flow.Signal(ctx, e, "p/detached", "go", 42, nil); err != nil {
		t.Fatal(err)
	}
	child, err := flow.Lookup(ctx, e, waiter, "p/detached")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := child.Result(ctx); err != nil || out != 42 {
		t.Fatalf("detached child = %d, %v; want it to complete on its own", out, err)
	}
	if d := historyOf(t, e, "p/detached")[0].Detail; !strings.Contains(d, "detached from parent p") {
		t.Errorf("run_started detail %q does not say the child is detached", d)
	}
}

// A parent that fails and compensates cancels its attached children, not
// its detached ones.
func TestDetachedChildOutlivesItsParentsFailure(t *testing.T) {
	t.Parallel()
	e := openEngine(t, dbPath(t), nil)
	parent := flow.Workflow[int, int]{Name: "failing-parent", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/detached", Detached: true}); err != nil {
			return 0, err
		}
		if _, err := flow.StartChild(wc, waiter, n, &flow.ChildOptions{RunID: wc.RunID() + "/attached"}); err != nil {
			return 0, err
		}
		return 0, errors.New("give up")
	}}
	flow.Register(e, waiter)
	flow.Register(e, parent)
	startEngine(t, e)
	ctx := waitCtx(t)
	p, err := flow.Start(ctx, e, parent, 1, &flow.StartOptions{RunID: "f"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("parent = %v, want rolled back", err)
	}
	eventually(t, "the attached child cancelled", func() bool {
		info, err := e.Inspect(ctx, "f/attached")
		return err == nil && info.Status == flow.StatusCancelled
	})
	if info, _ := e.Inspect(ctx, "f/detached"); info.Status.Finished() || info.CancelRequested {
		t.Fatalf("detached child after the parent failed: %s (cancel requested %v)", info.Status, info.CancelRequested)
	}
	if err := e.Cancel(ctx, "f/detached"); err != nil {
		t.Fatal(err)
	}
}

// barrier lets n callers through only once all n are waiting in it.
type barrier struct {
	n       int32
	arrived atomic.Int32
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: int32(n), all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	if b.arrived.Add(1) == b.n {
		close(b.all)
	}
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return flow.Permanent(errors.New("the other branches never reached the barrier: branches do not run concurrently"))
	}
}

// All runs its branches at once: each branch's step waits in a barrier that
// opens only when every branch is inside its step. The results come back in
// branch order, whatever order the branches finished in.
func TestAllRunsBranchesConcurrentlyInOrder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	const n = 3
	b := newBarrier(n)
	var c counter
	meet := flow.Step[int, int]{Name: "meet", Run: func(ctx context.Context, i int) (int, error) {
		c.inc(fmt.Sprint("meet", i))
		if err := b.wait(ctx); err != nil {
			return 0, err
		}
		// Later branches finish first.
		time.Sleep(time.Duration(n-i) * 10 * time.Millisecond)
		return i * 10, nil
	}}
	wf := flow.Workflow[int, []string]{Name: "fan-out", Run: func(wc flow.Context, _ int) ([]string, error) {
		branches := make([]func(flow.Context) (string, error), n)
		for i := range branches {
			branches[i] = func(wc flow.Context) (string, error) {
				v, err := flow.Do(wc, meet, i)
				return fmt.Sprintf("branch %d: %d", i, v), err
			}
		}
		return flow.All(wc, branches...)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run.Result(ctx)
	want := []string{"branch 0: 0", "branch 1: 10", "branch 2: 20"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("result = %q, %v; want %q", got, err, want)
	}
	for i := range n {
		if k := c.get(fmt.Sprint("meet", i)); k != 1 {
			t.Fatalf("branch %d's step ran %d times, want 1", i, k)
		}
	}
}

// When a branch fails, All returns its error after the other branches
// returned; the workflow fails and the compensations undo exactly the steps
// that completed, in any branch, in reverse completion order.
func TestAllFailedBranchCompensatesCompletedStepsInReverseOrder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var c counter
	var u undoLog
	a1, a2 := compensable(&c, &u, "a1"), compensable(&c, &u, "a2")
	b1, b3 := compensable(&c, &u, "b1"), compensable(&c, &u, "b3")
	c1, c2 := countedStep(&c, "c1"), compensable(&c, &u, "c2")
	after := compensable(&c, &u, "after")
	b1Done := make(chan struct{})
	var b1Once sync.Once
	b2 := flow.Step[string, string]{Name: "b2", Run: func(context.Context, string) (string, error) {
		c.inc("b2")
		return "", flow.Permanent(errors.New("out of stock"))
	}}
	// a2 runs after b1 completed, so completions interleave across branches.
	a2.Run = func(ctx context.Context, s string) (string, error) {
		select {
		case <-b1Done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		c.inc("a2")
		return s + "+a2", nil
	}
	seq := func(steps ...flow.Step[string, string]) func(flow.Context) (string, error) {
		return func(wc flow.Context) (string, error) {
			s := "in"
			for _, st := range steps {
				var err error
				if s, err = flow.Do(wc, st, s); err != nil {
					return "", err
				}
				if st.Name == "b1" {
					b1Once.Do(func() { close(b1Done) })
				}
			}
			return s, nil
		}
	}
	wf := flow.Workflow[string, string]{Name: "fan-out-fails", Run: func(wc flow.Context, in string) (string, error) {
		if _, err := flow.All(wc, seq(a1, a2), seq(b1, b2, b3), seq(c1, c2)); err != nil {
			return "", err
		}
		return flow.Do(wc, after, in)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, "in", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.Result(ctx)
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) || !strings.Contains(rb.Cause, "branch 1") || !strings.Contains(rb.Cause, "out of stock") {
		t.Fatalf("result err = %v, want rolled back by branch 1's out of stock", err)
	}
	if !strings.HasSuffix(rb.Step, "b2") || rb.Attempts != 1 {
		t.Errorf("rolled back by step %q after %d attempts, want branch 1's b2 after 1", rb.Step, rb.Attempts)
	}
	for name, want := range map[string]int{"a1": 1, "a2": 1, "b1": 1, "b2": 1, "b3": 0, "c1": 1, "c2": 1, "after": 0} {
		if got := c.get(name); got != want {
			t.Fatalf("step %s ran %d times, want %d", name, got, want)
		}
	}

	events, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var completed, compensated []string
	for _, ev := range events {
		short := ev.Step[strings.LastIndex(ev.Step, "/")+1:]
		switch {
		case ev.Kind == flow.EventStepCompleted && short != "c1":
			completed = append(completed, short)
		case ev.Kind == flow.EventCompensationCompleted:
			compensated = append(compensated, short)
		}
	}
	slices.Reverse(completed)
	if !slices.Equal(compensated, completed) {
		t.Fatalf("compensations ran in order %v, want the reverse completion order %v", compensated, completed)
	}
	if got := u.list(); !slices.Equal(got, compensated) {
		t.Fatalf("compensation hooks ran %v, history says %v", got, compensated)
	}
	slices.Sort(compensated)
	if !slices.Equal(compensated, []string{"a1", "a2", "b1", "c2"}) {
		t.Fatalf("compensated %v, want exactly a1, a2, b1, c2", compensated)
	}
}

// An engine closed while a fan-out's branches are inside steps leaves the
// run to the next engine, which replays it: no completed branch step runs
// again, the interrupted ones run again, and the result is right.
func TestAllResumesAfterRestartMidFanOut(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var c counter
	var block atomic.Bool
	block.Store(true)
	var inside atomic.Int32
	second := flow.Step[string, string]{Name: "second", Run: func(ctx context.Context, s string) (string, error) {
		c.inc("second " + s)
		if block.Load() {
			inside.Add(1)
			<-ctx.Done()
			return "", ctx.Err()
		}
		return s + "+second", nil
	}}
	first := flow.Step[string, string]{Name: "first", Run: func(_ context.Context, s string) (string, error) {
		c.inc("first " + s)
		return s, nil
	}}
	wf := flow.Workflow[string, []string]{Name: "fan-out-restart", Run: func(wc flow.Context, in string) ([]string, error) {
		branch := func(name string) func(flow.Context) (string, error) {
			return func(wc flow.Context) (string, error) {
				s, err := flow.Do(wc, first, name)
				if err != nil {
					return "", err
				}
				return flow.Do(wc, second, s)
			}
		}
		return flow.All(wc, branch("left"), branch("right"))
	}}
	register := func(e *flow.Engine) { flow.Register(e, wf) }

	e1, close1 := engineSession(t, path, nil, register)
	run, err := flow.Start(ctx, e1, wf, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "both branches to be inside their second step", func() bool { return inside.Load() == 2 })
	close1()

	block.Store(false)
	e2 := openEngine(t, path, nil)
	register(e2)
	info := inspect(t, e2, run.ID())
	if info.Status != flow.StatusPending {
		t.Fatalf("after close the run is %s, want pending (released)", info.Status)
	}
	startEngine(t, e2)
	got, err := handle(t, e2, wf, run.ID()).Result(ctx)
	if err != nil || !slices.Equal(got, []string{"left+second", "right+second"}) {
		t.Fatalf("result = %q, %v", got, err)
	}
	for _, side := range []string{"left", "right"} {
		if n := c.get("first " + side); n != 1 {
			t.Fatalf("completed step first of %s ran %d times, want 1", side, n)
		}
		if n := c.get("second " + side); n != 2 {
			t.Fatalf("interrupted step second of %s ran %d times, want 2", side, n)
		}
	}
	if n := countKind(t, e2, run.ID(), flow.EventStepFailed); n != 0 {
		t.Fatalf("%d step_failed events: an interrupted attempt must not count as a failure", n)
	}
}

// A branch whose attempt fails after a sibling branch parked the run (for
// its own retry) must still have that failure recorded: the attempt ran and
// failed, so it gets its step_retried event, its error and its backoff, like
// any failed attempt, instead of silently using up an attempt.
func TestAllRecordsFailureAfterSiblingParked(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var firstCalls, secondCalls atomic.Int32
	parked := make(chan struct{})
	var parkOnce sync.Once
	retry := &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, Jitter: -1}
	first := flow.Step[int, int]{Name: "first", Retry: retry, Run: func(context.Context, int) (int, error) {
		if firstCalls.Add(1) == 1 {
			return 0, errors.New("first fails once")
		}
		return 1, nil
	}}
	second := flow.Step[int, int]{Name: "second", Retry: retry, Run: func(ctx context.Context, _ int) (int, error) {
		if secondCalls.Add(1) > 1 {
			return 2, nil
		}
		select { // fail only once the first branch has parked the run
		case <-parked:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return 0, errors.New("second fails once")
	}}
	wf := flow.Workflow[int, int]{Name: "all-retry", Run: func(wc flow.Context, _ int) (int, error) {
		_, err := flow.All(wc,
			func(wc flow.Context) (int, error) {
				n, err := flow.Do(wc, first, 0)
				if err != nil {
					parkOnce.Do(func() { close(parked) })
				}
				return n, err
			},
			func(wc flow.Context) (int, error) { return flow.Do(wc, second, 0) },
		)
		return 0, err
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatalf("result: %v", err)
	}

	events, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	var retried []string
	for _, ev := range events {
		if ev.Kind == flow.EventStepRetried {
			retried = append(retried, ev.Step+": "+ev.Detail)
		}
	}
	if len(retried) != 2 {
		t.Errorf("step_retried events %q, want one per branch", retried)
	}
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Steps {
		if s.Status != "completed" || s.Attempts != 2 {
			t.Errorf("step %s: %s after %d attempts, want completed after 2", s.Name, s.Status, s.Attempts)
		}
	}
	if n := secondCalls.Load(); n != 2 {
		t.Errorf("second ran %d times, want 2", n)
	}
}

// Cancelling a run whose flow.All has one branch waiting on a timer and
// another with completed compensable steps must compensate all of those
// steps, whichever branch the execution that unwinds reaches first.
func TestAllCancelWhileBranchWaitsCompensatesSiblings(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		ctx := waitCtx(t)
		e := openEngine(t, dbPath(t), nil)
		var undone atomic.Int32
		reserved := make(chan struct{})
		var once sync.Once
		reserve := flow.Step[int, int]{
			Name:       "reserve",
			Run:        func(_ context.Context, n int) (int, error) { return n, nil },
			Compensate: func(context.Context, int, int) error { undone.Add(1); return nil },
		}
		hold := flow.Step[int, int]{Name: "hold", Run: func(ctx context.Context, n int) (int, error) {
			select {
			case <-reserved:
				return n, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}}
		wf := flow.Workflow[int, int]{Name: "all-cancel", Run: func(wc flow.Context, _ int) (int, error) {
			_, err := flow.All(wc,
				func(wc flow.Context) (int, error) {
					if _, err := flow.Do(wc, hold, 0); err != nil {
						return 0, err
					}
					return 0, flow.Sleep(wc, time.Hour)
				},
				func(wc flow.Context) (int, error) {
					for k := range 3 {
						if _, err := flow.Do(wc, reserve, k); err != nil {
							return 0, err
						}
					}
					once.Do(func() { close(reserved) })
					return 0, nil
				},
			)
			return 0, err
		}}
		flow.Register(e, wf)
		startEngine(t, e)
		run, err := flow.Start(ctx, e, wf, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the run waits", func() bool {
			info, err := e.Inspect(ctx, run.ID())
			return err == nil && info.Status == flow.StatusWaiting
		})
		if err := run.Cancel(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = run.Result(ctx)
		if !errors.Is(err, flow.ErrCancelled) || undone.Load() != 3 {
			info, _ := e.Inspect(ctx, run.ID())
			t.Fatalf("try %d: result %v, %d of 3 compensations ran; reason %q", i, err, undone.Load(), info.Reason)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A branch waiting on a long timer does not hold its siblings back: they run
// all their steps in the same execution.
func TestAllWaitingBranchDoesNotStopSiblings(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var ran atomic.Int32
	step := flow.Step[int, int]{Name: "work", Run: func(_ context.Context, n int) (int, error) {
		ran.Add(1)
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "all-sibling", Run: func(wc flow.Context, _ int) (int, error) {
		_, err := flow.All(wc,
			func(wc flow.Context) (int, error) { return 0, flow.Sleep(wc, time.Hour) },
			func(wc flow.Context) (int, error) {
				for k := range 5 {
					if _, err := flow.Do(wc, step, k); err != nil {
						return 0, err
					}
				}
				return 0, nil
			},
		)
		return 0, err
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits for its timer", func() bool {
		info, err := e.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if n := ran.Load(); n != 5 {
		t.Errorf("the sibling ran %d of its 5 steps before the run waited", n)
	}
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("result %v, want cancelled", err)
	}
}

// Cancelling a run that waits after two flow.All calls compensates the steps
// of both: on the execution that unwinds, the first All returns its
// branches' recorded results rather than the cancellation, so the body
// replays on into the second, and the unwind learns every completed step.
func TestAllCancelAfterFanOutsCompensatesEveryBranch(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var undone atomic.Int32
	step := flow.Step[int, int]{
		Name:       "flash",
		Run:        func(_ context.Context, n int) (int, error) { return n, nil },
		Compensate: func(context.Context, int, int) error { undone.Add(1); return nil },
	}
	fanOut := func(wc flow.Context) error {
		branches := make([]func(flow.Context) (int, error), 4)
		for i := range branches {
			branches[i] = func(wc flow.Context) (int, error) { return flow.Do(wc, step, i) }
		}
		_, err := flow.All(wc, branches...)
		return err
	}
	wf := flow.Workflow[int, int]{Name: "fan-outs-then-wait", Run: func(wc flow.Context, _ int) (int, error) {
		for range 2 {
			if err := fanOut(wc); err != nil {
				return 0, err
			}
		}
		return 0, flow.Sleep(wc, time.Hour)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits", func() bool {
		info, err := e.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if err := run.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		info, _ := e.Inspect(ctx, run.ID())
		t.Fatalf("result %v, want cancelled; reason %q", err, info.Reason)
	}
	if n := undone.Load(); n != 8 {
		t.Errorf("%d of 8 compensations ran", n)
	}
}

// First returns the branch that succeeds first and cancels the others with
// ErrLostRace; a replay returns the recorded winner and runs nothing new.
func TestFirstRecordsTheWinnerAndCancelsTheOthers(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := testConfig()
	cfg.Clock = clk
	e := openEngine(t, dbPath(t), cfg)

	var mu sync.Mutex
	var ran []string
	var loserCause error
	record := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, name)
	}
	slowStarted := make(chan struct{})
	fast := flow.Step[int, string]{Name: "fast", Run: func(_ context.Context, n int) (string, error) {
		record("fast")
		<-slowStarted // so that there is a loser to cancel
		return "fast wins", nil
	}}
	slow := flow.Step[int, string]{Name: "slow", Run: func(ctx context.Context, n int) (string, error) {
		record("slow")
		close(slowStarted)
		<-ctx.Done()
		mu.Lock()
		loserCause = context.Cause(ctx)
		mu.Unlock()
		return "", ctx.Err()
	}}
	wf := flow.Workflow[int, string]{Name: "racer", Run: func(wc flow.Context, n int) (string, error) {
		v, i, err := flow.First(wc,
			func(wc flow.Context) (string, error) { return flow.Do(wc, slow, n) },
			func(wc flow.Context) (string, error) { return flow.Do(wc, fast, n) },
		)
		if err != nil {
			return "", err
		}
		if err := flow.Sleep(wc, time.Hour); err != nil { // forces a replay of First
			return "", err
		}
		return v + " as branch " + string(rune('0'+i)), nil
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run to sleep", func() bool {
		info, _ := e.Inspect(ctx, run.ID())
		return info.Status == flow.StatusWaiting
	})
	clk.Advance(time.Hour)
	e.WakeAll()
	got, err := run.Result(ctx)
	if err != nil || got != "fast wins as branch 1" {
		t.Fatalf("result = %q, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(ran)
	if !slices.Equal(ran, []string{"fast", "slow"}) {
		t.Fatalf("step bodies ran %v, want each once (the replay runs nothing)", ran)
	}
	if !errors.Is(loserCause, flow.ErrLostRace) {
		t.Fatalf("loser's context cause = %v, want ErrLostRace", loserCause)
	}
	if n := countKind(t, e, run.ID(), flow.EventRaceWon); n != 1 {
		t.Fatalf("%d race_won events, want 1", n)
	}
}

// When the workflow fails after a race, the steps both the winner and a
// loser completed are compensated.
func TestFirstCompensatesLosersCompletedSteps(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var mu sync.Mutex
	var undone []string
	undoable := func(name string, block bool) flow.Step[int, int] {
		return flow.Step[int, int]{
			Name: name,
			Run: func(ctx context.Context, n int) (int, error) {
				if block {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return n, nil
			},
			Compensate: func(context.Context, int, int) error {
				mu.Lock()
				defer mu.Unlock()
				undone = append(undone, name)
				return nil
			},
		}
	}
	loserFirst, loserBlock := undoable("loser_first", false), undoable("loser_block", true)
	winner := undoable("winner", false)
	gate := make(chan struct{})
	wf := flow.Workflow[int, int]{Name: "race_then_fail", Run: func(wc flow.Context, n int) (int, error) {
		_, _, err := flow.First(wc,
			func(wc flow.Context) (int, error) {
				v, err := flow.Do(wc, loserFirst, n)
				if err != nil {
					return 0, err
				}
				close(gate)
				return flow.Do(wc, loserBlock, v)
			},
			func(wc flow.Context) (int, error) {
				<-gate
				return flow.Do(wc, winner, n)
			},
		)
		if err != nil {
			return 0, err
		}
		return 0, flow.Permanent(errors.New("fail after the race"))
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("result err = %v, want rolled back", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(undone, []string{"winner", "loser_first"}) {
		t.Fatalf("compensated %v, want [winner loser_first] (reverse completion order; the interrupted step is not undone)", undone)
	}
}

type verdict struct {
	Approved bool `json:"approved"`
}

// verdictWorkflow waits for a "verdict" signal and returns whether it
// approved.
var verdictWorkflow = flow.Workflow[string, bool]{
	Name: "verdict",
	Run: func(wc flow.Context, _ string) (bool, error) {
		v, err := flow.Receive[verdict](wc, "verdict", 0)
		if err != nil {
			return false, err
		}
		return v.Approved, nil
	},
}

// historyOf returns the run's history, failing the test on error.
func historyOf(t *testing.T, e *flow.Engine, runID string) []flow.Event {
	t.Helper()
	events, err := e.History(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// rejections returns the details of the run's signal_rejected events.
func rejections(t *testing.T, e *flow.Engine, runID string) []string {
	t.Helper()
	var out []string
	for _, ev := range historyOf(t, e, runID) {
		if ev.Kind == flow.EventSignalRejected {
			out = append(out, ev.Detail)
		}
	}
	return out
}

// A signal whose payload does not decode into the receiver's type is set
// aside, recorded, and the run keeps waiting; the next well-typed signal of
// the name completes it. Before, the run was suspended with a DecodeError
// on that receive and on every resume.
func TestWronglyTypedSignalIsRejectedAndTheRunKeepsWaiting(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openEngine(t, path, nil)
	flow.Register(e, verdictWorkflow)
	startEngine(t, e)

	run, err := flow.Start(ctx, e, verdictWorkflow, "expense-7", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)

	// Sent while the run waits: received (and rejected) at once.
	sent, err := flow.Signal(ctx, e, run.ID(), "verdict", map[string]string{"approved": "yes"}, nil)
	if err != nil || !sent {
		t.Fatalf("signal = %v, %v; want sent", sent, err)
	}
	eventually(t, "the first rejection", func() bool { return len(rejections(t, e, run.ID())) == 1 })
	if info := awaitStatus(t, e, run.ID(), flow.StatusWaiting); info.Reason != "" && strings.Contains(info.Reason, "decode") {
		t.Fatalf("run waits with reason %q", info.Reason)
	}

	// Stored before the run looks again, in the order sent: a bad one, then a
	// good one; the wait rejects the first and receives the second.
	if _, err := flow.Signal(ctx, e, run.ID(), "verdict", "approved", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "verdict", verdict{Approved: true}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := run.Result(ctx)
	if err != nil || !got {
		t.Fatalf("result = %v, %v; want true, nil", got, err)
	}

	details := rejections(t, e, run.ID())
	if len(details) != 2 {
		t.Fatalf("rejections %q, want 2", details)
	}
	for _, d := range details {
		if !strings.Contains(d, "signal verdict #") || !strings.Contains(d, "flow_test.verdict") {
			t.Errorf("rejection %q does not name the signal and the type", d)
		}
	}
	if !strings.Contains(details[0], `cannot unmarshal string`) || !strings.Contains(details[0], "approved") {
		t.Errorf("rejection %q does not say why", details[0])
	}
	if n := countKind(t, e, run.ID(), flow.EventRunSuspended); n != 0 {
		t.Errorf("the run was suspended %d times", n)
	}
	if n := countKind(t, e, run.ID(), flow.EventSignalReceived); n != 1 {
		t.Errorf("%d signal_received events, want 1", n)
	}
	stored := storedSignals(t, e, run.ID())
	if len(stored) != 3 {
		t.Fatalf("stored signals %+v, want 3", stored)
	}
	for i, s := range stored {
		rejected := strings.HasPrefix(s.ConsumedBy, "rejected by ")
		if rejected != (i < 2) || s.ConsumedBy == "" {
			t.Errorf("signal %d (%s) consumed by %q; want the first two rejected, the last received", i, s.Payload, s.ConsumedBy)
		}
	}
}

// A run that recorded a wrongly typed payload as received, the way flowlite
// did before it rejected them, was suspended with a DecodeError on every
// resume. Resume now reopens that receive, marks its signal rejected, and
// the run waits for the next signal.
func TestRunWedgedByARecordedBadSignalResumes(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	e, closeEngine := engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, verdictWorkflow) })
	run, err := flow.Start(ctx, e, verdictWorkflow, "expense-8", &flow.StartOptions{RunID: "wedged"})
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	closeEngine()

	// What the old engine left: the signal consumed by the receive, the
	// receive completed with the payload, the run suspended. Damage to
	// recover from: no API writes a state the engine no longer produces.
	db := rawDB(t, path)
	const waitKey = "flow.receive:verdict#0 of run wedged"
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO flowlite_signals (run_id, name, payload, sent_at, consumed_by) VALUES ('wedged', 'verdict', CAST('"yes"' AS BLOB), 1, '%s')`, waitKey),
		`UPDATE flowlite_steps SET status = 'completed', output = CAST('{"payload":"yes"}' AS BLOB), completed_seq = 1, finished_at = 1
		 WHERE run_id = 'wedged' AND name = 'flow.receive:verdict'`,
		`UPDATE flowlite_runs SET status = 'suspended', reason = 'run wedged: decode payload of step signal verdict into flow_test.verdict: json: cannot unmarshal string'
		 WHERE id = 'wedged'`,
	} {
		res, err := db.Exec(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows", q, n)
		}
	}

	e, _ = engineSession(t, path, nil, func(e *flow.Engine) { flow.Register(e, verdictWorkflow) })
	if err := e.Resume(ctx, "wedged"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the recorded receive to be rejected", func() bool { return len(rejections(t, e, "wedged")) == 1 })
	awaitStatus(t, e, "wedged", flow.StatusWaiting)
	if d := rejections(t, e, "wedged")[0]; !strings.Contains(d, "reopened") || !strings.Contains(d, "flow_test.verdict") {
		t.Errorf("rejection %q does not say the receive was reopened and why", d)
	}
	if stored := storedSignals(t, e, "wedged"); len(stored) != 1 || stored[0].ConsumedBy != "rejected by "+waitKey {
		t.Fatalf("stored signals %+v; want the recorded one rejected", stored)
	}

	if _, err := flow.Signal(ctx, e, "wedged", "verdict", verdict{Approved: true}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := handle(t, e, verdictWorkflow, "wedged").Result(ctx)
	if err != nil || !got {
		t.Fatalf("result = %v, %v; want true, nil", got, err)
	}
	var decodeErr *flow.DecodeError
	if errors.As(err, &decodeErr) {
		t.Fatal(err)
	}
}

var sleepers = flag.Int("sleepers", 100_000, "runs BenchmarkSleepingRuns parks")

// BenchmarkSleepingRuns parks many runs in a day-long flow.Sleep and reports
// what they cost: database bytes per sleeping run, heap bytes per sleeping
// run, the throughput of other runs while they sleep against the same on an
// empty database (claim_ratio = loaded / empty, measured in this run), and
// how long waking all of them takes. Each throughput is the best of three
// rounds, so that a hiccup of a shared machine does not decide the ratio.
// Run it once:
//
//	go test -run '^$' -bench SleepingRuns -benchtime 1x -timeout 30m ./flow/
func BenchmarkSleepingRuns(b *testing.B) {
	const otherRuns = 2000
	for b.Loop() {
		empty := bestThroughput(b, openBenchEngine(b, clock.NewManual(time.Now())), otherRuns)

		clk := clock.NewManual(time.Now())
		path := filepath.Join(b.TempDir(), "sleepers.db")
		e := openBenchEngineAt(b, path, clk)
		sleeper := flow.Workflow[int, int]{Name: "sleeper", Run: func(wc flow.Context, n int) (int, error) {
			if err := flow.Sleep(wc, 24*time.Hour); err != nil {
				return 0, err
			}
			return n, nil
		}}
		flow.Register(e, sleeper)
		startRuns(b, e, sleeper, *sleepers, "sleepy")
		waitCount(b, e, flow.StatusWaiting, int64(*sleepers))

		runtime.GC()
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		size := checkpointedSize(b, e)
		loaded := bestThroughput(b, e, otherRuns)

		clk.Advance(25 * time.Hour)
		start := time.Now()
		e.WakeAll()
		waitCount(b, e, flow.StatusCompleted, int64(*sleepers+throughputRounds*otherRuns))
		wake := time.Since(start)

		b.ReportMetric(float64(size)/float64(*sleepers), "db-bytes/sleeper")
		b.ReportMetric(float64(mem.HeapInuse)/float64(*sleepers), "heap-bytes/sleeper")
		b.ReportMetric(empty, "runs/s-empty")
		b.ReportMetric(loaded, "runs/s-with-sleepers")
		b.ReportMetric(loaded/empty, "claim-ratio")
		b.ReportMetric(wake.Seconds(), "s-to-wake-all")
		b.ReportMetric(float64(*sleepers)/wake.Seconds(), "wakes/s")
	}
}

func openBenchEngine(b *testing.B, clk *clock.Manual) *flow.Engine {
	return openBenchEngineAt(b, filepath.Join(b.TempDir(), "bench.db"), clk)
}

func openBenchEngineAt(b *testing.B, path string, clk *clock.Manual) *flow.Engine {
	e, err := flowsqlite.Open(context.Background(), path, &flow.Config{
		Clock: clk,
		Queues: map[string]flow.QueueConfig{
			"sleepy": {Concurrency: 64},
			"other":  {Concurrency: 32},
		},
		PollInterval: 50 * time.Millisecond,
		LeaseTimeout: time.Hour, // the manual clock jumps a day
		// The day-long jump would make the cleaner delete the runs this
		// benchmark counts.
		CleanInterval: -1,
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return e
}

// throughputRounds is how many times bestThroughput measures.
const throughputRounds = 3

// bestThroughput returns the best of throughputRounds otherThroughput.
func bestThroughput(b *testing.B, e *flow.Engine, n int) float64 {
	best := 0.0
	for range throughputRounds {
		best = max(best, otherThroughput(b, e, n))
	}
	return best
}

// otherThroughput starts n one-step runs on the "other" queue and returns
// runs/s until all completed.
func otherThroughput(b *testing.B, e *flow.Engine, n int) float64 {
	wf := flow.Workflow[int, int]{Name: "other", Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, noop, n) }}
	_ = flow.RegisterSafely(e, wf) // already registered on the second call
	start := time.Now()
	runs := startRuns(b, e, wf, n, "other")
	for _, r := range runs {
		if _, err := r.Result(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

func startRuns(b *testing.B, e *flow.Engine, wf flow.Workflow[int, int], n int, queue string) []*flow.Run[int] {
	runs := make([]*flow.Run[int], n)
	var g errgroup.Group
	for p := range producers {
		g.Go(func() error {
			for i := p; i < n; i += producers {
				var err error
				if runs[i], err = flow.Start(context.Background(), e, wf, i, &flow.StartOptions{Queue: queue}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return runs
}

func waitCount(b *testing.B, e *flow.Engine, status flow.RunStatus, want int64) {
	for {
		counts, err := e.CountRuns(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if counts[status] >= want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkpointedSize moves the WAL of e into its database file and returns
// the file's size.
func checkpointedSize(b *testing.B, e *flow.Engine) int64 {
	b.Helper()
	ctx := context.Background()
	if _, err := e.Checkpoint(ctx, flowsqlite.CheckpointTruncate); err != nil {
		b.Fatal(err)
	}
	h, err := e.FileHealth(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return h.DBBytes
}
