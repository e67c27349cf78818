package crashtest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// Failover (issue 25): a primary and a streaming standby of it on this
// machine (pgcluster_test.go), three worker processes and the parent on
// a multi-host DSN with target_session_attrs=read-write. Under load the
// primary's postmaster is SIGKILLed and the standby promoted; the workers
// are never restarted. Then the outside records are checked:
//
//   - the parent's: every Start and Signal that returned nil before, during
//     and after the failover. A lost start is an acknowledged run the new
//     primary does not know; a lost signal one that a second send with the
//     same key stores again (the first was not there). With a synchronous
//     standby both must be 0; with an asynchronous one they are counted,
//     sent again (as an application that reconciles would), and must then
//     complete too.
//   - the ledger the step bodies append to (failoverLedger): no two
//     attempts of one run's steps are ever running at once, on two engines
//     or on one; a step that ran to its end and runs again is explained:
//     its checkpoint was never acknowledged (the body ended around the
//     kill and no later step of the run had begun), or, with an
//     asynchronous standby only, the old primary had committed it and the
//     new one lost it. A checkpoint counts as acknowledged once a later
//     step of the run began, as its begin commits after the checkpoint.
//   - the old primary's own data directory, started again after the test
//     on a port no engine knows, in which crash recovery replays all it
//     had committed: the step checkpoints it holds that the new primary
//     does not are the lost commits that explain the runs of the
//     asynchronous case.
//
// Every run must complete with the output its input and signal give, and
// the engines must write to the new primary by themselves within
// failoverBound of the kill.
//
// They make clusters of their own on ports from 5441 up and leave the
// shared server alone, but they need the PostgreSQL binaries and, as root,
// runuser: so they run only with FLOWLITE_PG_FAILOVER=1, which makes a
// missing tool fail them. FLOWLITE_PG_FAILOVER_LOAD (a duration, default
// 8s) is how long the parent starts runs, with the kill in its middle.

const (
	envFailover     = "FLOWLITE_PG_FAILOVER"
	envFailoverLoad = "FLOWLITE_PG_FAILOVER_LOAD"
	failoverBound   = 30 * time.Second       // kill to the engines' first write on the new primary
	standbyLag      = 500 * time.Millisecond // how far the standby falls behind before the kill
)

func TestPGFailoverSynchronous(t *testing.T)  { failoverScenario(t, true) }
func TestPGFailoverAsynchronous(t *testing.T) { failoverScenario(t, false) }

// ack is an acknowledged Start or Signal of the parent.
type ack struct {
	n  int
	at time.Time
}

func failoverScenario(t *testing.T, synchronous bool) {
	if os.Getenv(envFailover) != "1" {
		t.Skipf("makes a primary and a standby of its own and kills the primary: runs with %s=1", envFailover)
	}
	load := 8 * time.Second
	if s := os.Getenv(envFailoverLoad); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 2*time.Second {
			t.Fatalf("%s=%q: want a duration of 2s or more", envFailoverLoad, s)
		}
		load = d
	}
	mode := map[bool]string{true: "synchronous", false: "asynchronous"}[synchronous]
	// A schema of this run's own: a process of another run (one whose
	// test died without its cleanups) that reaches these ports finds
	// nothing of it. (Workers left behind so, claiming while a later
	// run's parent migrated, are the likely cause of the one deadlock seen
	// in migration 10's ALTER TABLE, before runs had schemas of their own.)
	schema := fmt.Sprintf("failover_%d", time.Now().UnixNano()%1_000_000_000)
	pair := newPGPair(t, synchronous)
	ctx := t.Context()
	if err := waitReplication(ctx, pair, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		pair.primary.port, pair.standby.port)
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, ledger: filepath.Join(dir, "ledger.txt")}
	app := "flowlite_failover"
	parent, err := flowpg.Open(ctx, dsn, nil, &flowpg.Options{Schema: schema, ApplicationName: app})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	flow.Register(parent, failoverWorkflow)

	kids := make([]*child, 3)
	t.Cleanup(func() {
		for _, c := range kids {
			if c != nil {
				c.kill()
			}
		}
	})
	for i := range kids {
		kids[i] = h.spawnFailover(i+1, dsn, schema, app)
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

	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	consumer := followFailoverFeed(feedCtx, parent, 0)

	// The starter: one run every 25ms, each Start retried until it returns
	// nil (Start is idempotent by run ID); then the signal of the run
	// started three before, retried the same way (idempotent by key).
	var mu sync.Mutex
	var starts, signals []ack
	startErrors, signalErrors := 0, 0
	start := func(n int) {
		for ctx.Err() == nil {
			_, err := flow.Start(ctx, parent, failoverWorkflow, failoverIn{N: n, LongMs: failoverLong(n)}, &flow.StartOptions{RunID: runID(n)})
			if err == nil {
				mu.Lock()
				starts = append(starts, ack{n, time.Now()})
				mu.Unlock()
				return
			}
			mu.Lock()
			startErrors++
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}
	gone := map[int]bool{} // runs whose start a signal found lost
	signal := func(n int) {
		for ctx.Err() == nil {
			_, err := flow.Signal(ctx, parent, runID(n), failoverSignal, failoverPayload(n), &flow.SignalOptions{Key: signalKey(n)})
			if errors.Is(err, flow.ErrRunNotFound) {
				// Its start was acknowledged and lost with the old
				// primary: start it again, as an application that
				// reconciles would, and signal it then.
				mu.Lock()
				gone[n] = true
				mu.Unlock()
				start(n)
				continue
			}
			if err == nil {
				mu.Lock()
				signals = append(signals, ack{n, time.Now()})
				mu.Unlock()
				return
			}
			mu.Lock()
			signalErrors++
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}
	total := 0
	stopStarts := make(chan struct{})
	startsDone := make(chan struct{})
	go func() {
		defer close(startsDone)
		for {
			select {
			case <-stopStarts:
				for n := max(total-3, 0); n < total; n++ {
					signal(n)
				}
				return
			case <-time.After(25 * time.Millisecond):
			}
			start(total)
			if total >= 3 {
				signal(total - 3)
			}
			total++
		}
	}()

	// The standby falls behind for a moment before the primary dies, as
	// one on a slow link would: the primary's WAL sender is stopped for
	// standbyLag (stopping the standby's receiver would not do: the kernel
	// would go on buffering what the sender sends). An asynchronous
	// primary acknowledges the commits of that moment, which the standby
	// never gets; a synchronous one holds them unacknowledged.
	time.Sleep(load/2 - standbyLag)
	// What the consumer got before the standby falls behind, the standby
	// has: the position docs/postgresql.md says to restart readers from
	// after an asynchronous failover.
	beforeLag := consumer.highest()
	sender, err := walSender(ctx, pair.primary.dsn())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sender, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(standbyLag)
	killAt := time.Now()
	if err := pair.primary.kill(); err != nil {
		t.Fatal(err)
	}
	if err := pair.standby.promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Since(killAt)
	back, perWorker, err := firstWrites(ctx, pair.standby.dsn(), schema, killAt, len(kids), failoverBound)
	if err != nil {
		h.dumpLogs()
		t.Fatalf("%s: %v", mode, err)
	}
	t.Logf("%s: primary killed, standby promoted %s later; the engines' first write on the new primary committed %s after the kill, each worker's first claim there %v",
		mode, promoted.Round(time.Millisecond), back.Round(time.Millisecond), perWorker)
	if back > failoverBound {
		t.Errorf("the engines wrote to the new primary %s after the kill, over the bound of %s", back, failoverBound)
	}
	if !synchronous {
		// As docs/postgresql.md, "Failover", says to: a reader whose read
		// did not end across the failover may hold a cursor from the lost
		// commits, so the consumer starts again from a position older
		// than the failover.
		stopFeed()
		consumer.wait()
		if _, err := parent.DeleteChangeConsumer(ctx, failoverConsumerName); err != nil {
			t.Fatalf("restart the consumer: %v", err)
		}
		feedCtx, stopFeed = context.WithCancel(ctx)
		defer stopFeed()
		consumer = consumer.resume(feedCtx, parent, beforeLag)
	}
	time.Sleep(load / 2)
	close(stopStarts)
	<-startsDone

	// Reconcile: what the parent was told is recorded must be there.
	lostStarts, lostSignals := gone, map[int]bool{}
	for n := range gone {
		t.Logf("start of %s lost: its signal found no run", runID(n))
	}
	for _, a := range starts {
		if gone[a.n] {
			continue
		}
		if _, err := parent.Inspect(ctx, runID(a.n)); errors.Is(err, flow.ErrRunNotFound) {
			lostStarts[a.n] = true
			t.Logf("start of %s lost (acknowledged %s before the kill)", runID(a.n), killAt.Sub(a.at).Round(time.Millisecond))
			start(a.n)
		} else if err != nil {
			t.Fatalf("inspect %s: %v", runID(a.n), err)
		}
	}
	for _, a := range signals {
		sent, err := flow.Signal(ctx, parent, runID(a.n), failoverSignal, failoverPayload(a.n), &flow.SignalOptions{Key: signalKey(a.n)})
		switch {
		case errors.Is(err, flow.ErrRunFinished):
		case err != nil:
			t.Fatalf("signal %s again: %v", runID(a.n), err)
		case sent:
			lostSignals[a.n] = true
			t.Logf("signal to %s lost (acknowledged %s before the kill; its run's start lost too: %v)",
				runID(a.n), killAt.Sub(a.at).Round(time.Millisecond), lostStarts[a.n])
		}
	}
	if synchronous && (len(lostStarts) > 0 || len(lostSignals) > 0) {
		t.Errorf("synchronous standby: %d acknowledged starts and %d acknowledged signals lost, want 0", len(lostStarts), len(lostSignals))
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		counts, err := parent.CountRuns(ctx)
		if err == nil && counts[flow.StatusCompleted] >= int64(total) {
			break
		}
		if time.Now().After(deadline) {
			h.dumpLogs()
			t.Fatalf("%s: runs not completed 60s after the load: %v of %d (%v)", mode, counts, total, err)
		}
		time.Sleep(100 * time.Millisecond)
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
	h.scanChildLogs(len(kids))
	// What the engines logged, by level and message: the failover's trace.
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
	t.Logf("%s: engine logs: %v", mode, logged)

	// Every run's outcome.
	for n := range total {
		info, err := parent.Inspect(ctx, runID(n))
		if err != nil {
			t.Errorf("%s: %v", runID(n), err)
			continue
		}
		var out failoverOut
		if err := decodeJSON(info.Output, &out); info.Status != flow.StatusCompleted || err != nil || out != wantFailover(n) {
			t.Errorf("%s: %s with output %s (%v), want completed with %+v", runID(n), info.Status, info.Output, err, wantFailover(n))
		}
	}

	// The change feed: the durable consumer, read through the failover,
	// got every change the new primary holds, with that change's content
	// (a position reused for another change after the lost commits, and
	// delivered only with the lost one's content, would be a change it
	// skipped).
	recorded, err := failoverEvents(ctx, pair.standby.dsn(), schema)
	if err != nil {
		t.Fatal(err)
	}
	delivered, reused := consumer.await(t, recorded, 30*time.Second)
	stopFeed()
	var skipped []int64
	for pos, want := range recorded {
		if !slices.Contains(delivered[pos], want) {
			skipped = append(skipped, pos)
		}
	}
	slices.Sort(skipped)
	if synchronous && reused > 0 {
		t.Errorf("synchronous: the durable consumer got %d positions with two contents, want 0", reused)
	}
	if len(skipped) > 0 {
		// Its read ended with the outage's error and started again from
		// its stored position (see docs/postgresql.md, "Failover", for the
		// reader whose read does not end): it must miss nothing.
		t.Errorf("%s: the durable consumer never got %d changes the new primary holds, at positions %d to %d",
			mode, len(skipped), skipped[0], skipped[len(skipped)-1])
	}

	// What the old primary had committed, against the new one.
	newDone, err := stepCheckpoints(ctx, pair.standby.dsn(), schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := pair.primary.gone(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Not its old port, which the engines' DSN names: the old primary
	// would take writes there again.
	pair.primary.port = freePorts(t, 1, pair.primary.port, pair.standby.port)[0]
	if err := pair.primary.start(); err != nil {
		t.Fatal(err)
	}
	oldDone, err := stepCheckpoints(ctx, pair.primary.dsn(), schema)
	if err != nil {
		t.Fatal(err)
	}
	lostCheckpoints := map[stepOf]bool{}
	for k, id := range oldDone {
		if newDone[k] != id {
			lostCheckpoints[k] = true
		}
	}

	lines, err := readFailoverLedger(h.ledger)
	if err != nil {
		t.Fatal(err)
	}
	// Not recorded means not run: every step of every run ran to its end
	// in the ledger at least once, or the oracles above saw too little.
	ended := map[stepOf]bool{}
	for _, l := range lines {
		if l.kind == "done" {
			ended[stepOf{l.run, l.step}] = true
		}
	}
	for n := range total {
		for _, step := range failoverSteps {
			if !ended[stepOf{runID(n), step}] {
				t.Errorf("%s: the ledger has no finished attempt of %s", runID(n), step)
			}
		}
	}
	v := judgeFailoverLedger(lines, killAt, func(k stepOf) bool {
		n, _ := runNumber(k.run)
		return !synchronous && (lostCheckpoints[k] || lostStarts[n])
	})
	for _, p := range v.problems {
		t.Error(p)
	}
	if !synchronous && len(lostStarts)+len(lostSignals)+len(lostCheckpoints) == 0 {
		t.Errorf("asynchronous: the standby lost no commit, so the test proved nothing of what a lost commit does")
	}
	if len(lostCheckpoints) > 0 {
		// Not acknowledged, or the ledger check above failed: the old
		// primary had flushed them, the standby not yet.
		t.Logf("%s: %d step checkpoints committed on the old primary that the new one does not hold as the same commit (synchronous: never acknowledged, committed again or run again): %v", mode, len(lostCheckpoints), keys(lostCheckpoints))
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%s: %d runs, %d starts and %d signals acknowledged (%d and %d calls failed and were retried; lost ones sent again); lost: %d starts, %d signals, %d step checkpoints of the old primary's; step attempts %d, re-runs of a finished body %d (%d of an acknowledged checkpoint, explained by lost commits), at once on two engines %d",
		mode, total, total, len(signals), startErrors, signalErrors, len(lostStarts), len(lostSignals), len(lostCheckpoints),
		v.attempts, v.reruns, v.ackedReruns, v.concurrent)
	t.Logf("%s: change feed: %d changes on the new primary, %d of them never delivered to the durable consumer (read %d times, resumed after %v); %d positions delivered with two contents (a lost change's, then a new one's)",
		mode, len(recorded), len(skipped), consumer.reads.Load(), consumer.errs(), reused)
}

// failoverConsumerName is the durable consumer of the failover tests.
const failoverConsumerName = "failover"

// failoverConsumer follows the change feed as the durable consumer
// failoverConsumerName, from the parent's engine, starting again whenever
// a read ends with an error (the database away), as an application would.
type failoverConsumer struct {
	mu        sync.Mutex
	delivered map[int64][]string // position → the contents delivered at it
	errors    map[string]int
	reads     atomic.Int32
	done      chan struct{} // closed when its goroutine returned
}

// followFailoverFeed starts the consumer; a new one starts after after.
func followFailoverFeed(ctx context.Context, e *flow.Engine, after int64) *failoverConsumer {
	c := &failoverConsumer{delivered: map[int64][]string{}, errors: map[string]int{}}
	c.follow(ctx, e, after)
	return c
}

// resume starts c again, as a new consumer after position after, keeping
// what it delivered.
func (c *failoverConsumer) resume(ctx context.Context, e *flow.Engine, after int64) *failoverConsumer {
	c.follow(ctx, e, after)
	return c
}

// wait returns once the consumer's goroutine ended (its ctx done).
func (c *failoverConsumer) wait() { <-c.done }

// highest returns the highest position the consumer delivered.
func (c *failoverConsumer) highest() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var top int64
	for pos := range c.delivered {
		top = max(top, pos)
	}
	return top
}

func (c *failoverConsumer) follow(ctx context.Context, e *flow.Engine, after int64) {
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			c.reads.Add(1)
			for ch, err := range e.Changes(ctx, &flow.ChangesOptions{Consumer: failoverConsumerName, After: after, Follow: true, PollInterval: 50 * time.Millisecond}) {
				if err != nil {
					if ctx.Err() == nil {
						c.mu.Lock()
						c.errors[errorKind(err)]++
						c.mu.Unlock()
					}
					break
				}
				c.mu.Lock()
				content := changeContent(ch.RunID, ch.Kind, ch.Step, ch.Attempt)
				if !slices.Contains(c.delivered[ch.Position], content) {
					c.delivered[ch.Position] = append(c.delivered[ch.Position], content)
				}
				c.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

func changeContent(run, kind, step string, attempt int) string {
	return fmt.Sprintf("%s %s %s %d", run, kind, step, attempt)
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, flow.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, flow.ErrReadOnly):
		return "read-only"
	}
	return err.Error()
}

func (c *failoverConsumer) errs() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.errors)
}

// await waits until the consumer delivered a change at every position of
// recorded (the new primary's), and returns what it delivered and at how
// many positions it delivered two contents.
func (c *failoverConsumer) await(t *testing.T, recorded map[int64]string, within time.Duration) (map[int64][]string, int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c.mu.Lock()
		missing := 0
		for pos, want := range recorded {
			if !slices.Contains(c.delivered[pos], want) {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			out := make(map[int64][]string, len(c.delivered))
			reused := 0
			for pos, d := range c.delivered {
				out[pos] = slices.Clone(d)
				if len(d) > 1 {
					reused++
				}
			}
			c.mu.Unlock()
			return out, reused
		}
		c.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
	}
}

// failoverEvents returns the content of every event of schema
// on the server dsn names, by position.
func failoverEvents(ctx context.Context, dsn, schema string) (map[int64]string, error) {
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT id, run_id, kind, step, attempt FROM `+schema+`.events`)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var run, kind, step string
		var attempt int
		if err := rows.Scan(&id, &run, &kind, &step, &attempt); err != nil {
			return nil, err
		}
		out[id] = changeContent(run, kind, step, attempt)
	}
	return out, rows.Err()
}

func signalKey(n int) string { return "go-" + strconv.Itoa(n) }

// waitReplication waits until the primary streams to the standby, and
// with a synchronous standby until it is the synchronous one.
func waitReplication(ctx context.Context, p *pgPair, within time.Duration) error {
	db, err := sql.Open(flowpg.DriverName, p.primary.dsn())
	if err != nil {
		return err
	}
	defer db.Close()
	want := "async"
	if p.sync {
		want = "sync"
	}
	deadline := time.Now().Add(within)
	for {
		var state string
		err := db.QueryRowContext(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming'`).Scan(&state)
		if err == nil && state == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("standby not streaming (%s) after %s: state %q, %v", want, within, state, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// firstWrites waits until every worker claimed a run on the new primary
// and returns how long after killAt the first write of any worker was
// seen committed there, and each worker's first claim. It reads the
// events table every 20ms: the writes are those past its highest event
// ID at the first read, which comes right after the promotion.
func firstWrites(ctx context.Context, dsn, schema string, killAt time.Time, workers int, within time.Duration) (time.Duration, []time.Duration, error) {
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		return 0, nil, err
	}
	defer db.Close()
	deadline := killAt.Add(within + 10*time.Second)
	base := int64(-1)
	var first time.Duration
	per := make([]time.Duration, workers)
	for {
		switch {
		case base < 0:
			err = db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM `+schema+`.events`).Scan(&base)
		default:
			var details []string
			details, err = workerEvents(ctx, db, schema, base)
			seen := time.Since(killAt)
			for _, d := range details {
				if first == 0 {
					first = seen
				}
				for w := range workers {
					if per[w] == 0 && strings.HasSuffix(d, "child-"+strconv.Itoa(w+1)) {
						per[w] = seen
					}
				}
			}
		}
		if first > 0 && !slices.Contains(per, 0) {
			return first, per, nil
		}
		if time.Now().After(deadline) {
			return 0, nil, fmt.Errorf("the engines did not write to the new primary within %s of the kill: first write %s, first claims %v (%v)",
				time.Since(killAt).Round(time.Millisecond), first, per, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workerEvents returns the details of the events past ID after that the
// workers wrote (not the parent's starts and signals).
func workerEvents(ctx context.Context, db *sql.DB, schema string, after int64) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT detail FROM `+schema+`.events
		WHERE id > $1 AND kind IN ('run_claimed', 'step_started', 'step_completed', 'run_waiting', 'run_completed', 'run_released')`, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// walSender returns the pid of the primary's WAL sender to the standby.
func walSender(ctx context.Context, dsn string) (int, error) {
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var pid int
	if err := db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_replication WHERE application_name = 'standby1'`).Scan(&pid); err != nil {
		return 0, fmt.Errorf("find the primary's WAL sender: %w", err)
	}
	return pid, nil
}

// stepOf names one step of one run.
type stepOf struct{ run, step string }

// stepCheckpoints returns the event ID of each step's step_completed in
// schema on the server dsn names, retrying while it starts.
func stepCheckpoints(ctx context.Context, dsn, schema string) (map[stepOf]int64, error) {
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var rows *sql.Rows
	for try := 0; ; try++ {
		rows, err = db.QueryContext(ctx, `SELECT run_id, step, id FROM `+schema+`.events WHERE kind = 'step_completed'`)
		if err == nil || try == 50 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	defer rows.Close()
	out := map[stepOf]int64{}
	for rows.Next() {
		var k stepOf
		var id int64
		if err := rows.Scan(&k.run, &k.step, &id); err != nil {
			return nil, err
		}
		out[k] = id
	}
	return out, rows.Err()
}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// foLine is one line of the failover ledger.
type foLine struct {
	at      time.Time
	inc     int
	kind    string
	run     string
	step    string
	attempt int
}

func readFailoverLedger(path string) ([]foLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []foLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l foLine
		var ns int64
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %s %s %s %d", &ns, &l.inc, &l.kind, &l.run, &l.step, &l.attempt); err != nil {
			return nil, fmt.Errorf("ledger line %q: %w", sc.Text(), err)
		}
		l.at = time.Unix(0, ns)
		lines = append(lines, l)
	}
	return lines, sc.Err()
}

// failoverVerdict is what judgeFailoverLedger found.
type failoverVerdict struct {
	problems                     []string
	attempts, reruns, concurrent int
	ackedReruns                  int
}

var failoverSteps = []string{"f1", "f2", "f3"}

// judgeFailoverLedger checks the ledger's lines (in the order they were
// written) run by run: no attempt of a run's steps starts while another
// is running, on any engine; and a step whose body ran to its end and
// runs again is explained. lost says whether the lost commits of an
// asynchronous standby explain a re-run of a step whose checkpoint had
// been acknowledged (a later step of the run began).
func judgeFailoverLedger(lines []foLine, killAt time.Time, lost func(stepOf) bool) failoverVerdict {
	var v failoverVerdict
	byRun := map[string][]foLine{}
	for _, l := range lines {
		byRun[l.run] = append(byRun[l.run], l)
	}
	ids := keys(byRun)
	slices.Sort(ids)
	for _, id := range ids {
		type exec struct {
			inc     int
			step    string
			attempt int
		}
		open := map[exec]foLine{}
		lastDone := map[string]foLine{} // step → its last done line
		laterBegun := map[string]bool{} // step → a later step began after its last done
		for _, l := range byRun[id] {
			x := exec{l.inc, l.step, l.attempt}
			if l.kind != "start" {
				delete(open, x)
				if l.kind == "done" {
					lastDone[l.step] = l
					laterBegun[l.step] = false
				}
				continue
			}
			v.attempts++
			for o, ol := range open {
				v.concurrent++
				v.problems = append(v.problems, fmt.Sprintf("%s: %s attempt %d began on worker %d while %s attempt %d (begun %s) was running on worker %d (CONCURRENT)",
					id, l.step, l.attempt, l.inc, o.step, o.attempt, ol.at.Format(time.StampMilli), o.inc))
			}
			open[x] = l
			i := slices.Index(failoverSteps, l.step)
			for _, earlier := range failoverSteps[:max(i, 0)] {
				if _, ok := lastDone[earlier]; ok {
					laterBegun[earlier] = true
				}
			}
			done, ran := lastDone[l.step]
			if !ran {
				continue
			}
			v.reruns++
			k := stepOf{id, l.step}
			switch {
			case laterBegun[l.step] && lost(k):
				v.ackedReruns++
			case laterBegun[l.step]:
				v.problems = append(v.problems, fmt.Sprintf("%s: %s ran again on worker %d (attempt %d) after its checkpoint was acknowledged (a later step began after worker %d finished attempt %d), and no lost commit explains it",
					id, l.step, l.inc, l.attempt, done.inc, done.attempt))
			case done.at.Before(killAt.Add(-2 * time.Second)):
				v.problems = append(v.problems, fmt.Sprintf("%s: %s ran again on worker %d (attempt %d); its body had finished on worker %d (attempt %d) at %s, long before the kill at %s",
					id, l.step, l.inc, l.attempt, done.inc, done.attempt, done.at.Format(time.StampMilli), killAt.Format(time.StampMilli)))
			}
		}
	}
	return v
}

// spawnFailover starts failover worker inc on dsn.
func (h *harness) spawnFailover(inc int, dsn, schema, app string) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+childFailover, envLedger+"="+h.ledger, envInc+"="+strconv.Itoa(inc),
		envPGDSN+"="+dsn, envPGSchema+"="+schema, envPGApp+"="+app)
	c := &child{inc: inc, cmd: cmd, ready: make(chan struct{}), done: make(chan error, 1)}
	cmd.Stdout = &readyWriter{ready: c.ready}
	logf, err := os.Create(h.logPath(inc))
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start worker %d: %v", inc, err)
	}
	go func() { c.done <- cmd.Wait() }()
	return c
}

func decodeJSON(b []byte, v any) error {
	if len(b) == 0 {
		return errors.New("no output")
	}
	return json.Unmarshal(b, v)
}
