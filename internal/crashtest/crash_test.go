package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

var longFlag = flag.Bool("long", false, "run the long crash test (500 runs, 100 kills); also FLOWLITE_CRASH_LONG=1")

// TestCrashResume is the kill -9 loop (reliability.md A1, tier-0 size).
//
// The parent starts runs of a three-step saga while child processes (this
// test binary, see childMain) work them; it SIGKILLs each child at a random
// moment and starts the next, then lets a last child drain everything. All
// children run one after another, never two at once. Each step and
// compensation attempt writes fsynced "start" and "done"/"fail" lines to a
// ledger (see ledgerWriter). The parent then checks, for every run, the
// database (Inspect, History, PRAGMA integrity_check) against the ledger;
// checkRun documents the oracles.
func TestCrashResume(t *testing.T) {
	t.Parallel()
	runs, kills, drainTimeout := 60, 15, 90*time.Second
	if *longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1" {
		runs, kills, drainTimeout = 500, 100, 5*time.Minute
	}
	crashResume(t, 1, runs, kills, drainTimeout)
}

// TestCrashResumeShards is TestCrashResume on an engine over two shard
// files (flowsqlite.OpenShards), each with its own writer, claimers and
// rescuer: every kill hits both files' writers at once, and every run,
// whichever file holds it, must resume where it stopped (none lost, no
// step run again after its checkpoint). Smaller than TestCrashResume, as
// it covers the same oracles; FLOWLITE_CRASH_LONG=1 makes it long too.
func TestCrashResumeShards(t *testing.T) {
	t.Parallel()
	runs, kills, drainTimeout := 40, 8, 90*time.Second
	if *longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1" {
		runs, kills, drainTimeout = 500, 100, 5*time.Minute
	}
	crashResume(t, 2, runs, kills, drainTimeout)
}

// crashResume is the kill -9 loop on a database of the given number of
// shard files.
func crashResume(t *testing.T, shards, runs, kills int, drainTimeout time.Duration) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOWLITE_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FLOWLITE_CRASH_SEED: %v", err)
		}
	}
	t.Logf("runs=%d kills=%d seed=%d (FLOWLITE_CRASH_SEED=%d replays the kill schedule, not the timing)", runs, kills, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	began := time.Now()

	dir := t.TempDir()
	files := []string{filepath.Join(dir, "flow.db")}
	for i := 1; i < shards; i++ {
		files = append(files, filepath.Join(dir, fmt.Sprintf("flow-%d.db", i)))
	}
	// envDB carries the files as the CLI's --db does: comma-separated.
	h := &harness{t: t, dir: dir, db: strings.Join(files, ","), ledger: filepath.Join(dir, "ledger.txt")}
	ctx := t.Context()

	// The parent's engine is never started: it only records runs and reads
	// them back, while the children work.
	parent, err := flowsqlite.OpenShards(ctx, files, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	flow.Register(parent, sagaWorkflow)
	raws := make([]rawDB, len(files))
	for i, f := range files {
		raws[i] = openRaw(t, f)
	}
	raw := raws[0]

	var acked []string // runs whose Start returned nil
	next := 0
	startRuns := func(k int) {
		for ; k > 0 && next < runs; k-- {
			n := next
			next++
			_, err := flow.Start(ctx, parent, sagaWorkflow, sagaIn{N: n, Fail: sagaFails(n)},
				&flow.StartOptions{RunID: runID(n)})
			if err != nil {
				h.fail("start run %d: %v", n, err)
			}
			acked = append(acked, runID(n))
		}
	}

	perChild := runs / (kills + 1)
	readyKills := 0
	for inc := 1; inc <= kills; inc++ {
		if inc == kills {
			// The last kill surely hits a run in flight, whatever the
			// random ones before it did.
			c := h.spawn(inc, false, envHold+"=1")
			startRuns(perChild)
			h.killInFlight(c, 30*time.Second)
			readyKills++
			continue
		}
		c := h.spawn(inc, false)
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
			time.Sleep(time.Duration(10+rng.IntN(291)) * time.Millisecond)
		}
		select {
		case <-c.ready:
			readyKills++
		default:
		}
		c.kill()
		for i, raw := range raws {
			if problems := integrityCheck(ctx, raw); len(problems) > 0 {
				h.fail("after kill %d: integrity check of shard %d: %v", inc, i, problems)
			}
		}
	}
	killPhase := time.Since(began)

	startRuns(runs)
	drainStart := time.Now()
	c := h.spawn(kills+1, true)
	select {
	case err := <-c.done:
		c.done <- err
		if err != nil {
			h.fail("draining child: %v", err)
		}
	case <-time.After(drainTimeout):
		c.kill()
		counts, _ := parent.CountRuns(ctx)
		h.fail("runs not settled %s after the last kill: %v", drainTimeout, counts)
	}
	drain := time.Since(drainStart)

	// Check every acknowledged run against the ledger.
	byRun := h.settledLedger(ctx, raw, kills+1)
	for i, raw := range raws[1:] {
		if problems := integrityCheck(ctx, raw); len(problems) > 0 {
			h.fail("final integrity check of shard %d: %v", i+1, problems)
		}
	}
	for i := range shards {
		if counts, err := parent.Shard(i).CountRuns(ctx); err != nil || shards > 1 && len(counts) == 0 {
			t.Errorf("shard %d holds no runs (%v, %v): the test did not spread them", i, counts, err)
		}
	}
	all, err := parent.ListRuns(ctx, flow.RunFilter{Limit: 10 * runs})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(acked) || len(acked) != runs {
		t.Errorf("database holds %d runs, %d starts acknowledged, %d wanted", len(all), len(acked), runs)
	}
	var st stats
	var problems []string
	for _, id := range acked {
		info, err := parent.Inspect(ctx, id)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: LOST: %v", id, err))
			continue
		}
		hist, err := parent.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, checkRun(info, hist, byRun[id], &st)...)
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
	if st.rescued == 0 {
		t.Errorf("no run was ever rescued: the kills never hit a run in flight, so the test proved nothing")
	}
	t.Logf("kills=%d (%d after the child was ready) in %s; drain %s; total %s",
		kills, readyKills, killPhase.Round(time.Millisecond), drain.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	t.Logf("completed=%d rolled back=%d; rescues=%d; step attempts started=%d for %d completed or failed steps (interrupted by a kill or a lost lease: %d; finished but killed before the checkpoint: %d); compensation attempts started=%d for %d compensations",
		st.completed, st.failed, st.rescued, st.starts, st.steps, st.interrupted, st.uncommitted, st.compStarts, st.comps)
}

// checkRun checks one run against its history and its ledger lines and
// returns what is wrong. The oracles, and why each is sound:
//
//   - LOST: the run is completed or failed (rolled back); none is left
//     pending, running, waiting, compensating or suspended.
//   - Outcome: a run is rolled back exactly when its input says s3 fails;
//     completed runs have s1, s2, s3 completed with the expected outputs and
//     the expected workflow output.
//   - DUP-CHECKPOINT: the history holds exactly one step_completed event per
//     completed step (step_failed for the failed s3, compensation_completed
//     per compensation), one workflow_failed for a rolled-back run, and one
//     terminal event, which is the last one.
//   - RERUN-AFTER-COMPLETE. Let a* be the attempt of the step's one
//     step_completed event. Attempt numbers come from StepBegin, which commits
//     before the ledger's "start" line is written, and StepBegin refuses a
//     finished step; StepComplete needs the lease, which an executor holding
//     a later attempt would have taken away. So every "start" line has an
//     attempt <= a*, exactly one "start" and one "done" line carry a*, and
//     the step record's attempt count is a*. Independently of how the engine
//     numbers attempts: the "done a*" line was written by the child k* that
//     committed the checkpoint (the body returns, the ledger line is written,
//     then the same process commits). Children run one at a time, so a child
//     started after k* started after the commit: no "start" line of the step
//     may come from a child later than k*. (A "start" of an earlier attempt
//     by child k* itself after "done a*" is allowed: that is a zombie
//     execution whose lease was lost before a* began, permitted by the
//     at-least-once contract; it is counted, not failed.)
//   - BOUND: attempts in "start" lines are distinct (no two executions share
//     one begin), so a step's executions never exceed its recorded attempts,
//     each of which is either a failed attempt recorded in the history or one
//     interrupted by a kill or a lost lease.
//   - SAGA: a rolled-back run has s3 failed for good and s1, s2 compensated
//     (state completed, one compensation_completed each), s2 before s1 in the
//     history and both before run_failed. The same attempt oracle as above
//     holds for each compensation. In the ledger, no compensation starts
//     before s3's final failure, and every compensation attempt of s1 starts
//     after s2's committed compensation finished. A completed run has no
//     compensation at all.
func checkRun(info flow.RunInfo, hist []flow.Event, lines []ledgerLine, st *stats) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, info.ID+": "+fmt.Sprintf(format, args...))
	}
	n, err := runNumber(info.ID)
	if err != nil {
		bad("unexpected run ID")
		return problems
	}
	fails := sagaFails(n)
	switch info.Status {
	case flow.StatusCompleted:
		st.completed++
		if fails {
			bad("completed, but its s3 fails for good")
		}
	case flow.StatusFailed:
		st.failed++
		if !fails {
			bad("rolled back, but none of its steps fails for good (error %q)", info.Error)
		}
	default:
		bad("LOST: left %s (reason %q, error %q)", info.Status, info.Reason, info.Error)
		return problems
	}

	// The history: count events, find the terminal one.
	type evKey struct{ kind, step string }
	events := make(map[evKey][]int) // indices into hist
	for i, ev := range hist {
		k := evKey{ev.Kind, ev.Step}
		events[k] = append(events[k], i)
		if ev.Kind == "run_rescued" {
			st.rescued++
		}
	}
	one := func(kind, step string) (flow.Event, int, bool) {
		idx := events[evKey{kind, step}]
		if len(idx) != 1 {
			bad("%d %s events for step %q, want 1 (DUP-CHECKPOINT)", len(idx), kind, step)
			return flow.Event{}, -1, false
		}
		return hist[idx[0]], idx[0], true
	}
	terminal := "run_completed"
	if fails {
		terminal = "run_failed"
	}
	_, termIdx, _ := one(terminal, "")
	if termIdx != len(hist)-1 {
		bad("%s is not the last event of the history: %v", terminal, kinds(hist))
	}

	// The step records.
	recs := make(map[string]flow.StepRecord)
	for _, s := range info.Steps {
		if s.Occurrence != 0 {
			bad("step %s has occurrence %d", s.Name, s.Occurrence)
		}
		recs[s.Name] = s
	}
	if len(info.Steps) != 3 || len(recs) != 3 {
		bad("%d step records, want s1, s2, s3", len(info.Steps))
		return problems
	}

	// The ledger, split by step and by forward / compensation.
	fwd := make(map[string][]ledgerLine)
	comp := make(map[string][]ledgerLine)
	for _, l := range lines {
		if strings.HasPrefix(l.kind, "comp-") {
			comp[l.step] = append(comp[l.step], l)
		} else {
			fwd[l.step] = append(fwd[l.step], l)
		}
	}

	want := map[string]int{"s1": wantS1(n), "s2": wantS2(n), "s3": wantS3(n)}
	for _, name := range []string{"s1", "s2", "s3"} {
		rec := recs[name]
		if name == "s3" && fails {
			if rec.Status != "failed" || !strings.Contains(rec.Error, errS3) {
				bad("s3 is %s (error %q), want failed with %q", rec.Status, rec.Error, errS3)
			}
			if len(events[evKey{"step_completed", name}]) > 0 {
				bad("s3 has a step_completed event")
			}
			if ev, _, ok := one("step_failed", name); ok {
				if rec.Attempts != ev.Attempt {
					bad("s3 records %d attempts, its final failure was attempt %d", rec.Attempts, ev.Attempt)
				}
				checkAttempts(bad, "s3", fwd[name], "start", "fail", ev.Attempt, st)
			}
			continue
		}
		if rec.Status != "completed" {
			bad("%s is %s, want completed", name, rec.Status)
			continue
		}
		var out int
		if err := json.Unmarshal(rec.Output, &out); err != nil || out != want[name] {
			bad("%s recorded output %s, want %d", name, rec.Output, want[name])
		}
		if ev, _, ok := one("step_completed", name); ok {
			if rec.Attempts != ev.Attempt {
				bad("%s records %d attempts, it completed with attempt %d", name, rec.Attempts, ev.Attempt)
			}
			checkAttempts(bad, name, fwd[name], "start", "done", ev.Attempt, st)
		}
	}

	if !fails {
		var out sagaOut
		if err := json.Unmarshal(info.Output, &out); err != nil || out != (sagaOut{wantS1(n), wantS2(n), wantS3(n)}) {
			bad("workflow output %s, want %+v", info.Output, sagaOut{wantS1(n), wantS2(n), wantS3(n)})
		}
		if len(comp) > 0 {
			bad("a completed run ran compensations: %v", comp)
		}
		for _, ev := range hist {
			if strings.HasPrefix(ev.Kind, "compensation_") || ev.Kind == "workflow_failed" {
				bad("a completed run has a %s event", ev.Kind)
			}
		}
		for _, name := range []string{"s1", "s2", "s3"} {
			if recs[name].Compensation != "none" {
				bad("%s of a completed run has compensation %q", name, recs[name].Compensation)
			}
		}
		return problems
	}

	// SAGA.
	if !strings.Contains(info.Error, errS3) {
		bad("run error %q does not name the failure of s3", info.Error)
	}
	one("workflow_failed", "")
	if recs["s3"].Compensation != "none" || len(comp["s3"]) > 0 {
		bad("s3 has no compensate hook but compensation %q, %d ledger lines", recs["s3"].Compensation, len(comp["s3"]))
	}
	compIdx := make(map[string]int)
	compDone := make(map[string]int) // ledger index of the committed comp-done
	for _, name := range []string{"s1", "s2"} {
		rec := recs[name]
		if rec.Compensation != "completed" {
			bad("%s compensation is %q, want completed", name, rec.Compensation)
		}
		ev, i, ok := one("compensation_completed", name)
		if !ok {
			continue
		}
		compIdx[name] = i
		if i > termIdx {
			bad("compensation of %s completed after run_failed", name)
		}
		if rec.CompensationAttempts != ev.Attempt {
			bad("%s records %d compensation attempts, completed with attempt %d", name, rec.CompensationAttempts, ev.Attempt)
		}
		compDone[name] = checkAttempts(bad, name+" (compensation)", comp[name], "comp-start", "comp-done", ev.Attempt, st)
	}
	if a, b := compIdx["s2"], compIdx["s1"]; a >= b {
		bad("compensation of s2 (event %d) does not precede compensation of s1 (event %d)", a, b)
	}
	failLine := -1
	for _, l := range fwd["s3"] {
		if l.kind == "fail" {
			failLine = l.idx // the last one is the final failure
		}
	}
	for _, name := range []string{"s1", "s2"} {
		for _, l := range comp[name] {
			if l.kind == "comp-start" && l.idx < failLine {
				bad("compensation of %s started (ledger line %d) before s3 failed for good (line %d)", name, l.idx, failLine)
			}
			if name == "s1" && l.kind == "comp-start" && l.idx < compDone["s2"] {
				bad("compensation of s1 started (ledger line %d) before compensation of s2 finished (line %d)", l.idx, compDone["s2"])
			}
		}
	}
	return problems
}

// checkAttempts applies the attempt oracles (see checkRun) to the ledger
// lines of one step, or of one compensation, whose outcome was recorded with
// attempt final and ledger kind end. It returns the ledger index of that
// outcome's line.
func checkAttempts(bad func(string, ...any), what string, lines []ledgerLine, start, end string, final int, st *stats) int {
	if strings.HasPrefix(start, "comp-") {
		st.comps++
	} else {
		st.steps++
	}
	seen := make(map[int]bool)
	var finalStarts, finalEnds []ledgerLine
	for _, l := range lines {
		switch l.kind {
		case start:
			if strings.HasPrefix(start, "comp-") {
				st.compStarts++
			} else {
				st.starts++
			}
			if seen[l.attempt] {
				bad("%s: attempt %d started twice (BOUND)", what, l.attempt)
			}
			seen[l.attempt] = true
			if l.attempt > final {
				bad("%s: attempt %d started (child %d) after attempt %d was recorded as the outcome (RERUN-AFTER-COMPLETE)", what, l.attempt, l.inc, final)
			}
			if l.attempt == final {
				finalStarts = append(finalStarts, l)
			}
		case end:
			if l.attempt == final {
				finalEnds = append(finalEnds, l)
			} else if end != "fail" && end != "comp-fail" {
				st.uncommitted++ // body finished, killed before its checkpoint
			}
		}
	}
	for _, l := range lines {
		if l.kind == start && !hasEnd(lines, l) {
			st.interrupted++
		}
	}
	if len(finalStarts) != 1 || len(finalEnds) != 1 {
		bad("%s: %d %q and %d %q ledger lines for the recorded attempt %d, want 1 each", what, len(finalStarts), start, len(finalEnds), end, final)
		return -1
	}
	k := finalEnds[0]
	for _, l := range lines {
		// Children that run at once (st.concurrent) may legitimately hold
		// the run in any order; the attempt check above covers them.
		if l.kind == start && l.inc > k.inc && !st.concurrent {
			bad("%s: child %d started attempt %d after child %d recorded attempt %d (RERUN-AFTER-COMPLETE)", what, l.inc, l.attempt, k.inc, final)
		}
	}
	return k.idx
}

func hasEnd(lines []ledgerLine, s ledgerLine) bool {
	for _, l := range lines {
		if l.idx > s.idx && l.attempt == s.attempt && l.inc == s.inc && l.kind != s.kind {
			return true
		}
	}
	return false
}

func kinds(hist []flow.Event) []string {
	out := make([]string, len(hist))
	for i, ev := range hist {
		out[i] = ev.Kind
		if ev.Step != "" {
			out[i] += "(" + ev.Step + ")"
		}
	}
	return out
}

type stats struct {
	concurrent                 bool // children ran at the same time
	completed, failed, rescued int
	steps, starts, interrupted int
	uncommitted                int
	comps, compStarts          int
}

// ledgerLine is one parsed ledger line; idx is its position in the file,
// which is the order in which the lines were written.
type ledgerLine struct {
	idx, inc  int
	kind      string
	run, step string
	attempt   int
}

func readLedger(path string) (lines []ledgerLine, malformed int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		var l ledgerLine
		if _, err := fmt.Sscanf(sc.Text(), "%d %s %s %s %d", &l.inc, &l.kind, &l.run, &l.step, &l.attempt); err != nil {
			malformed++
			continue
		}
		l.idx = i
		lines = append(lines, l)
	}
	return lines, malformed, sc.Err()
}

// harness runs the child processes of one crash test.
type harness struct {
	t               *testing.T
	dir, db, ledger string
	pg              *pgTarget // the workers share this schema instead of db
	cur             *child    // the child started last
}

// openEngine opens an engine, not started, on the database the workers
// share, for the parent to start runs and read them back.
func (h *harness) openEngine(ctx context.Context) (*flow.Engine, error) {
	if h.pg != nil {
		return h.pg.open(ctx, nil)
	}
	return flowsqlite.Open(ctx, h.db, nil, nil)
}

type child struct {
	inc   int
	cmd   *exec.Cmd
	ready chan struct{} // closed once the child printed "ready"
	done  chan error    // receives the result of Wait
	once  sync.Once
}

func (h *harness) spawn(inc int, drain bool, env ...string) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envDB+"="+h.db, envLedger+"="+h.ledger,
		envInc+"="+strconv.Itoa(inc), envDrain+"="+map[bool]string{true: "1", false: "0"}[drain])
	cmd.Env = append(cmd.Env, env...)
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

// killInFlight kills c, a child spawned with envHold=1, once the ledger
// shows its first step attempt started (and parked), so that the kill
// certainly leaves a run leased by a dead worker; it fails the test if that
// line does not come within timeout.
func (h *harness) killInFlight(c *child, timeout time.Duration) {
	h.t.Helper()
	prefix := []byte(strconv.Itoa(c.inc) + " start ")
	for deadline := time.Now().Add(timeout); ; time.Sleep(5 * time.Millisecond) {
		data, err := os.ReadFile(h.ledger)
		if err != nil && !os.IsNotExist(err) {
			h.t.Fatal(err)
		}
		if bytes.HasPrefix(data, prefix) || bytes.Contains(data, append([]byte("\n"), prefix...)) {
			break
		}
		select {
		case err := <-c.done:
			c.done <- err
			h.fail("child %d exited before it started a step: %v", c.inc, err)
			return
		default:
		}
		if time.Now().After(deadline) {
			c.kill()
			h.fail("child %d started no step within %s", c.inc, timeout)
			return
		}
	}
	c.kill()
}

// wait returns the result of the child's Wait once it exited.
func (c *child) wait() error {
	err := <-c.done
	c.done <- err // for kill, or another wait
	return err
}

// kill sends SIGKILL and waits until the child is gone.
func (c *child) kill() {
	c.once.Do(func() { _ = c.cmd.Process.Kill() })
	_ = c.wait()
}

// settledLedger runs the checks common to every crash test once its runs
// settled: the file's integrity (raw is nil on PostgreSQL, whose server
// checks its own) and the children's logs (children of them were
// started), then returns the ledger's lines by run.
func (h *harness) settledLedger(ctx context.Context, raw rawDB, children int) map[string][]ledgerLine {
	h.t.Helper()
	if raw != nil {
		if problems := integrityCheck(ctx, raw); len(problems) > 0 {
			h.fail("final integrity check: %v", problems)
		}
	}
	h.scanChildLogs(children)
	lines, malformed, err := readLedger(h.ledger)
	if err != nil {
		h.t.Fatal(err)
	}
	if malformed > 0 {
		h.t.Errorf("ledger has %d malformed lines", malformed)
	}
	byRun := make(map[string][]ledgerLine)
	for _, l := range lines {
		byRun[l.run] = append(byRun[l.run], l)
	}
	return byRun
}

func (h *harness) logPath(inc int) string {
	return filepath.Join(h.dir, fmt.Sprintf("child-%03d.log", inc))
}

// fail reports a fatal problem with the tail of the children's logs.
func (h *harness) fail(format string, args ...any) {
	h.t.Helper()
	if h.cur != nil {
		h.cur.kill() // leave no process or goroutine behind
	}
	h.dumpLogs()
	h.t.Fatalf(format, args...)
}

func (h *harness) dumpLogs() {
	h.t.Helper()
	paths, _ := filepath.Glob(filepath.Join(h.dir, "child-*.log"))
	slices.Sort(paths)
	if len(paths) > 5 {
		paths = paths[len(paths)-5:]
	}
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		h.t.Logf("%s:\n%s", filepath.Base(p), b)
	}
}

// scanChildLogs fails on a data race or panic reported by any child.
func (h *harness) scanChildLogs(n int) {
	h.t.Helper()
	for inc := 1; inc <= n; inc++ {
		b, err := os.ReadFile(h.logPath(inc))
		if err != nil {
			h.t.Fatal(err)
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
			if bytes.Contains(b, []byte(bad)) {
				h.t.Errorf("child %d reported %q:\n%s", inc, bad, b)
			}
		}
	}
}

// readyWriter is a child's stdout: it closes ready when the child prints
// "ready".
type readyWriter struct {
	mu    sync.Mutex
	buf   []byte
	ready chan struct{}
	seen  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.seen {
		w.buf = append(w.buf, p...)
		if bytes.Contains(w.buf, []byte("ready\n")) {
			w.seen = true
			close(w.ready)
		}
	}
	return len(p), nil
}

// integrityCheck runs PRAGMA integrity_check and foreign_key_check and
// returns their findings.
func integrityCheck(ctx context.Context, db rawDB) []string {
	var problems []string
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return []string{err.Error()}
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			problems = append(problems, err.Error())
		} else if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		problems = append(problems, err.Error())
	}
	rows, err = db.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return append(problems, err.Error())
	}
	for rows.Next() {
		problems = append(problems, "foreign key violation")
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		problems = append(problems, err.Error())
	}
	return problems
}
