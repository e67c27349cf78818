package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestCrashResumeWaits is the kill -9 loop of TestCrashResume for runs that
// wait: runs that sleep, wait for a signal (with a timeout), and run
// parallel branches (one of which sleeps), then call a child run and wait
// for it; some of these parents fail after their child completed, or in a
// branch, and roll back across the branches. Worker processes (the
// "children" of the harness, see waitsChildMain) are SIGKILLed at random
// moments and restarted, one at a time; the test process starts the runs and sends the signals (at random
// times, some twice under one key, some never, some after the timeout)
// through its own engine on the same file, which it never starts. The
// durations are real and short (sleeps of 100-800ms, receive timeouts of
// 1.2-2s), so no clock is shared between processes. Once a last child
// drained every run, waitsRunCheck.check and the checks it calls hold each
// run against its history, its step records, the signals table and the
// ledger the step bodies wrote; they document the oracles.
//
// 24 runs (plus the children of parents), 15 kills; FLOWLITE_CRASH_LONG=1
// or -args -long: 120 runs, 60 kills.
func TestCrashResumeWaits(t *testing.T) {
	t.Parallel()
	perKind, kills, drainTimeout := 8, 15, 90*time.Second
	if *longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1" {
		perKind, kills, drainTimeout = 40, 60, 5*time.Minute
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOWLITE_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FLOWLITE_CRASH_SEED: %v", err)
		}
	}
	plans := planWaits(perKind, rand.New(rand.NewPCG(seed, 0x3a175)))
	t.Logf("runs=%d kills=%d seed=%d (FLOWLITE_CRASH_SEED=%d replays the inputs and the kill schedule, not the timing)", len(plans), kills, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	began := time.Now()

	dir := t.TempDir()
	h := &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db"), ledger: filepath.Join(dir, "ledger.txt")}

	// The test's engine is never started: it records runs, sends signals
	// and reads the database back, while the children work.
	tester, err := flowsqlite.Open(t.Context(), h.db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tester.Close()
	if err := registerWaits(tester); err != nil {
		t.Fatal(err)
	}
	raw := openRaw(t, h.db)

	ctx, cancel := context.WithCancel(t.Context())
	var senders sync.WaitGroup
	defer senders.Wait()
	defer cancel()
	sent := &signalLog{byRun: make(map[string][]sentSignal)}

	next := 0
	startRuns := func(n int) {
		for ; n > 0 && next < len(plans); n-- {
			p := plans[next]
			next++
			opts := &flow.StartOptions{RunID: p.id}
			var err error
			switch in := p.in.(type) {
			case sleeperIn:
				_, err = flow.Start(ctx, tester, waitsSleeper, in, opts)
			case waiterIn:
				_, err = flow.Start(ctx, tester, waitsWaiter, in, opts)
			case parentIn:
				_, err = flow.Start(ctx, tester, waitsParent, in, opts)
			}
			if err != nil {
				h.fail("start run %s: %v", p.id, err)
			}
			if len(p.sends) > 0 {
				senders.Add(1)
				go func() {
					defer senders.Done()
					sendSignals(ctx, tester, p, time.Now(), sent)
				}()
			}
		}
	}

	// Start the runs over the first two thirds of the children, so that
	// most of them wait across several kills.
	perChild := (len(plans) + max(1, 2*kills/3) - 1) / max(1, 2*kills/3)
	readyKills, claimKills, maxSlowness := 0, 0, 1.0
	for inc := 1; inc <= kills; inc++ {
		c := h.spawnMode(childWaits, inc, false)
		spawned := time.Now()
		startRuns(perChild)
		if rng.IntN(5) == 0 {
			// Now and then kill a child that may still be opening the
			// database, migrating or rescuing.
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		} else {
			select {
			case <-c.ready:
			case err := <-c.done:
				c.done <- err
				h.fail("child %d exited before it was ready: %v", inc, err)
			case <-time.After(30 * time.Second):
				h.fail("child %d not ready after 30s", inc)
			}
			// On a loaded machine, or under -race, a child can need longer
			// than the whole kill window to claim its first run once it is
			// ready, and to take that run to its next wait; killed before,
			// it would only ever rescue. So the window opens once it claimed
			// a run (or after 2s of nothing to claim), and stretches with
			// how slow the child was to start: x1 when it took up to 150ms
			// (an idle machine), about x4 under -race, at most x6.
			slowness := min(max(float64(time.Since(spawned))/float64(150*time.Millisecond), 1), 6)
			if claimedBy(raw, inc, c, 2*time.Second) {
				claimKills++
			}
			window := time.Duration(float64(10+rng.IntN(291)) * slowness * float64(time.Millisecond))
			maxSlowness = max(maxSlowness, slowness)
			time.Sleep(window)
		}
		select {
		case <-c.ready:
			readyKills++
		default:
		}
		c.kill()
		if problems := integrityCheck(ctx, raw); len(problems) > 0 {
			h.fail("after kill %d: integrity check: %v", inc, problems)
		}
	}
	killPhase := time.Since(began)

	startRuns(len(plans))
	drainStart := time.Now()
	c := h.spawnMode(childWaits, kills+1, true)
	select {
	case err := <-c.done:
		c.done <- err
		if err != nil {
			h.fail("draining child: %v", err)
		}
	case <-time.After(drainTimeout):
		c.kill()
		counts, _ := tester.CountRuns(ctx)
		h.fail("runs not settled %s after the last kill: %v", drainTimeout, counts)
	}
	drain := time.Since(drainStart)
	senders.Wait() // the late signals, which find their runs finished
	byRun := h.settledLedger(ctx, raw, kills+1)

	// Every run in the database is one the test started or the child of
	// one of its parents, and every parent started at most one child.
	all, err := tester.ListRuns(ctx, flow.RunFilter{Limit: 100 * len(plans)})
	if err != nil {
		t.Fatal(err)
	}
	specs := make(map[string]waitsSpec)
	var order []string
	for _, p := range plans {
		for _, s := range p.specs() {
			specs[s.id] = s
			order = append(order, s.id)
		}
	}
	children := make(map[string][]string) // parent → its children
	for _, r := range all {
		if r.ParentID != "" {
			children[r.ParentID] = append(children[r.ParentID], r.ID)
		}
		if _, ok := specs[r.ID]; !ok {
			t.Errorf("run %s (workflow %s, parent %q) was never started by the test nor expected as a child", r.ID, r.Workflow, r.ParentID)
		}
	}

	var st stats
	ws := &waitsStats{}
	var problems []string
	for _, id := range order {
		spec := specs[id]
		info, err := tester.Inspect(ctx, id)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: LOST: %v", id, err))
			continue
		}
		hist, err := tester.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		rc := &waitsRunCheck{spec: spec, info: info, hist: hist, lines: byRun[id], st: &st, ws: ws}
		switch spec.kind {
		case "sleep", "par":
			rc.extra = func() { rc.checkTimer(spec.timerStep, spec.afterTimer, spec.sleep) }
		case "wait":
			rc.extra = func() { rc.checkReceive(signalRows(t, raw, id), sent.of(id), spec.plan) }
		}
		if spec.kind == "par" {
			timer := rc.extra
			rc.extra = func() {
				timer()
				var child waitsChildRun
				if spec.childID != "" {
					child.info, child.err = tester.Inspect(ctx, spec.childID)
					if child.err == nil {
						child.hist, child.err = tester.History(ctx, spec.childID)
					}
				}
				rc.checkChild(children[id], child)
			}
		}
		problems = append(problems, rc.check()...)
		delete(byRun, id)
	}
	for id := range byRun {
		problems = append(problems, fmt.Sprintf("%s: ledger lines for a run nobody started", id))
	}
	for i, p := range problems {
		if i == 50 {
			t.Errorf("… and %d more problems", len(problems)-50)
			break
		}
		t.Error(p)
	}
	for _, n := range ws.timing {
		t.Logf("timing, not a failure: %s", n)
	}
	if ws.crossed() == 0 {
		t.Errorf("no wait began under one child and ended under another: the kills never hit a waiting run, so the test proved nothing")
	}
	t.Logf("kills=%d (%d after the child was ready, %d after it claimed a run; kill window stretched x%.1f at most) in %s; drain %s; total %s",
		kills, readyKills, claimKills, maxSlowness, killPhase.Round(time.Millisecond), drain.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	t.Logf("runs: completed=%d rolled back=%d; rescues=%d; step attempts started=%d for %d completed or failed steps (interrupted: %d; finished but killed before the checkpoint: %d); compensation attempts started=%d for %d compensations",
		ws.completed, ws.failed, ws.rescued, st.starts, st.steps, st.interrupted, st.uncommitted, st.compStarts, st.comps)
	t.Logf("waits that ended under another worker than the one that began them: timers %d of %d, receives %d of %d, child calls %d of %d",
		ws.crossedTimers, ws.timers, ws.crossedReceives, ws.received+ws.timedOut, ws.crossedChildren, ws.children)
	t.Logf("timers fired %s late at most (median %s); receives: %d received, %d timed out; signals sent %d, stored %d, dropped as duplicates %d, refused (run finished) %d",
		ws.maxLate(), ws.medianLate(), ws.received, ws.timedOut, ws.sends, ws.stored, ws.dupDropped, ws.refused)
}

// waitsPlan is one run the test starts: its input, and the signals it sends
// it.
type waitsPlan struct {
	id, kind string
	k        int
	in       any // sleeperIn, waiterIn or parentIn
	signal   string
	sends    []plannedSend
}

type plannedSend struct {
	after   time.Duration // after Start returned
	key     string
	payload int
}

// Signal plans of the waiters, by k modulo their number:
//
//   - never: no signal; the receive times out.
//   - early: one signal right after Start, often before the run waits.
//   - dup: a keyed signal, the same key again with another payload soon
//     after (dropped), and once more after the run has received the first
//     (dropped too, or refused because the run finished).
//   - two: two signals under two keys; the first is received, the second
//     stays in the table.
//   - late: one signal well after the timeout; the run received it only if
//     it was not done waiting yet (e.g. its workers kept being killed).
//
// The first signal of every plan but late is sent within 0.4s of Start, and
// the run reaches its receive after Start with a timeout of at least 1.2s,
// so it is sent well before the deadline (checkReceive requires a signal
// stored before the deadline to be received, and only logs a plan whose
// first signal came too late).
var waiterPlans = []string{"never", "early", "dup", "two", "late", "early", "dup", "never"}

func planWaits(perKind int, rng *rand.Rand) []waitsPlan {
	var plans []waitsPlan
	for k := range perKind {
		plans = append(plans, waitsPlan{id: waitsRunID("sleep", k), kind: "sleep", k: k,
			in: sleeperIn{K: k, SleepMs: 200 + rng.IntN(601)}})

		w := waitsPlan{id: waitsRunID("wait", k), kind: "wait", k: k,
			in: waiterIn{K: k, TimeoutMs: 1200 + rng.IntN(801)}, signal: waiterPlans[k%len(waiterPlans)]}
		pay := func(i int) int { return k*100 + i }
		d := ms(50 + rng.IntN(300))
		switch w.signal {
		case "early":
			w.sends = []plannedSend{{0, "", pay(1)}}
		case "dup":
			key := fmt.Sprintf("dup-%d", k)
			d2 := d + ms(rng.IntN(30))
			w.sends = []plannedSend{{d, key, pay(1)}, {d2, key, pay(2)}, {d2 + 1500*time.Millisecond, key, pay(3)}}
		case "two":
			w.sends = []plannedSend{{d, fmt.Sprintf("a-%d", k), pay(1)}, {d + ms(30+rng.IntN(50)), fmt.Sprintf("b-%d", k), pay(2)}}
		case "late":
			w.sends = []plannedSend{{ms(2500 + rng.IntN(1000)), "", pay(1)}}
		}
		plans = append(plans, w)

		fail := []string{"", failP2, failBranch}[k%3]
		plans = append(plans, waitsPlan{id: waitsRunID("par", k), kind: "par", k: k,
			in: parentIn{K: k, Fail: fail, SleepMs: 100 + rng.IntN(201)}})
	}
	return plans
}

// signalLog records every Signal call of the test and its result.
type signalLog struct {
	mu    sync.Mutex
	byRun map[string][]sentSignal
}

type sentSignal struct {
	plannedSend
	err error
}

func (l *signalLog) of(run string) []sentSignal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.byRun[run])
}

// sendSignals sends the signals of p, in order, each at its time after
// start.
func sendSignals(ctx context.Context, e *flow.Engine, p waitsPlan, start time.Time, log *signalLog) {
	for _, s := range p.sends {
		t := time.NewTimer(time.Until(start.Add(s.after)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		var opts *flow.SignalOptions
		if s.key != "" {
			opts = &flow.SignalOptions{Key: s.key}
		}
		_, err := flow.Signal(ctx, e, p.id, waitsSignal, s.payload, opts)
		log.mu.Lock()
		log.byRun[p.id] = append(log.byRun[p.id], sentSignal{s, err})
		log.mu.Unlock()
	}
}

// claimedBy waits until child inc claimed a run, at most timeout, or until
// it exited, and reports whether it claimed one.
func claimedBy(db rawDB, inc int, c *child, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM flowlite_events WHERE kind = ? AND detail LIKE ?",
			flow.EventRunClaimed, "%, child-"+strconv.Itoa(inc)).Scan(&n)
		if err == nil && n > 0 {
			return true
		}
		select {
		case err := <-c.done:
			c.done <- err
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// spawnMode is harness.spawn for a child of another mode (envChild=mode),
// on the harness's PostgreSQL schema when it has one.
func (h *harness) spawnMode(mode string, inc int, drain bool) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, envDB+"="+h.db, envLedger+"="+h.ledger,
		envInc+"="+strconv.Itoa(inc), envDrain+"="+map[bool]string{true: "1", false: "0"}[drain])
	cmd.Env = append(cmd.Env, h.pg.env()...)
	c := &child{inc: inc, cmd: cmd, ready: make(chan struct{}), done: make(chan error, 1)}
	cmd.Stdout = &readyWriter{ready: c.ready}
	logf, err := os.Create(h.logPath(inc))
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start child %d: %v", inc, err)
	}
	go func() { c.done <- cmd.Wait() }()
	h.cur = c
	return c
}

// waitsSpec is what the test expects of one run once it settled.
type waitsSpec struct {
	id, kind string
	in       any
	fails    bool   // rolled back
	errSub   string // in the run's error when it fails
	out      any    // the workflow's output when it completes; nil: checked elsewhere
	parentID string
	steps    []stepSpec

	// sleep and par: the timer step, the step after it, the sleep.
	timerStep, afterTimer string
	sleep                 int
	// wait: the signal plan.
	plan waitsPlan
	// par: the child's ID, empty when the parent never reaches the call.
	childID string
}

type stepSpec struct {
	name    string
	wait    bool // a wait point or a child start: no body, no ledger lines
	failed  bool // fails for good
	comp    bool // has a compensation
	in, out any  // the recorded input and output; nil: checked elsewhere
}

// specs returns the expected end state of the run of p and, for a parent
// that calls its child, of the child.
func (p waitsPlan) specs() []waitsSpec {
	switch in := p.in.(type) {
	case sleeperIn:
		s1 := wantFirst(in.K, 1)
		return []waitsSpec{{
			id: p.id, kind: p.kind, in: in, out: wantSleeperOut(in.K),
			steps: []stepSpec{
				{name: "s1", in: in.K, out: s1},
				{name: "flow.sleep", wait: true},
				{name: "s2", in: s1, out: wantSleeperOut(in.K)},
			},
			timerStep: "flow.sleep", afterTimer: "s2", sleep: in.SleepMs,
		}}
	case waiterIn:
		return []waitsSpec{{
			id: p.id, kind: p.kind, in: in, plan: p,
			steps: []stepSpec{
				{name: "w1", in: in.K, out: wantFirst(in.K, 2)},
				{name: "flow.receive:" + waitsSignal, wait: true},
				{name: "w2"}, // checkReceive checks it
			},
		}}
	case parentIn:
		p1 := wantFirst(in.K, 3)
		s := waitsSpec{
			id: p.id, kind: p.kind, in: in, fails: in.Fail != "",
			timerStep: "all0.2/flow.sleep", afterTimer: "all0.2/bb", sleep: in.SleepMs,
		}
		s.steps = append(s.steps, stepSpec{name: "p1", comp: true, in: in.K, out: p1})
		var rs []int
		for i := range 3 {
			ba := wantBA(p1, i)
			bb := wantBB(ba, i)
			rs = append(rs, bb)
			scope := fmt.Sprintf("all0.%d/", i)
			s.steps = append(s.steps, stepSpec{name: scope + "ba", comp: true, in: branchIn{K: in.K, I: i, V: p1}, out: ba})
			if i == 2 {
				s.steps = append(s.steps, stepSpec{name: scope + "flow.sleep", wait: true})
			}
			bbSpec := stepSpec{name: scope + "bb", in: branchIn{K: in.K, I: i, V: ba, Fail: i == 1 && in.Fail == failBranch}, out: bb}
			if bbSpec.in.(branchIn).Fail {
				bbSpec.failed, bbSpec.out = true, nil
			}
			s.steps = append(s.steps, bbSpec)
		}
		if in.Fail == failBranch {
			s.errSub = errBB
			return []waitsSpec{s}
		}
		sum := rs[0] + rs[1] + rs[2]
		c2 := wantC2(wantC1(sum))
		s.childID = waitsChildID(p.id)
		s.steps = append(s.steps,
			stepSpec{name: "flow.child:" + waitsChild.Name, wait: true, in: sum, out: s.childID},
			stepSpec{name: "flow.await:" + s.childID, wait: true,
				in: map[string]string{"child": s.childID}, out: map[string]any{"status": "completed", "output": c2}},
		)
		p2 := stepSpec{name: "p2", in: p2In{K: in.K, R: rs, C: c2, Fail: in.Fail == failP2}, out: sum + c2}
		if in.Fail == failP2 {
			p2.failed, p2.out, s.errSub = true, nil, errP2
		} else {
			s.out = sum + c2
		}
		s.steps = append(s.steps, p2)
		child := waitsSpec{
			id: s.childID, kind: "child", in: sum, out: c2, parentID: p.id,
			steps: []stepSpec{
				{name: "c1", comp: true, in: sum, out: wantC1(sum)},
				{name: "c2", in: wantC1(sum), out: c2},
			},
		}
		return []waitsSpec{s, child}
	}
	panic(fmt.Sprintf("plan %s: input %T", p.id, p.in))
}

// waitsStats collects what the checks saw, for the log.
type waitsStats struct {
	completed, failed, rescued          int
	timers, crossedTimers               int
	received, timedOut, crossedReceives int
	children, crossedChildren           int
	sends, stored, dupDropped, refused  int
	late                                []time.Duration // timer_fired minus due time
	timing                              []string
}

func (w *waitsStats) crossed() int { return w.crossedTimers + w.crossedReceives + w.crossedChildren }

func (w *waitsStats) maxLate() time.Duration {
	if len(w.late) == 0 {
		return 0
	}
	return slices.Max(w.late)
}

func (w *waitsStats) medianLate() time.Duration {
	if len(w.late) == 0 {
		return 0
	}
	s := slices.Clone(w.late)
	slices.Sort(s)
	return s[len(s)/2]
}

// waitsRunCheck checks one settled run; see check.
type waitsRunCheck struct {
	spec     waitsSpec
	info     flow.RunInfo
	hist     []flow.Event
	lines    []ledgerLine
	st       *stats
	ws       *waitsStats
	extra    func() // the checks of the run's kind
	problems []string

	recs   map[string]flow.StepRecord
	events map[[2]string][]int // kind, step → indices into hist
}

func (c *waitsRunCheck) bad(format string, args ...any) {
	c.problems = append(c.problems, c.spec.id+": "+fmt.Sprintf(format, args...))
}

func (c *waitsRunCheck) count(kind, step string) int { return len(c.events[[2]string{kind, step}]) }

// one returns the only event of kind for step, or reports that there is
// not exactly one (DUP-CHECKPOINT).
func (c *waitsRunCheck) one(kind, step string) (flow.Event, int, bool) {
	idx := c.events[[2]string{kind, step}]
	if len(idx) != 1 {
		c.bad("%d %s events for step %q, want 1 (DUP-CHECKPOINT): %v", len(idx), kind, step, kinds(c.hist))
		return flow.Event{}, -1, false
	}
	return c.hist[idx[0]], idx[0], true
}

// claimBefore returns the index of the last run_claimed event before i, or
// -1.
func (c *waitsRunCheck) claimBefore(i int) int {
	for j := i - 1; j >= 0; j-- {
		if c.hist[j].Kind == flow.EventRunClaimed {
			return j
		}
	}
	return -1
}

// workerAt returns the worker whose claim the event i was recorded under.
func (c *waitsRunCheck) workerAt(i int) string {
	j := c.claimBefore(i)
	if j < 0 {
		return ""
	}
	_, w, _ := strings.Cut(c.hist[j].Detail, ", ")
	return w
}

// check checks the run and returns what is wrong. The oracles common to
// every run, and why each is sound:
//
//   - LOST / outcome: the run is completed or rolled back (failed), as its
//     input dictates; its recorded input, parent, output or error are the
//     expected ones.
//   - Terminal: exactly one run_completed or run_failed event, the last one.
//   - KEYS: the run's step records are exactly the expected names, each at
//     occurrence 0, and every history event and ledger line names one of
//     them: a replay that called a step (in a branch, in the unwind) under
//     another key than the first execution would add a record, or redo a
//     step under a new key. Branch steps are scoped all0.<i>/ whatever
//     order the branches ran in.
//   - VALUES: every step's recorded input and output are the expected
//     ones, so a replay fed the recorded outputs back to the right calls
//     (a branch got its own results, All returned them in branch order).
//   - DUP-CHECKPOINT and RERUN-AFTER-COMPLETE: as in checkRun, for each
//     body step (checkAttempts), plus: its step_started events are attempts
//     1..n, n being the attempts of its record.
//   - SAGA: a rolled-back run compensated exactly its completed compensable
//     steps (in all branches), each once, in the reverse order of their
//     step_completed events, between workflow_failed and run_failed; in the
//     ledger, no compensation started before the final failure and none
//     before the previous compensation's committed end. Other steps are
//     never compensated; a completed run has no compensation at all (nor
//     does the child of a failed parent: completed children are not
//     undone).
func (c *waitsRunCheck) check() []string {
	spec, info, hist := c.spec, c.info, c.hist
	switch info.Status {
	case flow.StatusCompleted:
		c.ws.completed++
		if spec.fails {
			c.bad("completed, but its input says it fails (%q)", spec.errSub)
		}
	case flow.StatusFailed:
		c.ws.failed++
		if !spec.fails {
			c.bad("rolled back, but its input says it completes (error %q)", info.Error)
		}
	default:
		c.bad("LOST: left %s (reason %q, error %q): %v", info.Status, info.Reason, info.Error, kinds(hist))
		return c.problems
	}
	if !jsonEqual(info.Input, spec.in) {
		c.bad("input %s, want %+v", info.Input, spec.in)
	}
	if info.ParentID != spec.parentID {
		c.bad("parent %q, want %q", info.ParentID, spec.parentID)
	}

	c.events = make(map[[2]string][]int)
	for i, ev := range hist {
		c.events[[2]string{ev.Kind, ev.Step}] = append(c.events[[2]string{ev.Kind, ev.Step}], i)
		if ev.Kind == flow.EventRunRescued {
			c.ws.rescued++
		}
	}
	terminal := flow.EventRunCompleted
	if spec.fails {
		terminal = flow.EventRunFailed
	}
	_, termIdx, _ := c.one(terminal, "")
	if termIdx != len(hist)-1 {
		c.bad("%s is not the last event of the history: %v", terminal, kinds(hist))
	}

	// KEYS.
	want := make(map[string]stepSpec)
	for _, s := range spec.steps {
		want[s.name] = s
	}
	c.recs = make(map[string]flow.StepRecord)
	for _, s := range info.Steps {
		if s.Occurrence != 0 {
			c.bad("step %s has occurrence %d (KEYS)", s.Name, s.Occurrence)
		}
		if _, ok := want[s.Name]; !ok {
			c.bad("unexpected step record %q, status %s (KEYS)", s.Name, s.Status)
		}
		c.recs[s.Name] = s
	}
	for _, ev := range hist {
		if _, ok := want[ev.Step]; ev.Step != "" && !ok {
			c.bad("%s event for unexpected step %q (KEYS)", ev.Kind, ev.Step)
		}
	}
	fwd := make(map[string][]ledgerLine)
	comp := make(map[string][]ledgerLine)
	for _, l := range c.lines {
		if s, ok := want[l.step]; !ok || s.wait {
			c.bad("ledger line %q for step %q, which has no body here (KEYS)", l.kind, l.step)
		}
		if strings.HasPrefix(l.kind, "comp-") {
			comp[l.step] = append(comp[l.step], l)
		} else {
			fwd[l.step] = append(fwd[l.step], l)
		}
	}

	// VALUES, DUP-CHECKPOINT, RERUN-AFTER-COMPLETE.
	var failLine = -1
	for _, s := range spec.steps {
		rec, ok := c.recs[s.name]
		if !ok {
			c.bad("no record of step %s (KEYS): %v", s.name, kinds(hist))
			continue
		}
		if s.in != nil && !jsonEqual(rec.Input, s.in) {
			c.bad("step %s recorded input %s, want %+v", s.name, rec.Input, s.in)
		}
		if s.failed {
			if rec.Status != "failed" {
				c.bad("step %s is %s, want failed", s.name, rec.Status)
			}
		} else {
			if rec.Status != "completed" {
				c.bad("step %s is %s (error %q), want completed", s.name, rec.Status, rec.Error)
			}
			if s.out != nil && !jsonEqual(rec.Output, s.out) {
				c.bad("step %s recorded output %s, want %+v", s.name, rec.Output, s.out)
			}
		}
		if s.wait {
			continue
		}
		var attempts []int
		for _, i := range c.events[[2]string{flow.EventStepStarted, s.name}] {
			attempts = append(attempts, hist[i].Attempt)
		}
		for i, a := range attempts {
			if a != i+1 || len(attempts) != rec.Attempts {
				c.bad("step %s: step_started attempts %v, its record says %d attempts", s.name, attempts, rec.Attempts)
				break
			}
		}
		if s.failed {
			if n := c.count(flow.EventStepCompleted, s.name); n > 0 {
				c.bad("step %s fails for good but has %d step_completed events", s.name, n)
			}
			if ev, _, ok := c.one(flow.EventStepFailed, s.name); ok {
				if rec.Attempts != ev.Attempt {
					c.bad("step %s records %d attempts, its final failure was attempt %d", s.name, rec.Attempts, ev.Attempt)
				}
				checkAttempts(c.bad, s.name, fwd[s.name], "start", "fail", ev.Attempt, c.st)
			}
			for _, l := range fwd[s.name] {
				if l.kind == "fail" {
					failLine = l.idx // the last one is the final failure
				}
			}
			continue
		}
		if n := c.count(flow.EventStepFailed, s.name); n > 0 {
			c.bad("step %s completed but has %d step_failed events", s.name, n)
		}
		if ev, _, ok := c.one(flow.EventStepCompleted, s.name); ok {
			if rec.Attempts != ev.Attempt {
				c.bad("step %s records %d attempts, it completed with attempt %d", s.name, rec.Attempts, ev.Attempt)
			}
			checkAttempts(c.bad, s.name, fwd[s.name], "start", "done", ev.Attempt, c.st)
		}
	}

	// SAGA.
	if !spec.fails {
		if spec.out != nil && !jsonEqual(info.Output, spec.out) {
			c.bad("workflow output %s, want %v", info.Output, spec.out)
		}
		for _, ev := range hist {
			if strings.HasPrefix(ev.Kind, "compensation_") || ev.Kind == flow.EventWorkflowFailed {
				c.bad("a completed run has a %s event (step %q)", ev.Kind, ev.Step)
			}
		}
		for _, rec := range info.Steps {
			if rec.Compensation != "none" {
				c.bad("step %s of a completed run has compensation %q", rec.Name, rec.Compensation)
			}
		}
		if len(comp) > 0 {
			c.bad("a completed run ran compensations: %v", comp)
		}
	} else {
		c.checkSaga(want, comp, failLine, termIdx)
	}
	if c.extra != nil {
		c.extra()
	}
	return c.problems
}

func (c *waitsRunCheck) checkSaga(want map[string]stepSpec, comp map[string][]ledgerLine, failLine, termIdx int) {
	info, hist := c.info, c.hist
	if !strings.Contains(info.Error, c.spec.errSub) {
		c.bad("run error %q does not name the failure %q", info.Error, c.spec.errSub)
	}
	_, wfFailed, _ := c.one(flow.EventWorkflowFailed, "")
	// The completed compensable steps, in completion order.
	var completed []string
	for _, ev := range hist {
		if ev.Kind == flow.EventStepCompleted && want[ev.Step].comp {
			completed = append(completed, ev.Step)
		}
	}
	wantOrder := slices.Clone(completed)
	slices.Reverse(wantOrder)
	var gotOrder []string
	for i, ev := range hist {
		if ev.Kind == flow.EventCompensationCompleted {
			gotOrder = append(gotOrder, ev.Step)
			if i < wfFailed || i > termIdx {
				c.bad("compensation of %s completed (event %d) outside workflow_failed (%d) .. run_failed (%d)", ev.Step, i, wfFailed, termIdx)
			}
		}
	}
	if !slices.Equal(gotOrder, wantOrder) {
		c.bad("compensations completed in the order %v, want the reverse completion order %v", gotOrder, wantOrder)
	}
	var nComp int
	for _, s := range c.spec.steps {
		if s.comp && !s.failed {
			nComp++
		}
	}
	if len(completed) != nComp {
		c.bad("%d compensable steps completed (%v), want %d", len(completed), completed, nComp)
	}
	compDone := make(map[string]int)
	for _, s := range c.spec.steps {
		rec := c.recs[s.name]
		if !s.comp || s.failed {
			if rec.Compensation != "none" || len(comp[s.name]) > 0 {
				c.bad("step %s has no compensation to run but compensation %q, %d ledger lines", s.name, rec.Compensation, len(comp[s.name]))
			}
			continue
		}
		if rec.Compensation != "completed" {
			c.bad("step %s compensation is %q (error %q), want completed", s.name, rec.Compensation, rec.CompensationError)
		}
		if ev, _, ok := c.one(flow.EventCompensationCompleted, s.name); ok {
			if rec.CompensationAttempts != ev.Attempt {
				c.bad("step %s records %d compensation attempts, completed with attempt %d", s.name, rec.CompensationAttempts, ev.Attempt)
			}
			compDone[s.name] = checkAttempts(c.bad, s.name+" (compensation)", comp[s.name], "comp-start", "comp-done", ev.Attempt, c.st)
		}
	}
	for j, name := range wantOrder {
		for _, l := range comp[name] {
			if l.kind != "comp-start" {
				continue
			}
			if l.idx < failLine {
				c.bad("compensation of %s started (ledger line %d) before the final failure (line %d)", name, l.idx, failLine)
			}
			if j > 0 && l.idx < compDone[wantOrder[j-1]] {
				c.bad("compensation of %s started (ledger line %d) before the compensation of %s finished (line %d)", name, l.idx, wantOrder[j-1], compDone[wantOrder[j-1]])
			}
		}
	}
}

// checkTimer checks the sleep of the run, recorded as step name, before
// step after, of sleepMs:
//
//   - once: one timer_started and one timer_fired event; the timer step
//     completed.
//   - due time: the recorded due time is the sleep after the moment the
//     body first reached it, i.e. between the claim it ran under and the
//     timer_started event (a resume keeps it, it is not re-based).
//   - not early: timer_fired, and every attempt of the step after the
//     sleep, is at or after the due time.
func (c *waitsRunCheck) checkTimer(name, after string, sleepMs int) {
	c.ws.timers++
	rec := c.recs[name]
	var in struct {
		Until int64 `json:"until"`
	}
	if err := json.Unmarshal(rec.Input, &in); err != nil || in.Until == 0 {
		c.bad("timer %s: input %s", name, rec.Input)
		return
	}
	started, si, ok1 := c.one(flow.EventTimerStarted, name)
	fired, fi, ok2 := c.one(flow.EventTimerFired, name)
	if !ok1 || !ok2 {
		return
	}
	if fi < si {
		c.bad("timer %s fired (event %d) before it started (event %d)", name, fi, si)
	}
	if at := fired.At.UnixMilli(); at < in.Until {
		c.bad("timer %s fired at %d, %dms before its due time %d", name, at, in.Until-at, in.Until)
	}
	c.ws.late = append(c.ws.late, ms(int(fired.At.UnixMilli()-in.Until)))
	reached := in.Until - int64(sleepMs)
	if reached > started.At.UnixMilli() {
		c.bad("timer %s: due time %d is %dms after the timer started at %d", name, in.Until, in.Until-started.At.UnixMilli(), started.At.UnixMilli())
	}
	if ci := c.claimBefore(si); ci < 0 || reached < c.hist[ci].At.UnixMilli() {
		c.bad("timer %s: due time %d minus the sleep is before the claim the timer started under: %v", name, in.Until, kinds(c.hist))
	}
	for _, i := range c.events[[2]string{flow.EventStepStarted, after}] {
		if at := c.hist[i].At.UnixMilli(); at < in.Until {
			c.bad("step %s (attempt %d) began at %d, %dms before the timer's due time", after, c.hist[i].Attempt, at, in.Until-at)
		}
		if i < fi {
			c.bad("step %s (attempt %d) began before the timer fired", after, c.hist[i].Attempt)
		}
	}
	if c.workerAt(si) != c.workerAt(fi) {
		c.ws.crossedTimers++
	}
}

type signalRow struct {
	id         int64
	name       string
	payload    int
	key        string
	sentAt     int64
	consumedBy string
}

func signalRows(t *testing.T, db rawDB, runID string) []signalRow {
	t.Helper()
	rows, err := db.QueryContext(t.Context(),
		"SELECT id, name, payload, COALESCE(key, ''), sent_at, COALESCE(consumed_by, '') FROM flowlite_signals WHERE run_id = ? ORDER BY id", runID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []signalRow
	for rows.Next() {
		var r signalRow
		var payload []byte
		if err := rows.Scan(&r.id, &r.name, &payload, &r.key, &r.sentAt, &r.consumedBy); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(payload, &r.payload); err != nil {
			t.Fatalf("signal %d payload %q: %v", r.id, payload, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkReceive checks the waiter's receive against the signals sent and
// stored:
//
//   - stored once: the signals table holds exactly the sends that
//     succeeded, in order, minus those whose key was used before (a
//     duplicate key is stored once, with the first payload); one
//     signal_sent event per stored signal. A send fails only because the
//     run finished.
//   - resolved once: one signal_waiting event, then exactly one
//     signal_received or signal_timed_out; the deadline recorded is the
//     timeout after the moment the body first reached the receive.
//   - received: the signal consumed is the oldest one stored (the event
//     names it), consumed by this receive, the others are not; w2 got its
//     payload.
//   - timed out: at or after the deadline, and no signal was stored before
//     it (every signal_sent event follows the timeout); none is consumed; w2
//     got the timeout.
//   - as planned: a run that was never signalled times out; a run whose
//     first signal was stored before its deadline receives it.
func (c *waitsRunCheck) checkReceive(rows []signalRow, sends []sentSignal, p waitsPlan) {
	name := "flow.receive:" + waitsSignal
	timeoutMs := int64(p.in.(waiterIn).TimeoutMs)

	// Stored once.
	var wantRows []sentSignal
	keys := make(map[string]bool)
	for _, s := range sends {
		c.ws.sends++
		switch {
		case errors.Is(s.err, flow.ErrRunFinished):
			c.ws.refused++
			continue
		case s.err != nil:
			c.bad("signal %+v: %v", s.plannedSend, s.err)
			continue
		case s.key != "" && keys[s.key]:
			c.ws.dupDropped++
			continue
		}
		keys[s.key] = s.key != ""
		wantRows = append(wantRows, s)
	}
	if len(sends) != len(p.sends) {
		c.bad("%d of the %d planned signals were sent", len(sends), len(p.sends))
	}
	c.ws.stored += len(rows)
	same := len(rows) == len(wantRows)
	for i := 0; same && i < len(rows); i++ {
		same = rows[i].name == waitsSignal && rows[i].key == wantRows[i].key && rows[i].payload == wantRows[i].payload
	}
	if !same {
		c.bad("signals stored %+v, want %+v (duplicate keys are stored once, with the first payload)", rows, wantRows)
	}
	if n := c.count(flow.EventSignalSent, ""); n != len(rows) {
		c.bad("%d signal_sent events for %d signals stored", n, len(rows))
	}

	// Resolved once.
	rec := c.recs[name]
	var in struct {
		Signal   string `json:"signal"`
		Deadline int64  `json:"deadline"`
	}
	if err := json.Unmarshal(rec.Input, &in); err != nil || in.Signal != waitsSignal || in.Deadline == 0 {
		c.bad("receive input %s", rec.Input)
		return
	}
	waiting, wi, ok := c.one(flow.EventSignalWaiting, name)
	if !ok {
		return
	}
	reached := in.Deadline - timeoutMs
	if reached > waiting.At.UnixMilli() {
		c.bad("receive: deadline %d is %dms after the wait started at %d", in.Deadline, in.Deadline-waiting.At.UnixMilli(), waiting.At.UnixMilli())
	}
	if ci := c.claimBefore(wi); ci < 0 || reached < c.hist[ci].At.UnixMilli() {
		c.bad("receive: deadline %d minus the timeout is before the claim the wait started under: %v", in.Deadline, kinds(c.hist))
	}
	nRecv, nTimeout := c.count(flow.EventSignalReceived, name), c.count(flow.EventSignalTimedOut, name)
	if nRecv+nTimeout != 1 {
		c.bad("receive resolved %d times (%d received, %d timed out), want once: %v", nRecv+nTimeout, nRecv, nTimeout, kinds(c.hist))
		return
	}
	var got gotSignal
	var ri int
	if nRecv == 1 {
		c.ws.received++
		var ev flow.Event
		ev, ri, _ = c.one(flow.EventSignalReceived, name)
		if len(rows) == 0 {
			c.bad("received a signal, but none was stored")
			return
		}
		first := rows[0]
		if want := fmt.Sprintf("#%d", first.id); !strings.HasSuffix(ev.Detail, want) {
			c.bad("received %q, want the oldest signal %s", ev.Detail, want)
		}
		if want := name + "#0 of run " + c.spec.id; first.consumedBy != want {
			c.bad("oldest signal %d consumed by %q, want %q", first.id, first.consumedBy, want)
		}
		for _, r := range rows[1:] {
			if r.consumedBy != "" {
				c.bad("signal %d consumed by %q, but the run received only once", r.id, r.consumedBy)
			}
		}
		if !jsonEqual(rec.Output, map[string]int{"payload": first.payload}) {
			c.bad("receive output %s, want payload %d", rec.Output, first.payload)
		}
		got = gotSignal{Value: first.payload}
	} else {
		c.ws.timedOut++
		var ev flow.Event
		ev, ri, _ = c.one(flow.EventSignalTimedOut, name)
		if at := ev.At.UnixMilli(); at < in.Deadline {
			c.bad("receive timed out at %d, %dms before its deadline", at, in.Deadline-at)
		}
		for _, i := range c.events[[2]string{flow.EventSignalSent, ""}] {
			if i < ri {
				c.bad("receive timed out (event %d) after a signal was stored (event %d): %v", ri, i, kinds(c.hist))
			}
		}
		for _, r := range rows {
			if r.consumedBy != "" {
				c.bad("signal %d consumed by %q, but the receive timed out", r.id, r.consumedBy)
			}
		}
		if !jsonEqual(rec.Output, map[string]bool{"timed_out": true}) {
			c.bad("receive output %s, want a timeout", rec.Output)
		}
		got = gotSignal{TimedOut: true}
	}
	if ri < wi {
		c.bad("receive resolved (event %d) before it started waiting (event %d)", ri, wi)
	}
	if !jsonEqual(c.recs["w2"].Input, got) || !jsonEqual(c.recs["w2"].Output, wantW2(got)) || !jsonEqual(c.info.Output, wantW2(got)) {
		c.bad("w2 recorded %s → %s, run output %s; want %+v → %d", c.recs["w2"].Input, c.recs["w2"].Output, c.info.Output, got, wantW2(got))
	}
	if c.workerAt(wi) != c.workerAt(ri) {
		c.ws.crossedReceives++
	}

	// As planned.
	switch {
	case len(rows) == 0 && !got.TimedOut:
		c.bad("received without a signal")
	case len(rows) > 0 && rows[0].sentAt < in.Deadline && got.TimedOut:
		c.bad("timed out, but signal %d was stored at %d, before the deadline %d", rows[0].id, rows[0].sentAt, in.Deadline)
	case p.signal == "never" && !got.TimedOut:
		c.bad("received, but the plan sends no signal")
	case p.signal != "never" && p.signal != "late" && (len(rows) == 0 || rows[0].sentAt >= in.Deadline):
		c.ws.timing = append(c.ws.timing, fmt.Sprintf("%s: plan %q, but its first signal was not stored before the deadline: %+v", c.spec.id, p.signal, rows))
	}
}

type waitsChildRun struct {
	info flow.RunInfo
	hist []flow.Event
	err  error
}

// checkChild checks a parent's call of its child:
//
//   - one child per call: the database holds exactly one run whose parent
//     is this run (none when the parent failed before the call), under the
//     ID derived from the call's key, which the start step recorded; one
//     child_started event.
//   - finished once: one child_waiting then one child_finished event, after
//     the child's own terminal event; the await recorded the child's
//     outcome (checked with the step values).
func (c *waitsRunCheck) checkChild(children []string, child waitsChildRun) {
	id := c.spec.childID
	if id == "" {
		if len(children) > 0 {
			c.bad("failed before its call, yet started children %v", children)
		}
		for _, ev := range c.hist {
			if strings.HasPrefix(ev.Kind, "child_") {
				c.bad("failed before its call, yet has a %s event", ev.Kind)
			}
		}
		return
	}
	c.ws.children++
	if !slices.Equal(children, []string{id}) {
		c.bad("children %v, want exactly [%s]", children, id)
	}
	startStep, awaitStep := "flow.child:"+waitsChild.Name, "flow.await:"+id
	if ev, _, ok := c.one(flow.EventChildStarted, startStep); ok && ev.Detail != id {
		c.bad("child_started names %q, want %q", ev.Detail, id)
	}
	_, wi, ok1 := c.one(flow.EventChildWaiting, awaitStep)
	fin, fi, ok2 := c.one(flow.EventChildFinished, awaitStep)
	if !ok1 || !ok2 {
		return
	}
	if fi < wi {
		c.bad("child_finished (event %d) before child_waiting (event %d)", fi, wi)
	}
	if !strings.Contains(fin.Detail, string(flow.StatusCompleted)) {
		c.bad("child_finished says %q, want completed", fin.Detail)
	}
	if child.err != nil {
		c.bad("child %s: %v", id, child.err)
		return
	}
	if n := len(child.hist); n == 0 || child.hist[n-1].ID > fin.ID {
		c.bad("child_finished (event ID %d) precedes the child's terminal event: %v", fin.ID, kinds(child.hist))
	}
	if c.workerAt(wi) != c.workerAt(fi) {
		c.ws.crossedChildren++
	}
}

// jsonEqual says whether the JSON raw holds the value want encodes to.
func jsonEqual(raw []byte, want any) bool {
	var a, b any
	if err := json.Unmarshal(raw, &a); err != nil {
		return false
	}
	wb, err := json.Marshal(want)
	if err != nil {
		return false
	}
	if err := json.Unmarshal(wb, &b); err != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}
