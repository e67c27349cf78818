package crashtest

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// childContinue is the value of envChild that makes a child work the
// counting loops of TestCrashContinueAsNew.
const childContinue = "continue"

// canEvery is how many iterations an execution of the counting loop makes
// before it continues as new.
const canEvery = 3

// countState is what the counting loop carries from one execution to the
// next.
type countState struct {
	Count  int `json:"count"`
	Target int `json:"target"`
}

// countingLoop counts to its Target with a step per iteration (which
// takes a little while, like a call to the outside world, so kills land
// inside executions), continuing as new every canEvery iterations.
var countingLoop = flow.Workflow[countState, int]{Name: "crash_counting_loop", Run: func(wc flow.Context, s countState) (int, error) {
	for range canEvery {
		if s.Count == s.Target {
			return s.Count, nil
		}
		n, err := flow.Do(wc, countTick, s.Count)
		if err != nil {
			return 0, err
		}
		s.Count = n
	}
	return 0, flow.ContinueAsNew(wc, s)
}}

var countTick = flow.Step[int, int]{Name: "count_tick", Retry: fastRetry, Run: func(ctx context.Context, n int) (int, error) {
	if err := work(ctx); err != nil {
		return 0, err
	}
	return n + 1, nil
}}

// continueChildMain is a worker process for the counting loops: it works
// the database until killed, or in drain mode until no run is left.
func continueChildMain() int {
	c, code := newWorkerEnv("continue child")
	if c == nil {
		return code
	}
	defer c.close()
	cfg := childConfig(c.inc, c.lw, c.log)
	var e *flow.Engine
	var err error
	if os.Getenv(envPGDSN) != "" {
		e, err = openWorkerEngine(c.ctx, cfg)
	} else {
		e, err = flowsqlite.Open(c.ctx, os.Getenv(envDB), cfg, childOptions)
	}
	if err != nil {
		if c.ctx.Err() != nil {
			return 0 // SIGTERM while opening
		}
		return c.fail("open: %v", err)
	}
	defer e.Close()
	flow.Register(e, countingLoop)
	return workChild(c.ctx, e, c.fail)
}

// TestCrashContinueAsNew SIGKILLs worker processes while they run counting
// loops that continue as new every few iterations, then lets a last worker
// drain them, and checks that no iteration was lost or doubled: each run
// returns its target, completed one count_tick per iteration over all its
// executions (the history keeps every execution's events), continued as
// new exactly once per execution that ended, carried exactly the count its
// executions made into the last one, and stands in its last execution with
// no more records than one execution makes. FLOWLITE_CRASH_LONG=1 makes it
// longer.
func TestCrashContinueAsNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	continueCrash(t, &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db"), ledger: filepath.Join(dir, "ledger.txt")})
}

// TestPGCrashContinueAsNew is the continue-as-new crash test on a
// PostgreSQL schema (FLOWLITE_PG_TEST=1): there the next execution's input,
// the deletion of the old step records and the continued_as_new event are
// one READ COMMITTED transaction fenced by the lease, which a worker killed
// mid-commit or a rescuer taking the run over must not split or repeat.
func TestPGCrashContinueAsNew(t *testing.T) {
	continueCrash(t, pgHarness(t))
}

func continueCrash(t *testing.T, h *harness) {
	runs, target, kills := 8, 20, 6
	if *longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1" {
		runs, target, kills = 40, 60, 40
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xca7))
	ctx := t.Context()

	parent, err := h.openEngine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	flow.Register(parent, countingLoop)
	for n := range runs {
		if _, err := flow.Start(ctx, parent, countingLoop, countState{Target: target + n}, &flow.StartOptions{RunID: runID(n)}); err != nil {
			t.Fatal(err)
		}
	}
	for inc := 1; inc <= kills; inc++ {
		c := h.spawnMode(childContinue, inc, false)
		select {
		case <-c.ready:
		case err := <-c.done:
			h.fail("child %d exited before it was ready: %v", inc, err)
		case <-time.After(30 * time.Second):
			h.fail("child %d not ready", inc)
		}
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		c.kill()
	}
	last := h.spawnMode(childContinue, kills+1, true)
	select {
	case err := <-last.done:
		if err != nil {
			h.fail("draining child: %v", err)
		}
	case <-time.After(3 * time.Minute):
		h.fail("runs not drained in time")
	}
	resumedAcross := 0
	for n := range runs {
		id, want := runID(n), target+n
		info, err := parent.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.Status != flow.StatusCompleted || string(info.Output) != strconv.Itoa(want) {
			t.Errorf("run %s is %s with output %s (%s %s), want completed with %d", id, info.Status, info.Output, info.Error, info.Reason, want)
			continue
		}
		// want/canEvery executions end with canEvery iterations each and
		// continue as new; the next one makes what is left (perhaps
		// nothing) and returns.
		wantExecution := want/canEvery + 1
		hist, err := parent.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ticks, continued, claims := 0, 0, 0
		// The count_tick occurrences (numbered from 0) completed in each
		// execution: every ended execution made 0..canEvery-1 once each.
		segment := map[int]int{}
		for _, ev := range hist {
			switch ev.Kind {
			case flow.EventStepCompleted:
				if ev.Step == countTick.Name {
					ticks++
					segment[ev.Occurrence]++
				}
			case flow.EventContinuedAsNew:
				continued++
				for occ := range canEvery {
					if segment[occ] != 1 {
						t.Errorf("run %s: execution %d completed count_tick #%d %d times, want once", id, continued, occ, segment[occ])
					}
				}
				if len(segment) != canEvery {
					t.Errorf("run %s: execution %d completed count_tick occurrences %v, want 0..%d", id, continued, segment, canEvery-1)
				}
				segment = map[int]int{}
			case flow.EventRunClaimed:
				claims++
			}
		}
		if ticks != want {
			t.Errorf("run %s: %d count_tick completions, want %d (one per iteration)", id, ticks, want)
		}
		if continued != wantExecution-1 || info.Execution != wantExecution {
			t.Errorf("run %s: %d continued_as_new events, execution %d; want %d and %d", id, continued, info.Execution, wantExecution-1, wantExecution)
		}
		// What the ended executions carried over: the last execution
		// started from exactly the iterations they made.
		var carried countState
		if err := json.Unmarshal(info.Input, &carried); err != nil {
			t.Errorf("run %s: input of the last execution %s: %v", id, info.Input, err)
		} else if wantIn := (countState{Count: (wantExecution - 1) * canEvery, Target: want}); carried != wantIn {
			t.Errorf("run %s: the last execution started from %+v, want %+v", id, carried, wantIn)
		}
		if len(info.Steps) > canEvery {
			t.Errorf("run %s: %d step records in its last execution, want at most %d", id, len(info.Steps), canEvery)
		}
		if claims > wantExecution {
			resumedAcross++
		}
	}
	t.Logf("%d of %d runs were claimed more often than they have executions (resumed after a kill)", resumedAcross, runs)
}
