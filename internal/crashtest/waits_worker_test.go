package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// The workflows of TestCrashResumeWaits and the child process that works
// them (envChild=childWaits).
//
//   - sleeper: step s1, flow.Sleep, step s2.
//   - waiter: step w1, flow.Receive[int] of signal "go" with a timeout, step
//     w2, which records the value received or the timeout.
//   - parent: step p1 (compensable), then flow.All over three branches, each
//     step ba (compensable) then step bb, branch 2 sleeping between them;
//     then flow.Call of the child workflow (c1, compensable, then c2), then
//     step p2. A parent fails for good in p2 (after its child completed) or
//     in branch 1's bb when its input says so, which rolls it back across
//     the branches.
//
// Every value a step returns is a function of its input, so the test can
// compute every recorded input and output.

// childWaits is the value of envChild that makes a child process work the
// waits workflows (see waitsChildMain).
const childWaits = "waits"

const (
	waitsSignal = "go"
	failP2      = "p2"     // parentIn.Fail: p2 fails for good
	failBranch  = "branch" // parentIn.Fail: branch 1's bb fails for good
	errBB       = "bb refused"
	errP2       = "p2 refused"
)

type sleeperIn struct {
	K       int `json:"k"`
	SleepMs int `json:"sleep_ms"`
}

type waiterIn struct {
	K         int `json:"k"`
	TimeoutMs int `json:"timeout_ms"`
}

// gotSignal is what the waiter's receive gave it: the input of w2.
type gotSignal struct {
	Value    int  `json:"value"`
	TimedOut bool `json:"timed_out"`
}

type parentIn struct {
	K       int    `json:"k"`
	Fail    string `json:"fail"`     // "", failP2 or failBranch
	SleepMs int    `json:"sleep_ms"` // branch 2's sleep
}

type branchIn struct {
	K    int  `json:"k"`
	I    int  `json:"i"`
	V    int  `json:"v"`
	Fail bool `json:"fail"`
}

type p2In struct {
	K    int   `json:"k"`
	R    []int `json:"r"`
	C    int   `json:"c"`
	Fail bool  `json:"fail"`
}

// waitsStep is a step that works a little (see work), then returns f(in);
// compensable gives it a compensation that works a little too.
func waitsStep[In any](name string, compensable bool, f func(In) (int, error)) flow.Step[In, int] {
	s := flow.Step[In, int]{Name: name, Retry: fastRetry, Run: func(ctx context.Context, in In) (int, error) {
		if err := work(ctx); err != nil {
			return 0, err
		}
		return f(in)
	}}
	if compensable {
		s.Compensate = func(ctx context.Context, _ In, _ int) error { return work(ctx) }
	}
	return s
}

// The values the steps compute.
func wantFirst(k, kind int) int { return k*10 + kind } // s1 (kind 1), w1 (2), p1 (3)
func wantBA(p1, i int) int      { return p1*10 + i }
func wantBB(ba, i int) int      { return ba + 100*(i+1) }
func wantC1(v int) int          { return v * 2 }
func wantC2(c1 int) int         { return c1 + 3 }
func wantSleeperOut(k int) int  { return wantFirst(k, 1) * 3 }
func ms(n int) time.Duration    { return time.Duration(n) * time.Millisecond }

// wantW2 is w2's output: the value received, or -1 after a timeout.
func wantW2(g gotSignal) int {
	if g.TimedOut {
		return -1
	}
	return g.Value
}

var (
	wsS1 = waitsStep("s1", false, func(k int) (int, error) { return wantFirst(k, 1), nil })
	wsS2 = waitsStep("s2", false, func(v int) (int, error) { return v * 3, nil })
	wwW1 = waitsStep("w1", false, func(k int) (int, error) { return wantFirst(k, 2), nil })
	wwW2 = waitsStep("w2", false, func(g gotSignal) (int, error) { return wantW2(g), nil })
	wpP1 = waitsStep("p1", true, func(k int) (int, error) { return wantFirst(k, 3), nil })
	wpBA = waitsStep("ba", true, func(in branchIn) (int, error) { return wantBA(in.V, in.I), nil })
	wpBB = waitsStep("bb", false, func(in branchIn) (int, error) {
		if in.Fail {
			return 0, flow.Permanent(errors.New(errBB))
		}
		return wantBB(in.V, in.I), nil
	})
	wpP2 = waitsStep("p2", false, func(in p2In) (int, error) {
		if in.Fail {
			return 0, flow.Permanent(errors.New(errP2))
		}
		return in.R[0] + in.R[1] + in.R[2] + in.C, nil
	})
	wcC1 = waitsStep("c1", true, func(v int) (int, error) { return wantC1(v), nil })
	wcC2 = waitsStep("c2", false, func(v int) (int, error) { return wantC2(v), nil })

	waitsSleeper = flow.Workflow[sleeperIn, int]{
		Name: "crash_sleeper",
		Run: func(wc flow.Context, in sleeperIn) (int, error) {
			v, err := flow.Do(wc, wsS1, in.K)
			if err != nil {
				return 0, err
			}
			if err := flow.Sleep(wc, ms(in.SleepMs)); err != nil {
				return 0, err
			}
			return flow.Do(wc, wsS2, v)
		},
	}
	waitsWaiter = flow.Workflow[waiterIn, int]{
		Name: "crash_waiter",
		Run: func(wc flow.Context, in waiterIn) (int, error) {
			if _, err := flow.Do(wc, wwW1, in.K); err != nil {
				return 0, err
			}
			v, err := flow.Receive[int](wc, waitsSignal, ms(in.TimeoutMs))
			got := gotSignal{Value: v}
			switch {
			case errors.Is(err, flow.ErrTimedOut):
				got.TimedOut = true
			case err != nil:
				return 0, err
			}
			return flow.Do(wc, wwW2, got)
		},
	}
	waitsChild = flow.Workflow[int, int]{
		Name: "crash_wait_child",
		Run: func(wc flow.Context, v int) (int, error) {
			c1, err := flow.Do(wc, wcC1, v)
			if err != nil {
				return 0, err
			}
			return flow.Do(wc, wcC2, c1)
		},
	}
	waitsParent = flow.Workflow[parentIn, int]{
		Name: "crash_parent",
		Run: func(wc flow.Context, in parentIn) (int, error) {
			p1, err := flow.Do(wc, wpP1, in.K)
			if err != nil {
				return 0, err
			}
			branch := func(i int) func(flow.Context) (int, error) {
				return func(wc flow.Context) (int, error) {
					a, err := flow.Do(wc, wpBA, branchIn{K: in.K, I: i, V: p1})
					if err != nil {
						return 0, err
					}
					if i == 2 {
						if err := flow.Sleep(wc, ms(in.SleepMs)); err != nil {
							return 0, err
						}
					}
					return flow.Do(wc, wpBB, branchIn{K: in.K, I: i, V: a, Fail: i == 1 && in.Fail == failBranch})
				}
			}
			rs, err := flow.All(wc, branch(0), branch(1), branch(2))
			if err != nil {
				return 0, err
			}
			c, err := flow.Call(wc, waitsChild, rs[0]+rs[1]+rs[2], nil)
			if err != nil {
				return 0, err
			}
			return flow.Do(wc, wpP2, p2In{K: in.K, R: rs, C: c, Fail: in.Fail == failP2})
		},
	}
)

// registerWaits registers the waits workflows with e.
func registerWaits(e *flow.Engine) error {
	return errors.Join(
		flow.RegisterSafely(e, waitsSleeper),
		flow.RegisterSafely(e, waitsWaiter),
		flow.RegisterSafely(e, waitsChild),
		flow.RegisterSafely(e, waitsParent),
	)
}

// Run IDs: sleep-KK, wait-KK, par-KK; the child of par-KK gets the default
// ID par-KK/flow.child:crash_wait_child#0.
func waitsRunID(kind string, k int) string { return fmt.Sprintf("%s-%02d", kind, k) }

func waitsChildID(parent string) string {
	return parent + "/flow.child:" + waitsChild.Name + "#0"
}

// parseWaitsID returns the kind and number of a run ID, and whether it is
// the child of that parent.
func parseWaitsID(id string) (kind string, k int, child, ok bool) {
	base, _, child := strings.Cut(id, "/")
	kind, num, found := strings.Cut(base, "-")
	k, err := strconv.Atoi(num)
	return kind, k, child, found && err == nil
}

// waitsTransient says which attempts the child's interceptor fails with a
// transient error, so that retries happen under kills too: after a sleep,
// before a receive, in a branch next to a sleeping one (the branch parks
// for its backoff), in a child, and in a compensation.
func waitsTransient(info flow.AttemptInfo) bool {
	kind, k, child, ok := parseWaitsID(info.RunID)
	if !ok || info.Attempt != 1 {
		return false
	}
	switch {
	case child:
		return !info.Compensation && info.Step == "c2" && k%3 == 0
	case kind == "sleep":
		return !info.Compensation && info.Step == "s2" && k%3 == 1
	case kind == "wait":
		return !info.Compensation && info.Step == "w1" && k%3 == 2
	case kind == "par" && info.Compensation:
		return info.Step == "all0.0/ba" && k%2 == 1
	case kind == "par":
		return info.Step == "all0.1/bb" && k%2 == 0
	}
	return false
}

// interceptWaits is ledgerWriter.intercept with the transient failures of
// waitsTransient.
func (l *ledgerWriter) interceptWaits(ctx context.Context, info flow.AttemptInfo, call func(context.Context) error) error {
	prefix := ""
	if info.Compensation {
		prefix = "comp-"
	}
	if err := l.record(prefix+"start", info); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	var err error
	if waitsTransient(info) {
		err = errors.New("injected transient failure")
	} else {
		err = call(ctx)
	}
	kind := "done"
	if err != nil {
		kind = "fail"
	}
	if lerr := l.record(prefix+kind, info); lerr != nil && err == nil {
		return fmt.Errorf("ledger: %w", lerr)
	}
	return err
}

// waitsChildMain is childMain for the waits workflows.
func waitsChildMain() int {
	c, code := newWorkerEnv("crash child")
	if c == nil {
		return code
	}
	defer c.close()
	inc, lw, log, ctx, fail := c.inc, c.lw, c.log, c.ctx, c.fail
	cfg := childConfig(inc, lw, log)
	cfg.Intercept = lw.interceptWaits
	e, err := flowsqlite.Open(ctx, os.Getenv(envDB), cfg, childOptions)
	if err != nil {
		return fail("open: %v", err)
	}
	defer e.Close()
	if err := registerWaits(e); err != nil {
		return fail("register: %v", err)
	}
	return workChild(ctx, e, fail)
}
