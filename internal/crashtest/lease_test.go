package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// offsetClock is the system clock shifted by a settable offset: an engine
// using it sees every other engine's leases as older than they are.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time      { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) set(d time.Duration) { c.offset.Store(int64(d)) }

func newOffsetClock(d time.Duration) *offsetClock {
	c := &offsetClock{}
	c.set(d)
	return c
}

// TestZombieCannotOverwrite is reliability.md B1 with two engines on one
// file in one process. Engine A claims a run and its step blocks. Engine B,
// whose clock runs an hour ahead, sees A's lease as expired, rescues the
// run, claims it with a new fence and runs the step itself. A's heartbeat
// then fails, which must cancel A's step context; when A's step finally
// returns, whatever it returns must be rejected: the run, its steps and its
// history stay exactly as B recorded them.
func TestZombieCannotOverwrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// zombie is what A's step returns once released.
		zombie func() (string, error)
		// bWaits makes B's step wait until A's step returned, so A's late
		// outcome arrives while B still holds the run, not after B finished.
		bWaits bool
	}{
		{"late output after takeover finished", func() (string, error) { return "A", nil }, false},
		{"late output during takeover", func() (string, error) { return "A", nil }, true},
		{"late error after takeover finished", func() (string, error) { return "", errors.New("zombie failed") }, false},
		{"late permanent error during takeover", func() (string, error) { return "", flow.Permanent(errors.New("zombie failed")) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "flow.db")

			entered := make(chan context.Context, 1)
			releaseA := make(chan struct{})
			aReturned := make(chan struct{})
			wfA := flow.Workflow[string, string]{Name: "zombie", Run: func(wc flow.Context, in string) (string, error) {
				return flow.Do(wc, flow.Step[string, string]{Name: "s1", Run: func(ctx context.Context, in string) (string, error) {
					entered <- ctx
					<-releaseA // deaf to ctx, like code stuck in a syscall
					defer close(aReturned)
					return tc.zombie()
				}}, in)
			}}
			wfB := flow.Workflow[string, string]{Name: "zombie", Run: func(wc flow.Context, in string) (string, error) {
				return flow.Do(wc, flow.Step[string, string]{Name: "s1", Run: func(ctx context.Context, in string) (string, error) {
					if tc.bWaits {
						select {
						case <-aReturned:
							time.Sleep(100 * time.Millisecond) // let A try its write
						case <-ctx.Done():
							return "", ctx.Err()
						}
					}
					return "B", nil
				}}, in)
			}}

			logsA := &logBuffer{}
			a, err := flowsqlite.Open(ctx, path, &flow.Config{
				// One slot: A cannot claim the run again while its step hangs.
				Queues:            map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 1}},
				LeaseTimeout:      time.Second,
				HeartbeatInterval: 100 * time.Millisecond,
				PollInterval:      20 * time.Millisecond,
				Logger:            logsA.logger(),
				WorkerID:          "A",
			}, &flowsqlite.Options{BusyTimeout: shortBusy})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			// Runs before Close, which would wait forever for a step that is
			// still blocked when the test fails early.
			release := sync.OnceFunc(func() { close(releaseA) })
			defer release()
			flow.Register(a, wfA)
			if err := a.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := flow.Start(ctx, a, wfA, "in", &flow.StartOptions{RunID: "r"}); err != nil {
				t.Fatal(err)
			}
			var stepCtxA context.Context
			select {
			case stepCtxA = <-entered:
			case <-time.After(10 * time.Second):
				t.Fatal("A never ran its step")
			}
			raw := openRaw(t, path)
			fenceA := dump(t, raw, "SELECT fence, lease_owner FROM flowlite_runs WHERE id = 'r'")

			b, err := flowsqlite.Open(ctx, path, &flow.Config{
				LeaseTimeout:      time.Second,
				HeartbeatInterval: 100 * time.Millisecond,
				RescueInterval:    50 * time.Millisecond,
				PollInterval:      20 * time.Millisecond,
				Clock:             newOffsetClock(time.Hour),
				WorkerID:          "B",
			}, &flowsqlite.Options{BusyTimeout: shortBusy})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			flow.Register(b, wfB)
			if err := b.Start(ctx); err != nil {
				t.Fatal(err)
			}

			// A's heartbeat fails once B claimed the run: A's step context
			// ends within a heartbeat or so.
			lostAt := time.Now()
			select {
			case <-stepCtxA.Done():
			case <-time.After(5 * time.Second):
				t.Error("A's step context was not cancelled after B took the run over")
			}
			if stepCtxA.Err() != nil {
				t.Logf("A's step context ended %s after B started: %v", time.Since(lostAt).Round(time.Millisecond), context.Cause(stepCtxA))
			}
			if c := logsA.count("lease lost"); c == 0 {
				t.Errorf("A did not log the lost lease:\n%s", logsA)
			}

			var before runState
			if !tc.bWaits {
				run, err := flow.Lookup(ctx, b, wfB, "r")
				if err != nil {
					t.Fatal(err)
				}
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				out, err := run.Result(wctx)
				cancel()
				if err != nil || out != "B" {
					t.Fatalf("B's result = %q, %v; want B", out, err)
				}
				before = snapshot(t, raw, "r")
			}

			release()
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := a.Stop(stopCtx); err != nil { // waits until A's execution is over
				t.Errorf("stop A: %v", err)
			}
			cancel()

			run, err := flow.Lookup(ctx, b, wfB, "r")
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			out, err := run.Result(wctx)
			cancel()
			if err != nil || out != "B" {
				t.Fatalf("result = %q, %v; want B's output", out, err)
			}
			after := snapshot(t, raw, "r")
			if !tc.bWaits {
				if d := before.diff(after); d != "" {
					t.Errorf("A's late return changed what B recorded:\n%s", d)
				}
			}
			// A's late output is never recorded (the snapshot diff above):
			// either its write was rejected by the fence, or A knew its lease
			// was lost and did not try. Either way A must have noticed.
			if logsA.count("lease lost") == 0 {
				t.Errorf("A never noticed it lost the lease:\n%s", logsA)
			}

			info, err := b.Inspect(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if len(info.Steps) != 1 || info.Steps[0].Status != "completed" || string(info.Steps[0].Output) != `"B"` || info.Steps[0].Attempts != 2 {
				t.Errorf("steps = %+v, want s1 completed by B's attempt 2 with output \"B\"", info.Steps)
			}
			hist, err := b.History(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			var completions, finishes, fails int
			for _, ev := range hist {
				switch ev.Kind {
				case "step_completed":
					completions++
					if ev.Attempt != 2 {
						t.Errorf("step_completed by attempt %d, want B's attempt 2", ev.Attempt)
					}
				case "run_completed":
					finishes++
				case "step_failed", "step_retried", "workflow_failed":
					fails++
				}
			}
			if completions != 1 || finishes != 1 || fails != 0 {
				t.Errorf("history has %d step completions, %d run completions, %d failures; want 1, 1, 0: %v",
					completions, finishes, fails, kinds(hist))
			}
			if hist[len(hist)-1].Kind != "run_completed" {
				t.Errorf("history does not end with run_completed: %v", kinds(hist))
			}
			fenceB := dump(t, raw, "SELECT fence, lease_owner FROM flowlite_runs WHERE id = 'r'")
			t.Logf("A held %v; after B: %v", fenceA, fenceB)
		})
	}
}

// TestRescueLeavesFinishedRunsAlone is reliability.md B2, deterministic
// part: once a run completed or was rolled back, a rescuer whose clock is a
// day ahead, and so sees every lease as expired, changes nothing about it:
// not its row (status, output, fence, updated_at …), not its steps, not
// its history. (The rescue lists expired leases and updates them in one
// BEGIN IMMEDIATE transaction, and its UPDATE re-checks lease_owner IS NOT
// NULL AND lease_expires_at < now AND status IN (running, compensating), so
// no completion can slip between its read and its write;
// TestRescueRacesCompletions exercises the race.)
func TestRescueLeavesFinishedRunsAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flow.db")
	w, err := flowsqlite.Open(ctx, path, &flow.Config{LeaseTimeout: time.Second, PollInterval: 20 * time.Millisecond, WorkerID: "worker"}, &flowsqlite.Options{BusyTimeout: shortBusy})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	flow.Register(w, sagaWorkflow)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ids := []string{runID(0), runID(2)} // 0 completes, 2 is rolled back
	for _, id := range ids {
		n, _ := runNumber(id)
		run, err := flow.Start(ctx, w, sagaWorkflow, sagaIn{N: n, Fail: sagaFails(n)}, &flow.StartOptions{RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err = run.Result(wctx)
		cancel()
		if sagaFails(n) != errors.Is(err, flow.ErrRolledBack) {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	raw := openRaw(t, path)
	before := make(map[string]runState)
	for _, id := range ids {
		before[id] = snapshot(t, raw, id)
	}

	r, err := flowsqlite.Open(ctx, path, &flow.Config{
		LeaseTimeout: time.Second, RescueInterval: 10 * time.Millisecond, PollInterval: 10 * time.Millisecond,
		Clock: newOffsetClock(24 * time.Hour), WorkerID: "rescuer",
	}, &flowsqlite.Options{BusyTimeout: shortBusy})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	flow.Register(r, sagaWorkflow)
	if n, err := r.Rescue(ctx); err != nil || n != 0 {
		t.Errorf("Rescue = %d, %v; want 0 runs rescued", n, err)
	}
	// Also let its loops (rescuer and claimer) run for a while.
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := r.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if d := before[id].diff(snapshot(t, raw, id)); d != "" {
			t.Errorf("run %s changed:\n%s", id, d)
		}
	}
}

// TestRescueRacesCompletions is reliability.md B2, racing part: one engine
// works 3-step runs while a second engine on the same file keeps calling
// Rescue with a clock shifted forward by about a lease, so it takes runs
// away in the middle of steps, right before, during and after their
// completions. Every run must still complete exactly once with the right
// output, and no completed run may be touched afterwards: its last event is
// run_completed, its lease is cleared, its updated_at is its finished_at,
// and a final rescue a day ahead changes nothing.
func TestRescueRacesCompletions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flow.db")
	const runs = 100
	const lease = time.Second

	var mu sync.Mutex
	executions := make(map[string]int) // "run/step" → bodies run
	// Every rescue interrupts an attempt, and an interrupted attempt counts:
	// give the steps attempts enough for the race's many rescues, which
	// test fencing here, not the attempt limit.
	retry := &flow.RetryPolicy{MaxAttempts: 1000}
	quick := func(name string) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name, Retry: retry, Run: func(ctx context.Context, v int) (int, error) {
			select {
			case <-time.After(time.Duration(rand.IntN(20)) * time.Millisecond):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			return v*2 + 1, nil
		}}
	}
	s1, s2, s3 := quick("s1"), quick("s2"), quick("s3")
	wf := flow.Workflow[int, int]{Name: "race", Run: func(wc flow.Context, v int) (int, error) {
		for _, s := range []flow.Step[int, int]{s1, s2, s3} {
			var err error
			if v, err = flow.Do(wc, s, v); err != nil {
				return 0, err
			}
		}
		return v, nil
	}}
	want := func(v int) int { return ((v*2+1)*2+1)*2 + 1 }

	logsW := &logBuffer{}
	w, err := flowsqlite.Open(ctx, path, &flow.Config{
		Queues:            map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 8}},
		LeaseTimeout:      lease,
		HeartbeatInterval: 200 * time.Millisecond,
		PollInterval:      10 * time.Millisecond,
		Logger:            logsW.logger(),
		WorkerID:          "worker",
		Intercept: func(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
			mu.Lock()
			executions[info.RunID+"/"+info.Step]++
			mu.Unlock()
			return call(ctx)
		},
	}, &flowsqlite.Options{BusyTimeout: shortBusy})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	flow.Register(w, wf)

	clock := newOffsetClock(0)
	r, err := flowsqlite.Open(ctx, path, &flow.Config{LeaseTimeout: lease, Clock: clock, WorkerID: "rescuer"}, &flowsqlite.Options{BusyTimeout: shortBusy})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// Race: start the runs one by one while rescuing with a lease-sized
	// clock shift. With offset lease-x, a run is rescued when its lease was
	// last renewed more than x ago; x from -10ms (every leased run) to 40ms.
	rescued, started := 0, 0
	deadline := time.Now().Add(3 * time.Second)
	for started < runs || time.Now().Before(deadline) {
		if started < runs {
			if _, err := flow.Start(ctx, w, wf, started, &flow.StartOptions{RunID: fmt.Sprintf("race-%03d", started)}); err != nil {
				t.Fatal(err)
			}
			started++
		}
		clock.set(lease - time.Duration(-10+rand.IntN(51))*time.Millisecond)
		n, err := r.Rescue(ctx)
		if err != nil {
			t.Fatalf("rescue: %v", err)
		}
		rescued += n
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
	}
	counts, err := w.CountRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("race: %d rescues, %d runs completed during the race, %d lease-lost warnings", rescued, counts[flow.StatusCompleted], logsW.count("lease lost"))
	if rescued == 0 || counts[flow.StatusCompleted] == 0 {
		t.Errorf("the race did not happen: %d rescues, %d completions", rescued, counts[flow.StatusCompleted])
	}
	// A lost lease is expected here: the engine must give up the run
	// quietly, not report it as an error and try to release it.
	if n := logsW.count(`msg="run interrupted"`); n > 0 {
		t.Errorf("%d lost leases were handled as interrupted runs (logged at error level, then a doomed release)", n)
	}

	// Drain without the rescuer, then check every run.
	raw := openRaw(t, path)
	final := make(map[string]runState)
	for i := range runs {
		id := fmt.Sprintf("race-%03d", i)
		run, err := flow.Lookup(ctx, w, wf, id)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := run.Result(wctx)
		cancel()
		if err != nil || out != want(i) {
			t.Errorf("run %s = %d, %v; want %d", id, out, err, want(i))
			continue
		}
		hist, err := w.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		completed := make(map[string]int)
		runCompleted := 0
		for _, ev := range hist {
			switch ev.Kind {
			case "step_completed":
				completed[ev.Step]++
			case "run_completed":
				runCompleted++
			}
		}
		if completed["s1"] != 1 || completed["s2"] != 1 || completed["s3"] != 1 || runCompleted != 1 {
			t.Errorf("run %s: step completions %v, run completions %d; want one each: %v", id, completed, runCompleted, kinds(hist))
		}
		if k := hist[len(hist)-1].Kind; k != "run_completed" {
			t.Errorf("run %s: something happened after it completed: %v", id, kinds(hist))
		}
		row := dump(t, raw, "SELECT lease_owner IS NULL AND lease_expires_at IS NULL AND updated_at = finished_at FROM flowlite_runs WHERE id = ?", id)
		if len(row) != 1 || !strings.Contains(row[0], "=1 ") {
			t.Errorf("run %s: row modified after completion: %v", id, dump(t, raw, "SELECT * FROM flowlite_runs WHERE id = ?", id))
		}
		final[id] = snapshot(t, raw, id)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	clock.set(24 * time.Hour)
	if n, err := r.Rescue(ctx); err != nil || n != 0 {
		t.Errorf("final rescue = %d, %v; want 0", n, err)
	}
	for id, st := range final {
		if d := st.diff(snapshot(t, raw, id)); d != "" {
			t.Errorf("run %s changed after it completed:\n%s", id, d)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	reruns := 0
	for _, n := range executions {
		reruns += n - 1
	}
	t.Logf("%d step bodies ran again after a rescue took their run away", reruns)
}
