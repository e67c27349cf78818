package flow_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtest"
	"github.com/flowlite/flowlite/internal/clock"
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

// leaseOwner reads the run's lease owner, which the API does not expose.
func leaseOwner(t *testing.T, path, runID string) string {
	t.Helper()
	var owner *string
	if err := rawDB(t, path).QueryRow(`SELECT lease_owner FROM flowlite_runs WHERE id = ?`, runID).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner == nil {
		return ""
	}
	return *owner
}

// storedSignal is a row of the signals table.
type storedSignal struct {
	Name       string
	Payload    string
	Key        string
	ConsumedBy string
}

// storedSignals lists the signals stored for a run, oldest first.
func storedSignals(t *testing.T, path, runID string) []storedSignal {
	t.Helper()
	rows, err := rawDB(t, path).Query(`SELECT name, payload, coalesce(key, ''), coalesce(consumed_by, '') FROM flowlite_signals WHERE run_id = ? ORDER BY id`, runID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedSignal
	for rows.Next() {
		var s storedSignal
		var payload []byte
		if err := rows.Scan(&s.Name, &payload, &s.Key, &s.ConsumedBy); err != nil {
			t.Fatal(err)
		}
		s.Payload = string(payload)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
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

// A run sleeping for a day holds no lease, survives the engine being closed
// and another opened on the file, keeps the due time recorded the first
// time when it is replayed early, and wakes once the clock passes it.
func TestSleepIsDurableAndKeepsItsDueTime(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
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
	if owner := leaseOwner(t, path, run.ID()); owner != "" {
		t.Fatalf("sleeping run is leased by %q", owner)
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
	path := sqlitePath(t)
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
	for _, s := range storedSignals(t, path, run.ID()) {
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
	path := sqlitePath(t)
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
	if s := storedSignals(t, path, run.ID()); len(s) != 0 {
		t.Fatalf("signals stored for a finished run: %v", s)
	}
}

// Two signals with one key are one signal: the run receives the first, and
// its next Receive times out.
func TestSignalKeyMakesSendingIdempotent(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
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
	if s := storedSignals(t, path, run.ID()); len(s) != 1 || s[0].Key != "payment-1" {
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
	path := sqlitePath(t)
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
	if s := storedSignals(t, path, recv.ID()); len(s) != 1 {
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
	path := sqlitePath(t)
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
		stored := storedSignals(t, path, r.ID())
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
	path := sqlitePath(t)
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
		for _, s := range storedSignals(t, path, r.ID()) {
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
