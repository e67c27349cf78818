package crashtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// The disruptive PostgreSQL scenarios: the server restarted, and every
// session of the engines terminated, while three worker processes work
// runs the parent keeps starting. The workers are not restarted: their
// engines must reconnect on their own and go on finishing runs. They
// disturb every other user of the server, so they run only when
// FLOWLITE_PG_FAULTS=1 asks for them (CI runs them in a step of their own,
// after the other PostgreSQL suites), never in a plain go test ./...; then
// a missing server, pg_ctlcluster or pg_isready fails them.
//
// The cluster restarted is FLOWLITE_PG_CLUSTER ("15 main" by default), as
// pg_ctlcluster names it; it must be the server FLOWLITE_PG_DSN names. The
// tests run pg_ctlcluster directly as root, else through sudo. The server
// is left running when they end, also when they fail.

const (
	envFaults  = "FLOWLITE_PG_FAULTS"
	envCluster = "FLOWLITE_PG_CLUSTER"
)

// faultHarness is pgHarness for a fault test: it skips unless envFaults
// is set, fails when the server's tools are missing, and makes sure the
// server runs again when the test ends.
func faultHarness(t *testing.T) *harness {
	t.Helper()
	if os.Getenv(envFaults) != "1" {
		t.Skipf("restarts PostgreSQL and ends sessions: runs with %s=1", envFaults)
	}
	for _, tool := range []string{"pg_ctlcluster", "pg_isready"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s=1 but %v", envFaults, err)
		}
	}
	h := pgHarness(t)
	// Registered after the schema's drop, so it runs before it.
	t.Cleanup(func() {
		if err := serverReady(h.pg.dsn, 2*time.Second); err == nil {
			return
		}
		out, err := pgCtl("start")
		if err != nil {
			t.Errorf("start the server again: %v: %s", err, out)
		}
		if err := serverReady(h.pg.dsn, 60*time.Second); err != nil {
			t.Errorf("server not back after the test: %v", err)
		}
	})
	return h
}

// pgCtl runs pg_ctlcluster on the test's cluster. The server it starts
// would inherit every descriptor of this process that is not
// close-on-exec, and hold it as long as it runs: a lock whoever runs the
// test took with flock(1), a pipe a CI log reads to its end. So those
// are marked close-on-exec first (Go opens its own so already).
func pgCtl(action string, args ...string) ([]byte, error) {
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, f := range fds {
			if fd, err := strconv.Atoi(f.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	}
	cluster := strings.Fields(os.Getenv(envCluster))
	if len(cluster) != 2 {
		cluster = []string{"15", "main"}
	}
	argv := append([]string{"pg_ctlcluster", "--skip-systemctl-redirect", cluster[0], cluster[1], action}, args...)
	if os.Geteuid() != 0 {
		argv = append([]string{"sudo", "-n"}, argv...)
	}
	return exec.Command(argv[0], argv[1:]...).CombinedOutput()
}

// serverReady waits until pg_isready says the server accepts connections.
func serverReady(dsn string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		out, err := exec.Command("pg_isready", "-d", dsn, "-t", "2").CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pg_isready: %v: %s", err, strings.TrimSpace(string(out)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// admin runs f on a pool of its own, opened for the call, whose sessions
// are not the engines' (no application_name of theirs), retrying while
// the server is coming back.
func (p *pgTarget) admin(ctx context.Context, f func(db *sql.DB) error) error {
	var err error
	for range 50 {
		db, oerr := sql.Open(flowpg.DriverName, p.dsn)
		if oerr != nil {
			return oerr
		}
		err = f(db)
		db.Close()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// terminate ends every session of the engines and returns how many.
func (p *pgTarget) terminate(ctx context.Context) (int, error) {
	var n int
	err := p.admin(ctx, func(db *sql.DB) error {
		return db.QueryRowContext(ctx, `
			SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()`, p.app).Scan(&n)
	})
	return n, err
}

// listeners counts the engines' sessions that listen for wakes.
func (p *pgTarget) listeners(ctx context.Context) (int, error) {
	var n int
	err := p.admin(ctx, func(db *sql.DB) error {
		return db.QueryRowContext(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN %'`, p.app).Scan(&n)
	})
	return n, err
}

// TestPGFaultServerRestart restarts the PostgreSQL server under load,
// alternately with a fast shutdown and an immediate one (which crashes
// the server: it recovers from its WAL on start).
func TestPGFaultServerRestart(t *testing.T) {
	h := faultHarness(t)
	modes := []string{"fast", "immediate", "fast"}
	i := 0
	faultScenario(t, h, len(modes), func(ctx context.Context) (string, error) {
		mode := modes[i]
		i++
		out, err := pgCtl("restart", "-m", mode)
		if err != nil {
			return "", fmt.Errorf("restart (%s): %v: %s", mode, err, out)
		}
		if err := serverReady(h.pg.dsn, 60*time.Second); err != nil {
			return "", err
		}
		return "restart -m " + mode, nil
	})
}

// TestPGFaultTerminateSessions ends every session of the engines (pool,
// wake listener, and the parent's) with pg_terminate_backend, again and
// again, under load.
func TestPGFaultTerminateSessions(t *testing.T) {
	h := faultHarness(t)
	faultScenario(t, h, 6, func(ctx context.Context) (string, error) {
		n, err := h.pg.terminate(ctx)
		if err != nil {
			return "", err
		}
		if n == 0 {
			return "", fmt.Errorf("no session has application_name %s: the engines do not set it", h.pg.app)
		}
		return fmt.Sprintf("terminated %d sessions", n), nil
	})
}

// faultScenario starts three workers on h's schema and starts runs from
// the parent at a steady pace while it injects fault (which returns once
// the server accepts connections again) faults times, a few seconds apart.
// After each fault it measures how long the engines take to finish a run
// again and to listen for wakes again. Then it starts a last batch of
// runs, waits until every run settled, stops the workers with SIGTERM
// (they must exit cleanly) and checks every run against the ledger.
func faultScenario(t *testing.T, h *harness, faults int, fault func(ctx context.Context) (string, error)) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	parent, err := h.openEngine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	flow.Register(parent, sagaWorkflow)

	kids := make([]*child, 3)
	t.Cleanup(func() {
		for _, c := range kids {
			if c != nil {
				c.kill()
			}
		}
	})
	for i := range kids {
		kids[i] = h.spawnShared(i+1, 0, 1, 0, false) // starts no runs
	}
	for _, c := range kids {
		select {
		case <-c.ready:
		case err := <-c.done:
			h.dumpLogs()
			t.Fatalf("worker %d exited before it was ready: %v", c.inc, err)
		case <-time.After(30 * time.Second):
			h.dumpLogs()
			t.Fatalf("worker %d not ready after 30s", c.inc)
		}
	}

	// The starter: one run every 20ms, each Start retried until it
	// returns nil (Start is idempotent by run ID, so a retry after a
	// commit whose answer was lost finds the run recorded).
	total, startErrors := 0, 0
	start := func(n int) *flow.Run[sagaOut] {
		for {
			r, err := flow.Start(ctx, parent, sagaWorkflow, sagaIn{N: n, Fail: sagaFails(n)}, &flow.StartOptions{RunID: runID(n)})
			if err == nil || ctx.Err() != nil {
				return r
			}
			startErrors++
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Waiters: every tenth run is awaited with Result from the parent, in
	// the background, across the faults. Each must get the run's outcome,
	// never an error of the database being away.
	var waiters sync.WaitGroup
	waitErrs := make(chan error, 10_000)
	await := func(n int, r *flow.Run[sagaOut]) {
		waiters.Go(func() {
			out, err := r.Result(ctx)
			var rb *flow.RolledBackError
			switch {
			case sagaFails(n) && errors.As(err, &rb):
			case sagaFails(n):
				waitErrs <- fmt.Errorf("Result of %s = %+v, %v; want it rolled back", r.ID(), out, err)
			case err != nil || out != (sagaOut{wantS1(n), wantS2(n), wantS3(n)}):
				waitErrs <- fmt.Errorf("Result of %s = %+v, %v; want its output", r.ID(), out, err)
			}
		})
	}
	stopStarts := make(chan struct{})
	startsDone := make(chan struct{})
	go func() {
		defer close(startsDone)
		for {
			select {
			case <-stopStarts:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if r := start(total); r != nil && total%10 == 0 {
				await(total, r)
			}
			total++
		}
	}()
	settled := func() (int64, error) {
		counts, err := parent.CountRuns(ctx)
		return counts[flow.StatusCompleted] + counts[flow.StatusFailed], err
	}

	var progress, relisten []time.Duration
	for f := range faults {
		time.Sleep(time.Duration(2000+rng.IntN(2000)) * time.Millisecond)
		what, err := fault(ctx)
		if err != nil {
			t.Fatalf("fault %d: %v", f+1, err)
		}
		back := time.Now()
		// Progress: a run settles after the fault. The first count that
		// succeeds after it is the baseline.
		var before int64 = -1
		for before < 0 {
			if n, err := settled(); err == nil {
				before = n
			} else if time.Since(back) > 30*time.Second {
				t.Fatalf("after fault %d (%s): the parent cannot count runs: %v", f+1, what, err)
			}
		}
		for {
			n, err := settled()
			if err == nil && n > before {
				progress = append(progress, time.Since(back))
				break
			}
			if time.Since(back) > 30*time.Second {
				h.dumpLogs()
				t.Fatalf("after fault %d (%s): no run settled within 30s (count %d, %v): the engines did not reconnect", f+1, what, n, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for {
			n, err := h.pg.listeners(ctx)
			if err == nil && n == len(kids) {
				relisten = append(relisten, time.Since(back))
				break
			}
			if time.Since(back) > 30*time.Second {
				h.dumpLogs()
				t.Fatalf("after fault %d (%s): %d of %d wake listeners back after 30s (%v)", f+1, what, n, len(kids), err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("fault %d: %s; a run settled %s later, every listener back %s later",
			f+1, what, progress[f].Round(time.Millisecond), relisten[f].Round(time.Millisecond))
	}
	// A last batch after the last fault: the workers go on finishing runs.
	time.Sleep(time.Second)
	close(stopStarts)
	<-startsDone

	deadline := time.Now().Add(90 * time.Second)
	for {
		n, err := settled()
		if err == nil && n == int64(total) {
			break
		}
		if time.Now().After(deadline) {
			counts, _ := parent.CountRuns(ctx)
			h.dumpLogs()
			t.Fatalf("runs not settled 90s after the last fault: %v of %d", counts, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waiters.Wait()
	close(waitErrs)
	for err := range waitErrs {
		t.Error(err)
	}
	for _, c := range kids {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range kids {
		select {
		case err := <-c.done:
			c.done <- err
			if err != nil {
				t.Errorf("worker %d after SIGTERM: %v", c.inc, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("worker %d still running 20s after SIGTERM", c.inc)
		}
	}
	// What the engines logged, by level and message: the faults' traces.
	logged := map[string]int{}
	msg := regexp.MustCompile(`level=(WARN|ERROR) msg=("[^"]*"|\S+)`)
	for _, c := range kids {
		b, err := os.ReadFile(h.logPath(c.inc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msg.FindAllStringSubmatch(string(b), -1) {
			logged[m[1]+" "+m[2]]++
		}
	}
	t.Logf("%d faults, 3 worker processes (never restarted), %d runs started (%d Start calls failed and were retried), %d awaited with Result; engine logs: %v",
		faults, total, startErrors, (total+9)/10, logged)
	t.Logf("run settled after each fault: %v; wake listeners back: %v", progress, relisten)
	checkShared(t, h, total, len(kids), nil)
}
