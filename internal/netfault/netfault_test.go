//go:build linux

package netfault

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// envGate turns the test on. It needs root (namespaces, veths), iproute2
// and a PostgreSQL server; with the variable set, a missing one fails the
// test, so that CI never reports a partition test that did not run.
const envGate = "FLOWLITE_NETNS_TEST"

// envKeep names a directory for the workers' logs and the ledger, which
// then outlive the test.
const envKeep = "FLOWLITE_NETFAULT_DIR"

// Scenario sizes. A cut lasts several leases. The workers' connections
// take their network timeouts from the lease (flowpg.Open): the server ends
// a session idle in a transaction after one lease, and a worker drops a
// connection whose data goes unacknowledged that long.
const (
	workers    = 3
	startEvery = 70 * time.Millisecond // one run started per tick while the scenario lasts
	cutFor     = 10 * time.Second
	// shortCut is the cut of worker 2: long enough for its runs to be
	// rescued (a lease, and another for the server to end a transaction
	// that held a run's row), shorter than a slow s0, whose execution
	// outlives the cut and comes back to a run another worker now owns.
	shortCut      = 7 * time.Second
	settleTimeout = 60 * time.Second
	// stopBound is how soon a worker whose link is cut must exit after
	// SIGTERM: its Stop timeout, then a write or dial that was in flight
	// giving up (a lease each), and some slack.
	stopBound = workerStopTimeout + 3*leaseTimeout + 3*time.Second
)

// TestPartition runs three workers, each in a network namespace of its
// own that reaches PostgreSQL over its own veth, while the test starts
// saga runs (s0, then three transactional steps) at a steady pace, and
// cuts their links one after the other:
//
//   - worker 1's silently (packets vanish, connections hang), for cutFor
//     (five leases), then restores it;
//   - worker 2's by downing its own interface, for shortCut, while it runs
//     a slow s0 that outlives the cut, then restores it;
//   - worker 3's silently, and a second later asks it to stop (SIGTERM).
//
// While each link is down it checks that the other workers rescue every
// run leased to the cut one, also those whose rows a half-finished
// transaction of the cut worker had locked, before the link comes back;
// after each restore, that the worker commits step effects again by
// itself; that worker 2's stale execution was refused for its lost lease;
// and that worker 3 exits within stopBound although it cannot reach the
// server. Once every run settled, it checks each run against its history,
// the effects table and the attempt ledger (checkRun): 0 lost runs, each
// effect committed exactly once and with its checkpoint (none by a stale
// worker), 0 steps run again after their checkpoint, and every rolled-back
// saga fully compensated.
func TestPartition(t *testing.T) {
	if os.Getenv(envGate) != "1" {
		t.Skipf("set %s=1 to run the network partition test (root, iproute2 and PostgreSQL needed)", envGate)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s=1 but not root: network namespaces need root", envGate)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("%s=1 but iproute2's ip is missing: %v", envGate, err)
	}
	lockMachine(t)
	removeLeftovers(t)
	dsn, schema := pgtest.Schema(t)
	ctx := t.Context()
	began := time.Now()

	// The test's engine is never started: it starts runs and reads them.
	parent, err := flowpg.Open(ctx, dsn, &flow.Config{Logger: slog.New(slog.DiscardHandler), CleanInterval: -1},
		&flowpg.Options{Schema: schema})
	if err != nil {
		t.Fatalf("open the test's engine: %v", err)
	}
	t.Cleanup(func() { parent.Close() })
	saga := newSaga(schema, "test")
	flow.Register(parent, saga)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// The steps' own data, in flowlite's schema so that it goes with it.
	// No unique key: a second commit of one effect must be seen, not
	// refused.
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+schema+`.effects (
		run_id text NOT NULL, step text NOT NULL, attempt int NOT NULL, worker text NOT NULL,
		at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatalf("create the effects table: %v", err)
	}

	dir := t.TempDir()
	if d := os.Getenv(envKeep); d != "" {
		dir = d // the workers' logs and the ledger stay there
	}
	ledger := filepath.Join(dir, "ledger.txt")
	upstream, err := serverAddr(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var hosts []*host
	var procs []*worker
	for i := 1; i <= workers; i++ {
		h := newHost(t, i, upstream)
		hosts = append(hosts, h)
		procs = append(procs, startWorker(t, h, workerDSN(dsn, h.fwd.addr()), schema, ledger, dir))
	}
	for _, w := range procs {
		select {
		case <-w.ready:
		case <-w.exited:
			t.Fatalf("%s exited before it was ready:\n%s", w.id, w.logTail())
		case <-time.After(30 * time.Second):
			t.Fatalf("%s not ready after 30s:\n%s", w.id, w.logTail())
		}
	}

	// Start runs at a steady pace until the scenario is over.
	feed := &feeder{e: parent, saga: saga}
	feedCtx, stopFeed := context.WithCancel(ctx)
	feedDone := make(chan struct{})
	go func() { defer close(feedDone); feed.run(feedCtx) }()
	defer func() { stopFeed(); <-feedDone }()

	leased := func(worker string) int {
		var n int
		err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+schema+".runs WHERE lease_owner = $1", worker).Scan(&n)
		if err != nil {
			t.Fatalf("count the runs leased to %s: %v", worker, err)
		}
		return n
	}
	// freshSlowS0 reports whether worker runs a slow s0 that began less
	// than a second ago.
	freshSlowS0 := func(worker string) bool {
		rows, err := db.QueryContext(ctx, "SELECT st.run_id FROM "+schema+".steps AS st JOIN "+schema+
			".runs AS r ON r.id = st.run_id WHERE r.lease_owner = $1 AND st.name = 's0' AND st.status = 'running' AND st.started_at > $2",
			worker, time.Now().Add(-time.Second).UnixMilli())
		if err != nil {
			t.Fatalf("find the slow steps of %s: %v", worker, err)
		}
		defer rows.Close()
		found := false
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			if _, err := fmt.Sscanf(id, "run-%d", &n); err == nil && slowS0(n) {
				found = true
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return found
	}
	var cuts []cutReport
	for i, kind := range []cutKind{cutSilent, cutLocal, cutSilent} {
		h, w := hosts[i], procs[i]
		stopIt := i == 2
		length := cutFor
		if i == 1 {
			length = shortCut
		}
		// Cut while the worker holds runs: those are what the cut is about.
		// Before the short cut, wait until the worker has just begun a slow
		// s0, which will end after the link is back.
		deadline := time.Now().Add(20 * time.Second)
		for (leased(w.id) < 2 || (length == shortCut && !freshSlowS0(w.id))) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		r := cutReport{worker: w.id, kind: kind, length: length, heldAtCut: leased(w.id), stopped: stopIt}
		if r.heldAtCut == 0 {
			t.Fatalf("%s held no run to cut it from", w.id)
		}
		if err := h.setLink(kind, false); err != nil {
			t.Fatalf("cut: %v", err)
		}
		r.cutAt = time.Now()
		t.Cleanup(func() { _ = h.setLink(kind, true) }) // before the workers stop, on failure too
		var stopped chan error
		if stopIt {
			time.Sleep(time.Second)
			stopped = make(chan error, 1)
			go func() { stopped <- w.stop(stopBound) }()
		}
		for time.Since(r.cutAt) < length {
			if r.allRescued == 0 && leased(w.id) == 0 {
				r.allRescued = time.Since(r.cutAt)
			}
			time.Sleep(50 * time.Millisecond)
		}
		r.leftAtRestore = leased(w.id)
		if stopIt {
			r.stopErr = <-stopped
			r.exitedAfter = w.exitedAt.Sub(r.cutAt.Add(time.Second))
			cuts = append(cuts, r)
			continue // the link stays cut; the namespace goes with the test
		}
		if err := h.setLink(kind, true); err != nil {
			t.Fatalf("restore: %v", err)
		}
		r.restoredAt = time.Now()
		// The worker must reconnect by itself and commit work again.
		for r.backAfter == 0 && time.Since(r.restoredAt) < 30*time.Second {
			var first sql.NullTime
			err := db.QueryRowContext(ctx, "SELECT min(at) FROM "+schema+".effects WHERE worker = $1 AND at > $2",
				w.id, r.restoredAt).Scan(&first)
			if err != nil {
				t.Fatalf("read effects: %v", err)
			}
			if first.Valid {
				r.backAfter = first.Time.Sub(r.restoredAt)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cuts = append(cuts, r)
	}
	stopFeed()
	<-feedDone
	if feed.err != nil {
		t.Errorf("start runs: %v", feed.err)
	}

	// Let every run settle, then stop the workers.
	settleStart := time.Now()
	for {
		counts, err := parent.CountRuns(ctx)
		if err != nil {
			t.Fatalf("count runs: %v", err)
		}
		open := counts[flow.StatusPending] + counts[flow.StatusRunning] + counts[flow.RunStatus("waiting")] + counts[flow.StatusCompensating]
		if open == 0 {
			break
		}
		if time.Since(settleStart) > settleTimeout {
			t.Errorf("runs not settled %s after the last restore: %v", settleTimeout, counts)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	settle := time.Since(settleStart)
	for _, w := range procs[:2] {
		if err := w.stop(2 * workerStopTimeout); err != nil {
			t.Errorf("%s: %v\n%s", w.id, err, w.logTail())
		}
	}

	// The oracles.
	for _, r := range cuts {
		if r.leftAtRestore > 0 {
			t.Errorf("%s: %d runs still leased to it %s after its link was cut (lease %s): the others did not rescue them",
				r.worker, r.leftAtRestore, r.length, leaseTimeout)
		}
		if r.length == shortCut && strings.Count(procByID(procs, r.worker).log(), "lease lost") == 0 {
			t.Errorf("%s: no write of its was refused for a lost lease after the short cut: no stale execution outlived it, so fencing was not tested", r.worker)
		}
		if r.stopped {
			// Stop reports the runs it interrupted: exit status 3.
			if r.stopErr != nil && !strings.Contains(r.stopErr.Error(), "exit status 3") {
				t.Errorf("%s, stopped while cut off: %v\n%s", r.worker, r.stopErr, procByID(procs, r.worker).logTail())
			}
			continue
		}
		if r.backAfter == 0 {
			t.Errorf("%s: no step effect committed within 30s after its link came back: it did not reconnect by itself", r.worker)
		}
	}
	effects := readEffects(ctx, t, db, schema)
	lines := readLedger(t, ledger)
	all, err := parent.ListRuns(ctx, flow.RunFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(feed.acked) {
		t.Errorf("the database holds %d runs, %d starts were acknowledged", len(all), len(feed.acked))
	}
	var st stats
	var problems []string
	for _, n := range feed.acked {
		id := runID(n)
		info, err := parent.Inspect(ctx, id)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: LOST: %v", id, err))
			st.lost++
			continue
		}
		hist, err := parent.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, checkRun(n, info, hist, effects[id], lines[id], &st)...)
		delete(effects, id)
		delete(lines, id)
	}
	for id := range effects {
		problems = append(problems, fmt.Sprintf("%s: effects of a run nobody started", id))
	}
	for id := range lines {
		problems = append(problems, fmt.Sprintf("%s: ledger lines of a run nobody started", id))
	}
	for i, p := range problems {
		if i == 40 {
			t.Errorf("… and %d more problems", len(problems)-40)
			break
		}
		t.Error(p)
	}
	for _, w := range procs {
		log := w.log()
		for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
			if strings.Contains(log, bad) {
				t.Errorf("%s reported %q:\n%s", w.id, bad, w.logTail())
			}
		}
	}
	if st.rescued == 0 {
		t.Errorf("no run was rescued: the cuts caught no run in flight, so the test proved nothing")
	}

	t.Logf("runs=%d (completed %d, rolled back %d) in %s; lease %s; settled %s after the last cut",
		len(feed.acked), st.completed, st.failed, time.Since(began).Round(time.Millisecond), leaseTimeout, settle.Round(time.Millisecond))
	for _, r := range cuts {
		rescued := "never"
		if r.allRescued > 0 {
			rescued = r.allRescued.Round(time.Millisecond).String()
		}
		lost := strings.Count(procByID(procs, r.worker).log(), "lease lost")
		if r.stopped {
			t.Logf("%s cut by %s and sent SIGTERM 1s later: held %d runs at the cut, all rescued by the others after %s; exited %s after SIGTERM (%v); %d lease-lost (fenced) writes logged",
				r.worker, r.kind, r.heldAtCut, rescued, r.exitedAfter.Round(time.Millisecond), r.stopErr, lost)
			continue
		}
		t.Logf("%s cut for %s by %s: held %d runs at the cut, all rescued by the others after %s; committed again %s after the restore; %d lease-lost (fenced) writes logged",
			r.worker, r.length, r.kind, r.heldAtCut, rescued, r.backAfter.Round(time.Millisecond), lost)
	}
	t.Logf("rescues=%d; lost=%d; effects committed twice=%d; steps re-run after their checkpoint=%d; half-compensated sagas=%d; step attempts started=%d for %d steps",
		st.rescued, st.lost, st.dupEffects, st.reruns, st.halfCompensated, st.starts, st.steps)
}

type cutReport struct {
	worker        string
	kind          cutKind
	length        time.Duration
	heldAtCut     int
	cutAt         time.Time
	allRescued    time.Duration // after the cut, until no run was leased to the worker; 0: never
	leftAtRestore int           // runs leased to the worker cutFor after the cut
	stopped       bool          // sent SIGTERM during the cut, not restored
	stopErr       error
	exitedAfter   time.Duration // after SIGTERM
	restoredAt    time.Time
	backAfter     time.Duration // after the restore, until its first committed effect; 0: never
}

// serverAddr returns the host:port of the server a URL DSN names.
func serverAddr(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%s must be a postgres:// URL with a host for this test, got %q", pgtest.DSNEnv, dsn)
	}
	if u.Port() == "" {
		return u.Host + ":5432", nil
	}
	return u.Host, nil
}

// workerDSN is dsn with the forwarder as the host. It sets no timeouts:
// the workers run with the ones flowpg.Open derives from their lease.
func workerDSN(dsn, addr string) string {
	u, _ := url.Parse(dsn) // serverAddr parsed it
	u.Host = addr
	return u.String()
}

// feeder starts run after run, one per startEvery, until its context ends.
type feeder struct {
	e     *flow.Engine
	saga  flow.Workflow[sagaIn, int]
	acked []int // runs whose Start returned nil
	err   error
}

func (f *feeder) run(ctx context.Context) {
	tick := time.NewTicker(startEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_, err := flow.Start(ctx, f.e, f.saga, sagaIn{N: n, Fail: sagaFails(n), Slow: slowS0(n)}, &flow.StartOptions{RunID: runID(n)})
		if err != nil {
			if ctx.Err() == nil {
				f.err = fmt.Errorf("run %d: %w", n, err)
			}
			return
		}
		f.acked = append(f.acked, n)
	}
}

// worker is a worker process in its namespace.
type worker struct {
	id       string
	cmd      *exec.Cmd
	logPath  string
	ready    chan struct{}
	exited   chan struct{}
	waitErr  error
	exitedAt time.Time
}

func startWorker(t *testing.T, h *host, dsn, schema, ledger, dir string) *worker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{id: fmt.Sprintf("w%d", h.i), ready: make(chan struct{}), exited: make(chan struct{}),
		logPath: filepath.Join(dir, fmt.Sprintf("w%d.log", h.i))}
	// ip execs the binary in the namespace: the process is the worker, and
	// signals reach it.
	w.cmd = exec.Command("ip", "netns", "exec", h.ns, exe, "-test.run=^$")
	// A test binary that dies (go test's timeout panics it) takes its
	// workers along; its namespaces go at the next run's start.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	w.cmd.Env = append(os.Environ(), envWorker+"="+w.id, envDSN+"="+dsn, envSchema+"="+schema, envLedger+"="+ledger)
	logf, err := os.Create(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the process has its own descriptor
	w.cmd.Stderr = logf
	w.cmd.Stdout = &readyWriter{ready: w.ready}
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", w.id, err)
	}
	go func() { w.waitErr = w.cmd.Wait(); w.exitedAt = time.Now(); close(w.exited) }()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			_ = w.cmd.Process.Kill()
			<-w.exited
		}
	})
	return w
}

// stop asks the worker to stop and waits for it, killing it after bound.
func (w *worker) stop(bound time.Duration) error {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
		if w.waitErr != nil {
			return fmt.Errorf("stopped with %v", w.waitErr)
		}
		return nil
	case <-time.After(bound):
		_ = w.cmd.Process.Kill()
		<-w.exited
		return fmt.Errorf("did not exit within %s of SIGTERM", bound)
	}
}

func (w *worker) log() string {
	b, _ := os.ReadFile(w.logPath)
	return string(b)
}

func (w *worker) logTail() string {
	s := w.log()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

func procByID(ws []*worker, id string) *worker {
	for _, w := range ws {
		if w.id == id {
			return w
		}
	}
	return nil
}

// readyWriter is a worker's stdout: it closes ready when the worker prints
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

// effect is one row of the effects table.
type effect struct {
	step    string
	attempt int
	worker  string
}

func readEffects(ctx context.Context, t *testing.T, db *sql.DB, schema string) map[string][]effect {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT run_id, step, attempt, worker FROM "+schema+".effects ORDER BY at")
	if err != nil {
		t.Fatalf("read effects: %v", err)
	}
	defer rows.Close()
	out := make(map[string][]effect)
	for rows.Next() {
		var id string
		var e effect
		if err := rows.Scan(&id, &e.step, &e.attempt, &e.worker); err != nil {
			t.Fatal(err)
		}
		out[id] = append(out[id], e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ledgerLine is one line of the attempt ledger; idx is its position in the
// file, the order in which the lines were written.
type ledgerLine struct {
	idx          int
	worker, kind string
	step         string
	attempt      int
}

func readLedger(t *testing.T, path string) map[string][]ledgerLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("read the ledger: %v", err)
	}
	defer f.Close()
	out := make(map[string][]ledgerLine)
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		var l ledgerLine
		var run string
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %s %s %d", &l.worker, &l.kind, &run, &l.step, &l.attempt); err != nil {
			t.Errorf("ledger line %d %q: %v", i, sc.Text(), err)
			continue
		}
		l.idx = i
		out[run] = append(out[run], l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type stats struct {
	completed, failed, lost, rescued int
	dupEffects, reruns               int
	halfCompensated                  int
	steps, starts                    int
}

// checkRun checks one settled run against its history, its effects and its
// ledger lines, and returns what is wrong. The oracles:
//
//   - LOST: the run is completed or rolled back (failed), as its input
//     says; none is left pending, running, compensating or suspended.
//   - Exactly-once effects: a completed step of s1, s2 and s3 has exactly
//     one row in the effects table, written by the attempt its checkpoint
//     records (the row commits in the checkpoint's transaction, so a second
//     row would be a second commit of the step, e.g. a stale worker's that
//     fencing let through); a step that failed has none (its transaction
//     rolled back). The history holds one step_completed per completed
//     step, s0 included.
//   - RERUN-AFTER-CHECKPOINT: attempt numbers come from StepBegin, which
//     refuses a finished step and commits before the ledger's "start"
//     line; the checkpoint needs the lease, which an executor holding a
//     later attempt would have taken away. So no "start" line carries an
//     attempt above the recorded one, and no attempt starts twice.
//   - SAGA: a rolled-back run has s3 failed for good, s1 and s2 compensated
//     (one compensation_completed each, s2's before s1's, both before the
//     terminal run_failed); a completed run ran no compensation.
func checkRun(n int, info flow.RunInfo, hist []flow.Event, effects []effect, lines []ledgerLine, st *stats) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, info.ID+": "+fmt.Sprintf(format, args...))
	}
	fails := sagaFails(n)
	switch {
	case info.Status == flow.StatusCompleted && !fails:
		st.completed++
	case info.Status == flow.StatusFailed && fails:
		st.failed++
	case info.Status == flow.StatusCompleted || info.Status == flow.StatusFailed:
		bad("%s, but its input says s3 fails: %v (error %q)", info.Status, fails, info.Error)
	default:
		st.lost++
		if info.Status == flow.StatusCompensating || info.Status == flow.StatusSuspended {
			st.halfCompensated++
		}
		bad("LOST: left %s (reason %q, error %q)", info.Status, info.Reason, info.Error)
		return problems
	}

	events := make(map[string][]int) // kind/step → indices into hist
	for i, ev := range hist {
		events[ev.Kind+"/"+ev.Step] = append(events[ev.Kind+"/"+ev.Step], i)
		if ev.Kind == flow.EventRunRescued {
			st.rescued++
		}
	}
	one := func(kind, step string) (flow.Event, int, bool) {
		idx := events[kind+"/"+step]
		if len(idx) != 1 {
			bad("%d %s events for step %q, want 1", len(idx), kind, step)
			return flow.Event{}, -1, false
		}
		return hist[idx[0]], idx[0], true
	}
	terminal := flow.EventRunCompleted
	if fails {
		terminal = flow.EventRunFailed
	}
	if _, i, ok := one(terminal, ""); ok && i != len(hist)-1 {
		bad("%s is not the last event of the history", terminal)
	}

	recs := make(map[string]flow.StepRecord)
	for _, s := range info.Steps {
		recs[s.Name] = s
	}
	for _, name := range []string{"s0", "s1", "s2", "s3"} {
		rec, ok := recs[name]
		if !ok {
			bad("no record of step %s", name)
			continue
		}
		st.steps++
		var mine []effect
		for _, e := range effects {
			if e.step == name {
				mine = append(mine, e)
			}
		}
		if name == "s3" && fails {
			if rec.Status != "failed" || !strings.Contains(rec.Error, errS3) {
				bad("s3 is %s (error %q), want failed with %q", rec.Status, rec.Error, errS3)
			}
			if len(mine) > 0 {
				bad("the failed s3 committed %d effects", len(mine))
			}
			one(flow.EventStepFailed, name)
		} else {
			if rec.Status != "completed" {
				bad("%s is %s, want completed", name, rec.Status)
			}
			switch {
			case name == "s0": // no effect of its own
				if len(mine) > 0 {
					bad("s0 has effects: %+v", mine)
				}
			case len(mine) > 1:
				st.dupEffects += len(mine) - 1
				bad("%s committed its effect %d times: %+v", name, len(mine), mine)
			case len(mine) == 0:
				bad("%s completed without its effect", name)
			case mine[0].attempt != rec.Attempts:
				bad("%s's effect is from attempt %d, its checkpoint from attempt %d", name, mine[0].attempt, rec.Attempts)
			}
			if ev, _, ok := one(flow.EventStepCompleted, name); ok && ev.Attempt != rec.Attempts {
				bad("%s records %d attempts, it completed with attempt %d", name, rec.Attempts, ev.Attempt)
			}
		}
		seen := make(map[int]bool)
		for _, l := range lines {
			if l.step != name || l.kind != "start" {
				continue
			}
			st.starts++
			if seen[l.attempt] {
				bad("%s: attempt %d started twice", name, l.attempt)
			}
			seen[l.attempt] = true
			if l.attempt > rec.Attempts {
				st.reruns++
				bad("%s: attempt %d started on %s after attempt %d was checkpointed (RERUN-AFTER-CHECKPOINT)", name, l.attempt, l.worker, rec.Attempts)
			}
		}
	}

	var comps int
	for _, l := range lines {
		if strings.HasPrefix(l.kind, "comp-") {
			comps++
		}
	}
	if !fails {
		if comps > 0 {
			bad("a completed run ran %d compensation attempts", comps)
		}
		return problems
	}
	half := false
	idx := make(map[string]int)
	for _, name := range []string{"s1", "s2"} {
		if rec := recs[name]; rec.Compensation != "completed" {
			half = true
			bad("%s compensation is %q, want completed", name, rec.Compensation)
		}
		if _, i, ok := one(flow.EventCompensationCompleted, name); ok {
			idx[name] = i
		} else {
			half = true
		}
	}
	if !half && idx["s2"] > idx["s1"] {
		bad("s1 was compensated before s2")
	}
	if half {
		st.halfCompensated++
	}
	return problems
}
