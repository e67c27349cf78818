package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// Several worker processes on one file at once (issue 9): each child starts
// its share of the runs and works every run, all at the same time.

const (
	childShared = "shared"                // envChild value of a shared-file worker
	envStarts   = "FLOWLITE_CRASH_STARTS" // "first,step,total": the runs it starts
	// With envPGDSN set, a shared worker works a PostgreSQL schema instead
	// of a file (pgcrash_test.go).
	envPGDSN    = "FLOWLITE_CRASH_PG_DSN"
	envPGSchema = "FLOWLITE_CRASH_PG_SCHEMA"
	envPGApp    = "FLOWLITE_CRASH_PG_APP" // application_name of its sessions
)

// pgTarget is the PostgreSQL schema the workers of a crash test share.
type pgTarget struct {
	dsn, schema, app string
}

// env returns the worker environment that selects the target; none for a
// SQLite file.
func (p *pgTarget) env() []string {
	if p == nil {
		return nil
	}
	return []string{envPGDSN + "=" + p.dsn, envPGSchema + "=" + p.schema, envPGApp + "=" + p.app}
}

// open opens an engine on the target (not started), with the sessions'
// application_name, so that a test can end exactly those sessions.
func (p *pgTarget) open(ctx context.Context, cfg *flow.Config) (*flow.Engine, error) {
	return flowpg.Open(ctx, p.dsn, cfg, func() *flowpg.Options {
		o := pgtest.Options(p.schema)
		o.ApplicationName = p.app
		return o
	}())
}

// openWorkerEngine opens a shared worker's engine on the database its
// environment names: envPGDSN's schema, else envDB's file.
func openWorkerEngine(ctx context.Context, cfg *flow.Config) (*flow.Engine, error) {
	if dsn := os.Getenv(envPGDSN); dsn != "" {
		return (&pgTarget{dsn: dsn, schema: os.Getenv(envPGSchema), app: os.Getenv(envPGApp)}).open(ctx, cfg)
	}
	return flowsqlite.Open(ctx, os.Getenv(envDB), cfg, &flowsqlite.Options{BusyTimeout: 5 * time.Second})
}

// sharedChildMain starts runs first, first+step, … below total (Start is
// idempotent, so a restarted child starts them again harmlessly), then
// works the file until SIGTERM, or in drain mode until nothing is left.
// Any error is printed to stderr, where the parent looks for it.
func sharedChildMain() int {
	c, code := newWorkerEnv("shared child")
	if c == nil {
		return code
	}
	defer c.close()
	inc, lw, log, ctx, fail := c.inc, c.lw, c.log, c.ctx, c.fail
	var first, step, total int
	if _, err := fmt.Sscanf(os.Getenv(envStarts), "%d,%d,%d", &first, &step, &total); err != nil {
		return fail("bad %s: %v", envStarts, err)
	}
	cfg := childConfig(inc, lw, log)
	// Several processes at once on two shared cores, next to other test
	// binaries: another process's checkpoint or commit can hold the write
	// lock for seconds (a 2s wait ran out under go test ./...), so these
	// workers keep the default busy timeout, with leases to match.
	cfg.LeaseTimeout, cfg.HeartbeatInterval = 6*time.Second, 300*time.Millisecond
	cfg.RescueInterval = 300 * time.Millisecond
	e, err := openWorkerEngine(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return 0 // SIGTERM while opening
		}
		return fail("open: %v", err)
	}
	defer e.Close()
	if err := flow.RegisterSafely(e, sagaWorkflow); err != nil {
		return fail("register: %v", err)
	}
	if err := e.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return 0 // SIGTERM while starting
		}
		return fail("start: %v", err)
	}
	fmt.Println("ready")
	for n := first; n < total && ctx.Err() == nil; n += step {
		_, err := flow.Start(ctx, e, sagaWorkflow, sagaIn{N: n, Fail: sagaFails(n)}, &flow.StartOptions{RunID: runID(n)})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "shared child: start run %d: %v\n", n, err)
		}
	}
	drain := os.Getenv(envDrain) == "1"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return stopEngine(e)
		case <-tick.C:
		}
		if !drain {
			continue
		}
		counts, err := e.CountRuns(ctx)
		if err != nil {
			return fail("count runs: %v", err)
		}
		if counts[flow.StatusPending]+counts[flow.StatusRunning]+counts[flow.RunStatus("waiting")]+counts[flow.StatusCompensating] == 0 &&
			counts[flow.StatusCompleted]+counts[flow.StatusFailed] >= int64(total) {
			return stopEngine(e)
		}
	}
}

// spawnShared starts shared-file worker inc, which starts the runs
// first, first+step, … below total.
func (h *harness) spawnShared(inc, first, step, total int, drain bool) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+childShared, envDB+"="+h.db, envLedger+"="+h.ledger,
		envInc+"="+strconv.Itoa(inc), envStarts+"="+fmt.Sprintf("%d,%d,%d", first, step, total),
		envDrain+"="+map[bool]string{true: "1", false: "0"}[drain])
	cmd.Env = append(cmd.Env, h.pg.env()...)
	c := &child{inc: inc, cmd: cmd, ready: make(chan struct{}), done: make(chan error, 1)}
	cmd.Stdout = &readyWriter{ready: c.ready}
	logf, err := os.Create(h.logPath(inc))
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start child %d: %v", inc, err)
	}
	go func() { c.done <- cmd.Wait() }()
	return c
}

// busyWords are what a surfaced SQLITE_BUSY looks like in any error or log.
var busyWords = regexp.MustCompile(`(?i)locked|sqlite_busy|\bbusy\b`)

// checkShared checks every run against the ledger (see checkRun) and
// returns the problems and stats. alive(owner, at) says whether the worker
// named owner was alive at unix millisecond at: a rescue of such a run is
// spurious. With alive nil, rescues are counted, not judged (when the
// database went away, a live worker's lease may lapse).
func checkShared(t *testing.T, h *harness, total, children int, alive func(owner string, at int64) bool) stats {
	t.Helper()
	ctx := t.Context()
	var raw rawDB // the file's integrity is checked on SQLite only
	if h.pg == nil {
		raw = openRaw(t, h.db)
	}
	byRun := h.settledLedger(ctx, raw, children)
	for inc := 1; inc <= children; inc++ {
		b, err := os.ReadFile(h.logPath(inc))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if (h.pg == nil && busyWords.MatchString(line)) || strings.Contains(line, "shared child:") {
				t.Errorf("child %d: %s", inc, strings.TrimSpace(line))
			}
		}
	}
	e, err := h.openEngine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	st := stats{concurrent: true}
	claimed := regexp.MustCompile(`fence (\d+), (\S+)`)
	spurious := 0
	for n := range total {
		id := runID(n)
		info, err := e.Inspect(ctx, id)
		if err != nil {
			t.Errorf("%s: LOST: %v", id, err)
			continue
		}
		hist, err := e.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range checkRun(info, hist, byRun[id], &st) {
			t.Error(p)
		}
		owner := ""
		for _, ev := range hist {
			switch ev.Kind {
			case flow.EventRunClaimed:
				if m := claimed.FindStringSubmatch(ev.Detail); m != nil {
					owner = m[2]
				}
			case flow.EventRunRescued:
				if alive != nil && alive(owner, ev.At.UnixMilli()) {
					spurious++
					t.Errorf("%s: rescued at %s from %s, which was alive (%s)", id, ev.At.Format(time.StampMilli), owner, ev.Detail)
				}
			}
		}
	}
	t.Logf("runs=%d completed=%d rolled back=%d rescues=%d (spurious %d) step attempts=%d for %d steps",
		total, st.completed, st.failed, st.rescued, spurious, st.starts, st.steps)
	return st
}

// TestSharedFileThreeProcesses: three worker processes open one fresh file
// at once, each starts a third of the runs, and all work them. Every run
// must finish exactly as the ledger says, no error or log line may
// mention a lock or SQLITE_BUSY, and no run may be rescued (every owner
// stayed alive).
func TestSharedFileThreeProcesses(t *testing.T) {
	t.Parallel()
	total := 90
	if !testing.Short() && (*longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1") {
		total = 900
	}
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db"), ledger: filepath.Join(dir, "ledger.txt")}
	var kids []*child
	for inc := 1; inc <= 3; inc++ {
		kids = append(kids, h.spawnShared(inc, inc-1, 3, total, true))
	}
	for _, c := range kids {
		select {
		case err := <-c.done:
			if err != nil {
				t.Errorf("child %d: %v", c.inc, err)
			}
		case <-time.After(90 * time.Second):
			for _, k := range kids {
				k.kill()
			}
			h.dumpLogs()
			t.Fatalf("child %d did not drain within 90s", c.inc)
		}
	}
	checkShared(t, h, total, 3, func(string, int64) bool { return true })
}

// TestSharedFileStopsAndKills: three workers share the file while the
// parent stops one of them every few hundred milliseconds, with SIGTERM
// (graceful) or SIGKILL, and starts a replacement; then three last workers
// drain. No run may be lost, no checkpointed step run again, no BUSY
// surface, and no run be rescued while its owner was alive.
func TestSharedFileStopsAndKills(t *testing.T) {
	t.Parallel()
	total, stops := 600, 8
	if !testing.Short() && (*longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1") {
		total, stops = 600, 40
	}
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db"), ledger: filepath.Join(dir, "ledger.txt")}
	stopsAndKills(t, h, total, stops, true)
}

// stopsAndKills runs three shared workers on h's database, which start the
// runs 0 … total-1 between them, and ends one of them stops times, at
// random, every few hundred milliseconds, starting a replacement each
// time: every other stop with SIGKILL once the worker works, the others
// with SIGKILL, or with either SIGKILL or SIGTERM when graceful. Then three
// last workers drain, and checkShared checks every run.
func stopsAndKills(t *testing.T, h *harness, total, stops int, graceful bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	type life struct{ from, to int64 } // unix ms; to == 0 while alive
	lives := map[string]*life{}
	slots := make([]*child, 3)
	inc := 0
	spawn := func(slot int, drain bool) {
		inc++
		lives["child-"+strconv.Itoa(inc)] = &life{from: time.Now().UnixMilli()}
		slots[slot] = h.spawnShared(inc, slot, 3, total, drain)
	}
	// Leave no worker behind when the test fails half way (a PostgreSQL
	// schema is dropped after this, in a cleanup registered before).
	t.Cleanup(func() {
		for _, c := range slots {
			if c != nil {
				c.kill()
			}
		}
	})
	end := func(c *child, sig os.Signal) {
		_ = c.cmd.Process.Signal(sig)
		var err error
		select {
		case err = <-c.done:
			c.done <- err
		case <-time.After(20 * time.Second):
			t.Errorf("child %d still running 20s after %v; killed", c.inc, sig)
			h.dumpLogs()
			c.kill()
		}
		lives["child-"+strconv.Itoa(c.inc)].to = time.Now().UnixMilli()
		// "signal: terminated": the signal came before the child set up
		// its handler, which ends it like a kill.
		if sig == syscall.SIGTERM && err != nil && err.Error() != "signal: terminated" {
			t.Errorf("child %d after SIGTERM: %v", c.inc, err)
		}
	}
	for slot := range 3 {
		spawn(slot, false)
	}
	sigterms, sigkills := 0, 0
	for i := range stops {
		slot := rng.IntN(3)
		// Every other stop is a SIGKILL of a worker that works, so that
		// kills hit runs in flight and the rescue is proved whatever the
		// draw (with the signal drawn for every stop, a run could draw a
		// single SIGKILL, land it between two runs, and prove nothing).
		// The other stops draw their signal, and one in five of them
		// does not wait for the worker to be ready: it may hit it while
		// it opens, migrates or rescues.
		proof := i%2 == 0
		if c := slots[slot]; proof || rng.IntN(5) != 0 {
			// On a loaded machine, opening the database can take as
			// long as the pause below, and stops that all land before a
			// worker claimed anything prove nothing.
			select {
			case <-c.ready:
			case err := <-c.done:
				c.done <- err
			case <-time.After(30 * time.Second):
				t.Errorf("child %d not ready after 30s", c.inc)
			}
		}
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		sig := os.Signal(syscall.SIGKILL)
		if graceful && !proof && rng.IntN(2) == 0 {
			sig = syscall.SIGTERM
			sigterms++
		} else {
			sigkills++
		}
		end(slots[slot], sig)
		spawn(slot, false)
	}
	// Replace the workers by drainers, gracefully.
	for slot := range 3 {
		end(slots[slot], syscall.SIGTERM)
		spawn(slot, true)
	}
	for _, c := range slots {
		select {
		case err := <-c.done:
			c.done <- err
			lives["child-"+strconv.Itoa(c.inc)].to = time.Now().UnixMilli()
			if err != nil {
				t.Errorf("draining child %d: %v", c.inc, err)
			}
		case <-time.After(90 * time.Second):
			for _, k := range slots {
				k.kill()
			}
			h.dumpLogs()
			t.Fatalf("child %d did not drain within 90s", c.inc)
		}
	}
	t.Logf("SIGTERM %d, SIGKILL %d, %d worker processes", sigterms, sigkills, inc)
	st := checkShared(t, h, total, inc, func(owner string, at int64) bool {
		l := lives[owner]
		return l != nil && at >= l.from && (l.to == 0 || at < l.to)
	})
	if sigkills > 0 && st.rescued == 0 {
		t.Errorf("no run was rescued: the kills never hit a run in flight, so the test proved nothing")
	}
}
