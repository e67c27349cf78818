package crashtest

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// Flow control under kills (issue 21): worker processes on one database
// work a queue with a global and a per-key concurrency limit, one with a
// global concurrency limit alone and one with a rate limit, while the
// parent SIGKILLs one of them at random and starts a replacement. The job
// bodies write a ledger; from it, the parent checks that the limits held
// at every instant, and, at the end, that every run completed and no slot
// is held (see checkLimitLedger for the oracles).

const (
	childLimits = "limits"               // envChild value of a flow-control worker
	envTotal    = "FLOWLITE_CRASH_TOTAL" // runs the worker waits for in drain mode
	limQueue    = "limq"                 // the queue with the concurrency limits
	rateQueue   = "rateq"                // the queue with the rate limit
	globQueue   = "globq"                // the queue with a global concurrency limit alone
	limKeys     = 5                      // concurrency keys of limQueue's runs
	// The workers' LeaseTimeout and SQLite busy timeout: a lease must
	// outlast a heartbeat's interval plus its wait for the lock, and the
	// drain waits up to a lease for the last kill's runs.
	limLease = 4 * time.Second
	limBusy  = 3 * time.Second
)

// The limits under test. Each worker allows more than them on its own
// (limitsConfig), so only the database-wide limits keep the ledger within.
var (
	limLimits  = flow.QueueLimits{Concurrency: 3, KeyConcurrency: 1}
	rateLimits = flow.QueueLimits{Rate: flow.RateLimit{Limit: 20, Period: 500 * time.Millisecond}}
	// A global limit alone: on PostgreSQL such a queue is claimed in one
	// statement (RunClaimAndBeginLimited), not in the limits' transaction.
	globLimits = flow.QueueLimits{Concurrency: 2}
)

type limArgs struct {
	Run string `json:"run"`
	Key string `json:"key"`
}

// limJob and rateJob are the jobs of the two queues; their bodies write
// the ledger (limitsLedger.body).
func limJob(l *limitsLedger) flow.Job[limArgs] {
	return flow.Job[limArgs]{Name: "lim_key", Queue: limQueue, Handler: l.body()}
}

func rateJob(l *limitsLedger) flow.Job[limArgs] {
	return flow.Job[limArgs]{Name: "lim_rate", Queue: rateQueue, Handler: l.body()}
}

// globJob keeps a lean record (flow.LeanRecord), so that its claims and
// completions, derived on read, go through the kills too (wholeHistory).
func globJob(l *limitsLedger) flow.Job[limArgs] {
	return flow.Job[limArgs]{Name: "lim_glob", Queue: globQueue, Handler: l.body(), Record: flow.LeanRecord}
}

// wholeHistory checks the history of a completed lean run as read back:
// started, claimed (its first claim derived), its step completed once, just
// before the run, and nothing out of time order.
func wholeHistory(t *testing.T, id string, hist []flow.Event) {
	t.Helper()
	var kinds []string
	completions := 0
	for i, ev := range hist {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == flow.EventStepCompleted {
			completions++
		}
		if i > 0 && ev.At.Before(hist[i-1].At) {
			t.Errorf("%s: event %d (%s) before the one before it: %v", id, i, ev.Kind, kinds)
		}
	}
	n := len(kinds)
	if n < 5 || kinds[0] != flow.EventRunStarted || kinds[1] != flow.EventRunClaimed || kinds[2] != flow.EventStepStarted ||
		completions != 1 || kinds[n-2] != flow.EventStepCompleted || kinds[n-1] != flow.EventRunCompleted {
		t.Errorf("%s: lean history %v, want it whole", id, kinds)
	}
}

// limitsLedger appends one fsynced line per start and end of a job body to
// a file the engine does not own, with one write per line (O_APPEND):
//
//	<kind> <run> <key> <unix-nanos> <incarnation>
//
// kind is start (the body begins, so the run holds its slot: it was
// claimed) or done (the body returned, whatever it returned; the engine
// gives the lease back only after that). key is "-" for none. A nil
// ledger (the parent's) writes nothing.
type limitsLedger struct {
	lw *ledgerWriter
}

func (l *limitsLedger) line(kind string, a limArgs) error {
	key := a.Key
	if key == "" {
		key = "-"
	}
	l.lw.mu.Lock()
	defer l.lw.mu.Unlock()
	s := fmt.Sprintf("%s %s %s %d %d\n", kind, a.Run, key, time.Now().UnixNano(), l.lw.inc)
	if _, err := l.lw.f.WriteString(s); err != nil {
		return err
	}
	return l.lw.f.Sync()
}

func (l *limitsLedger) body() func(context.Context, limArgs) error {
	return func(ctx context.Context, a limArgs) error {
		if l == nil {
			return nil
		}
		if err := l.line("start", a); err != nil {
			// Not recorded means not run: the oracle must see every body.
			return fmt.Errorf("ledger: %w", err)
		}
		err := limWork(ctx)
		if lerr := l.line("done", a); lerr != nil && err == nil {
			return fmt.Errorf("ledger: %w", lerr)
		}
		return err
	}
}

// limWork sleeps 15-50ms, like a call to a rate-limited API: long enough
// that a kill every few hundred milliseconds often lands in a body.
func limWork(ctx context.Context) error {
	t := time.NewTimer(time.Duration(15+rand.IntN(36)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// limitsConfig is a worker's configuration: each engine alone would run 4
// runs of limQueue and of globQueue and 8 of rateQueue at once, more than
// the limits allow in all, with short leases so that a killed worker's
// slots come back soon.
func limitsConfig(inc int, log *slog.Logger) *flow.Config {
	return &flow.Config{
		Queues:            map[string]flow.QueueConfig{limQueue: {Concurrency: 4}, rateQueue: {Concurrency: 8}, globQueue: {Concurrency: 4}},
		LeaseTimeout:      limLease,
		HeartbeatInterval: 250 * time.Millisecond,
		RescueInterval:    200 * time.Millisecond,
		PollInterval:      20 * time.Millisecond,
		DefaultRetry:      *fastRetry,
		Logger:            log,
		WorkerID:          "child-" + strconv.Itoa(inc),
	}
}

// limitsChildMain is a flow-control worker: it works both queues of the
// shared database (envDB's file or envPGDSN's schema) until it is killed,
// or, in drain mode, until envTotal runs completed and none is left.
func limitsChildMain() int {
	c, code := newWorkerEnv("limits child")
	if c == nil {
		return code
	}
	defer c.close()
	ctx, fail := c.ctx, c.fail
	total, aerr := strconv.Atoi(os.Getenv(envTotal))
	if aerr != nil {
		return fail("bad %s: %v", envTotal, aerr)
	}
	cfg := limitsConfig(c.inc, c.log)
	var e *flow.Engine
	var err error
	if dsn := os.Getenv(envPGDSN); dsn != "" {
		e, err = (&pgTarget{dsn: dsn, schema: os.Getenv(envPGSchema), app: os.Getenv(envPGApp)}).open(ctx, cfg)
	} else {
		e, err = flowsqlite.Open(ctx, os.Getenv(envDB), cfg, &flowsqlite.Options{BusyTimeout: limBusy})
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		return fail("open: %v", err)
	}
	defer e.Close()
	l := &limitsLedger{lw: c.lw}
	if err := flow.RegisterJobSafely(e, limJob(l)); err != nil {
		return fail("register: %v", err)
	}
	if err := flow.RegisterJobSafely(e, rateJob(l)); err != nil {
		return fail("register: %v", err)
	}
	if err := flow.RegisterJobSafely(e, globJob(l)); err != nil {
		return fail("register: %v", err)
	}
	return workChildUntil(ctx, e, fail, int64(total))
}

// spawnLimits starts flow-control worker inc.
func (h *harness) spawnLimits(inc, total int, drain bool) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+childLimits, envDB+"="+h.db, envLedger+"="+h.ledger,
		envInc+"="+strconv.Itoa(inc), envTotal+"="+strconv.Itoa(total),
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

// TestLimitsWorkersKilled: three worker processes share a SQLite file and
// work a queue limited to 3 runs at once and 1 per key (5 keys), a queue
// limited to 2 at once (no key) and a queue limited to 20 starts per 500ms,
// while the parent SIGKILLs one of them at random every few hundred
// milliseconds and starts a replacement; the last workers drain. Every run must complete, the ledger must show
// the limits held at every instant (checkLimitLedger), and QueueLimits
// must show no slot held at the end: a dead worker's slots came back.
//
// Bounded to 120 + 60 + 80 runs and 6 kills (6-10 s); -args -long (or
// FLOWLITE_CRASH_LONG=1) runs 600 + 300 + 400 runs and 40 kills (about 30 s).
func TestLimitsWorkersKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db"), ledger: filepath.Join(dir, "ledger.txt")}
	limitsCrash(t, h)
}

// TestPGLimitsWorkersKilled is TestLimitsWorkersKilled on a PostgreSQL
// schema (FLOWLITE_PG_TEST=1), where a limited queue's claimers take turns
// on the queue's limits row. Not parallel, like TestPGWorkersKilled.
func TestPGLimitsWorkersKilled(t *testing.T) {
	limitsCrash(t, pgHarness(t))
}

func limitsCrash(t *testing.T, h *harness) {
	limRuns, rateRuns, globRuns, kills := 120, 80, 60, 6
	if !testing.Short() && (*longFlag || os.Getenv("FLOWLITE_CRASH_LONG") == "1") {
		limRuns, rateRuns, globRuns, kills = 600, 400, 300, 40
	}
	total := limRuns + rateRuns + globRuns
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FLOWLITE_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("FLOWLITE_CRASH_SEED: %v", err)
		}
	}
	t.Logf("runs=%d+%d+%d kills=%d seed=%d", limRuns, rateRuns, globRuns, kills, seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	ctx := t.Context()
	began := time.Now()

	// The parent's engine is never started: it sets the limits, enqueues
	// the runs and reads them back.
	cfg := limitsConfig(0, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	var parent *flow.Engine
	var err error
	if h.pg != nil {
		parent, err = h.pg.open(ctx, cfg)
	} else {
		parent, err = flowsqlite.Open(ctx, h.db, cfg, &flowsqlite.Options{BusyTimeout: limBusy})
	}
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	var none *limitsLedger
	flow.RegisterJob(parent, limJob(none))
	flow.RegisterJob(parent, rateJob(none))
	flow.RegisterJob(parent, globJob(none))
	for q, l := range map[string]flow.QueueLimits{limQueue: limLimits, rateQueue: rateLimits, globQueue: globLimits} {
		if err := parent.SetQueueLimits(ctx, q, l); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := range max(limRuns, rateRuns, globRuns) {
		if i < limRuns {
			a := limArgs{Run: fmt.Sprintf("lk-%04d", i), Key: fmt.Sprintf("k%d", i%limKeys)}
			if _, err := flow.Enqueue(ctx, parent, limJob(none), a, &flow.EnqueueOptions{RunID: a.Run, ConcurrencyKey: a.Key}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, a.Run)
		}
		if i < globRuns {
			a := limArgs{Run: fmt.Sprintf("lg-%04d", i)}
			if _, err := flow.Enqueue(ctx, parent, globJob(none), a, &flow.EnqueueOptions{RunID: a.Run}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, a.Run)
		}
		if i < rateRuns {
			a := limArgs{Run: fmt.Sprintf("lr-%04d", i)}
			if _, err := flow.Enqueue(ctx, parent, rateJob(none), a, &flow.EnqueueOptions{RunID: a.Run}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, a.Run)
		}
	}

	killedAt := map[int]int64{} // incarnation: unix ns just before its SIGKILL
	slots := make([]*child, 3)
	inc := 0
	spawn := func(slot int) {
		inc++
		slots[slot] = h.spawnLimits(inc, total, true)
	}
	t.Cleanup(func() {
		for _, c := range slots {
			if c != nil {
				c.kill()
			}
		}
	})
	for slot := range slots {
		spawn(slot)
	}
	inFlight := 0 // kills of a worker the ledger showed in a body
	for range kills {
		time.Sleep(time.Duration(100+rng.IntN(250)) * time.Millisecond)
		// Kill a worker that is in a body now, when one is, within a
		// second: on a loaded machine (or under -race) workers start
		// slowly, and kills that all land between bodies would prove
		// nothing.
		slot := rng.IntN(len(slots))
		for try := 0; try < 100; try++ {
			busy := busyWorkers(t, h.ledger)
			var cand []int
			for i, c := range slots {
				if busy[c.inc] {
					cand = append(cand, i)
				}
			}
			if len(cand) > 0 {
				slot = cand[rng.IntN(len(cand))]
				inFlight++
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		c := slots[slot]
		killedAt[c.inc] = time.Now().UnixNano()
		c.kill()
		spawn(slot)
	}
	killPhase := time.Since(began)
	for _, c := range slots {
		select {
		case err := <-c.done:
			c.done <- err
			if err != nil {
				t.Errorf("draining child %d: %v", c.inc, err)
			}
		case <-time.After(90 * time.Second):
			for _, k := range slots {
				k.kill()
			}
			h.dumpLogs()
			counts, _ := parent.CountRuns(ctx)
			t.Fatalf("child %d did not drain within 90s: %v", c.inc, counts)
		}
	}
	t.Logf("%d worker processes, %d kills (%d of a worker in a body) in %s, all drained after %s",
		inc, kills, inFlight, killPhase.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	h.scanChildLogs(inc)
	for i := 1; i <= inc; i++ {
		b, err := os.ReadFile(h.logPath(i))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "limits child:") {
				t.Errorf("child %d: %s", i, strings.TrimSpace(line))
			}
		}
	}

	// Every run completed, nothing lost or stuck; the claims of the rate
	// queue, as the engine recorded them, for the rate oracle.
	claims := map[string][]int64{}  // run: unix ms of its run_claimed events
	rescues := map[string][]int64{} // run: unix ms of its run_rescued events
	for _, id := range ids {
		info, err := parent.Inspect(ctx, id)
		if err != nil {
			t.Errorf("%s: LOST: %v", id, err)
			continue
		}
		if info.Status != flow.StatusCompleted {
			t.Errorf("%s: left %s (reason %q, error %q)", id, info.Status, info.Reason, info.Error)
		}
		hist, err := parent.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(id, "lg-") && info.Status == flow.StatusCompleted {
			wholeHistory(t, id, hist)
		}
		for _, ev := range hist {
			switch ev.Kind {
			case flow.EventRunClaimed:
				claims[id] = append(claims[id], ev.At.UnixMilli())
			case flow.EventRunRescued:
				rescues[id] = append(rescues[id], ev.At.UnixMilli())
			}
		}
	}
	if all, err := parent.ListRuns(ctx, flow.RunFilter{Limit: 10 * total}); err != nil || len(all) != total {
		t.Errorf("database holds %d runs (%v), %d enqueued", len(all), err, total)
	}

	// No slot is held once every worker is gone: the dead ones' came back.
	uses, err := parent.QueueLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uses {
		if u.Running != 0 || len(u.RunningByKey) != 0 {
			t.Errorf("queue %s: %d runs hold a slot after every worker stopped (by key %v)", u.Queue, u.Running, u.RunningByKey)
		}
	}
	if len(uses) != 3 {
		t.Errorf("QueueLimits lists %d queues, want %s, %s and %s: %+v", len(uses), limQueue, rateQueue, globQueue, uses)
	}

	lines, err := readLimitsLedger(h.ledger)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkLimitLedger(t, lines, killedAt, claims, rescues) {
		t.Error(p)
	}
}

// busyWorkers returns the incarnations that, as the ledger says now, are
// in a body: they wrote a start line for a run and no done line after it.
func busyWorkers(t *testing.T, path string) map[int]bool {
	t.Helper()
	lines, err := readLimitsLedger(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	type at struct {
		run string
		inc int
	}
	open := map[at]bool{}
	for _, l := range lines {
		open[at{l.run, l.inc}] = l.kind == "start"
	}
	busy := map[int]bool{}
	for k, o := range open {
		if o {
			busy[k.inc] = true
		}
	}
	return busy
}

// limLine is one parsed line of the flow-control ledger.
type limLine struct {
	kind, run, key string
	at             int64 // unix ns
	inc            int
}

func readLimitsLedger(path string) ([]limLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []limLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l limLine
		if _, err := fmt.Sscanf(sc.Text(), "%s %s %s %d %d", &l.kind, &l.run, &l.key, &l.at, &l.inc); err != nil {
			return nil, fmt.Errorf("malformed ledger line %q: %w", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// checkLimitLedger returns what the ledger shows wrong. The oracles, and
// why each is sound (it never blames a correct engine):
//
//   - Slots. A run holds its slot (its lease) from its claim until the
//     engine gives the lease back, after the body returned, or until the
//     rescuer takes back the lease of a killed worker. So each execution
//     of a body occupies its slot over an interval that contains [start,
//     end], where end is its done line, or, for a body that has none, the
//     moment just before the parent sent SIGKILL to its worker: the worker
//     was alive and heartbeating until then, so its lease, and the slot,
//     were held at least that long (really until the rescue, a lease timeout
//     later). Ending a killed body's interval at the rescued run's next
//     start, or at the kill plus the lease timeout, would be an upper bound
//     of the holding instead, and could blame a correct engine for the time
//     between the rescue and the restart, when the slot is free and another
//     run may take it. Since intervals are within the true holdings, more
//     than 3 runs of limQueue (or 2 of one key, or 3 of globQueue) overlapping in the ledger
//     means more held a slot at once: a limit was exceeded.
//   - A killed body's run must be rescued (the only way a claim takes a
//     leased run back) within a lease, a rescue interval and 5s of slack of
//     the kill: a dead worker holds a slot no longer than its lease.
//   - The lower bound above needs the lease to have been held until the
//     kill: a body without a done line in a worker that was never killed,
//     or a run started again while an earlier execution of it was still
//     live (before its done line, or before its worker was killed), is an
//     error of its own (a live worker lost its lease, or a run executed
//     twice at once).
//   - Rate. The rate counts claims, at the engine's clock when the claim
//     transaction runs (a run_claimed event records the same time), and
//     every body start follows a claim of its own. A body starts some
//     milliseconds after its claim: the claim commits, the run is handed
//     to a goroutine, the step's attempt is recorded; on a loaded machine
//     more, and on PostgreSQL the claim's clock is read before it waits for
//     the queue's limits row. If every start lags its claim by at most D,
//     the starts within a window of W hold claims within W + D, so when W
//   - D <= Period at most Limit starts fall in any window W. So the
//     ledger is measured in windows of Period - D, with D the largest lag
//     measured from the run_claimed events (the latest claim before each
//     start; at least 50ms), and, exactly, the claims the history records
//     in windows of Period (the engine's own milliseconds, where a claim
//     at now counts the starts after now - Period). A fixed shortening
//     (two thirds of the period, as in flow's TestRateLimit) would be
//     unsound on a machine slow enough to lag more; a lag of more than
//     three quarters of the period leaves the ledger's windows unchecked.
func checkLimitLedger(t *testing.T, lines []limLine, killedAt map[int]int64, claims, rescues map[string][]int64) []string {
	t.Helper()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	type execution struct {
		run, key   string
		start, end int64
		inc        int
		killed     bool
	}
	byRun := map[string][]limLine{}
	for _, l := range lines {
		byRun[l.run] = append(byRun[l.run], l)
	}
	var execs []execution
	killedBodies := 0
	maxHold := time.Duration(0) // the longest a dead worker held a slot
	for run, ls := range byRun {
		slices.SortStableFunc(ls, func(a, b limLine) int { return cmp.Compare(a.at, b.at) })
		var runExecs []execution
		for i, s := range ls {
			if s.kind != "start" {
				continue
			}
			ex := execution{run: run, key: s.key, start: s.at, inc: s.inc, end: -1}
			for _, d := range ls[i+1:] {
				if d.inc == s.inc && d.kind == "start" {
					break // the same worker ran it again: this one ended unrecorded
				}
				if d.inc == s.inc && d.kind == "done" {
					ex.end = d.at
					break
				}
			}
			if ex.end < 0 {
				k, ok := killedAt[s.inc]
				if !ok {
					bad("%s: started at %d in child %d, which was never killed, and never ended", run, s.at, s.inc)
					continue
				}
				ex.end, ex.killed = max(k, s.at), true
				killedBodies++
				// The rescuer must take the dead worker's lease back, and
				// so free its slot, within a lease and a rescue interval
				// (plus slack for a loaded machine) of the kill.
				rescued := int64(-1)
				for _, r := range rescues[run] {
					if r >= s.at/1e6 && (rescued < 0 || r < rescued) {
						rescued = r
					}
				}
				if hold := time.Duration(rescued-k/1e6) * time.Millisecond; rescued < 0 {
					bad("%s: its body was killed in child %d, and the run was never rescued", run, s.inc)
				} else if hold < 0 {
					bad("%s: rescued at %d from child %d, which was alive until %d", run, rescued, s.inc, k/1e6)
				} else if maxHold = max(maxHold, hold); hold > limLease+time.Second+5*time.Second {
					bad("%s: the slot of child %d, killed at %d, was held %s, past its lease of %s", run, s.inc, k, hold, limLease)
				}
			}
			runExecs = append(runExecs, ex)
		}
		for i := 1; i < len(runExecs); i++ {
			if p := runExecs[i-1]; runExecs[i].start < p.end {
				bad("%s: started in child %d at %d while its execution in child %d (from %d to %d, killed %v) was live",
					run, runExecs[i].inc, runExecs[i].start, p.inc, p.start, p.end, p.killed)
			}
		}
		execs = append(execs, runExecs...)
	}

	// The sweeps over the concurrency-limited queues' executions, and the
	// rate queue's starts and their lag behind their claims.
	edges := map[string][]edge{} // by queue
	var rateStarts []int64
	rateLag := int64(0) // ns, the largest lag of a body start behind its claim
	for _, ex := range execs {
		if q := queueOfRun(ex.run); q != rateQueue {
			edges[q] = append(edges[q], edge{ex.start, +1, ex.key}, edge{ex.end, -1, ex.key})
			continue
		}
		rateStarts = append(rateStarts, ex.start)
		var claim int64 = -1
		for _, c := range claims[ex.run] {
			if c*1e6 <= ex.start {
				claim = max(claim, c*1e6)
			}
		}
		if claim < 0 {
			bad("%s: body started at %d before any claim the history records (%v)", ex.run, ex.start, claims[ex.run])
			continue
		}
		rateLag = max(rateLag, ex.start-claim)
	}
	t.Logf("%d bodies killed mid-way", killedBodies)
	problems = append(problems, sweepLimits(t, limQueue, edges[limQueue], limLimits)...)
	problems = append(problems, sweepLimits(t, globQueue, edges[globQueue], globLimits)...)
	t.Logf("the slots of killed bodies were held at most %s after the kill (lease %s)", maxHold, limLease)
	if killedBodies == 0 {
		bad("no kill hit a body in flight: no slot was held by a dead worker, the test proved nothing")
	}

	// The rate, from the ledger, in windows shortened by the lag measured.
	rl := rateLimits.Rate
	lag := max(rateLag, 50*int64(time.Millisecond))
	window := rl.Period.Nanoseconds() - lag
	slices.Sort(rateStarts)
	if window < rl.Period.Nanoseconds()/4 {
		// So slow a machine that the ledger's windows would be too short
		// to mean much; the claims' check below still holds exactly.
		t.Logf("%s: a body started %s after its claim: the ledger's windows are not checked", rateQueue, time.Duration(rateLag))
	} else {
		most, mostAt := maxInWindow(rateStarts, window)
		t.Logf("%s: %d body starts, at most %d within %s (limit %d per %s; largest lag behind the claim %s)",
			rateQueue, len(rateStarts), most, time.Duration(window), rl.Limit, rl.Period, time.Duration(rateLag).Round(time.Microsecond))
		if most > rl.Limit {
			bad("%s: %d bodies started within %s from %d, rate %d per %s", rateQueue, most, time.Duration(window), mostAt, rl.Limit, rl.Period)
		}
	}
	// The claims, exactly, in windows of the period (the engine's
	// milliseconds: a claim at now counts the starts after now - Period).
	var rateClaims []int64
	for run, cs := range claims {
		if strings.HasPrefix(run, "lr-") {
			rateClaims = append(rateClaims, cs...)
		}
	}
	slices.Sort(rateClaims)
	most, mostAt := maxInWindow(rateClaims, rl.Period.Milliseconds())
	t.Logf("%s: %d claims, at most %d within %s", rateQueue, len(rateClaims), most, rl.Period)
	if most > rl.Limit {
		bad("%s: %d claims within %s from unix ms %d, rate %d per %s", rateQueue, most, rl.Period, mostAt, rl.Limit, rl.Period)
	}
	if n := len(rateClaims); n > rl.Limit {
		if span := time.Duration(rateClaims[n-1]-rateClaims[0]) * time.Millisecond; span < time.Duration(n/rl.Limit-1)*rl.Period {
			bad("%s: %d claims within %s, faster than %d per %s allows", rateQueue, n, span, rl.Limit, rl.Period)
		}
	}
	return problems
}

// edge is where an execution of a body begins (delta +1) or ends (-1).
type edge struct {
	at    int64 // unix ns
	delta int
	key   string
}

// queueOfRun names the queue of a run by its ID's prefix.
func queueOfRun(run string) string {
	switch {
	case strings.HasPrefix(run, "lk-"):
		return limQueue
	case strings.HasPrefix(run, "lg-"):
		return globQueue
	}
	return rateQueue
}

// sweepLimits walks the executions of queue in time order (ends before
// starts at the same nanosecond) and reports every instant at which more
// ran than l allows, in all or with one key.
func sweepLimits(t *testing.T, queue string, edges []edge, l flow.QueueLimits) []string {
	t.Helper()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return a.delta - b.delta
	})
	now, peak := 0, 0
	byKey, peakByKey := map[string]int{}, map[string]int{}
	overAll, overKey := 0, 0
	for _, e := range edges {
		now += e.delta
		byKey[e.key] += e.delta
		peak = max(peak, now)
		if e.key != "-" {
			peakByKey[e.key] = max(peakByKey[e.key], byKey[e.key])
		}
		if e.delta > 0 && l.Concurrency > 0 && now > l.Concurrency {
			if overAll++; overAll <= 5 {
				bad("%s: %d runs executing at once at %d, global limit %d", queue, now, e.at, l.Concurrency)
			}
		}
		if e.delta > 0 && e.key != "-" && l.KeyConcurrency > 0 && byKey[e.key] > l.KeyConcurrency {
			if overKey++; overKey <= 5 {
				bad("%s: %d runs of key %s executing at once at %d, key limit %d", queue, byKey[e.key], e.key, e.at, l.KeyConcurrency)
			}
		}
	}
	if overAll > 5 || overKey > 5 {
		bad("%s: %d starts over the global limit and %d over a key's in all", queue, overAll, overKey)
	}
	t.Logf("%s: %d executions, at most %d at once (limit %d), per key %v (limit %d)",
		queue, len(edges)/2, peak, l.Concurrency, peakByKey, l.KeyConcurrency)
	if peak < l.Concurrency {
		bad("%s: never more than %d runs at once: the global limit of %d was never reached, the test proved little", queue, peak, l.Concurrency)
	}
	return problems
}

// maxInWindow returns the most values of sorted within any half-open
// window [v, v+w), and where that window begins.
func maxInWindow(sorted []int64, w int64) (int, int64) {
	best, at, j := 0, int64(0), 0
	for i := range sorted {
		for j < len(sorted) && sorted[j] < sorted[i]+w {
			j++
		}
		if j-i > best {
			best, at = j-i, sorted[i]
		}
	}
	return best, at
}
