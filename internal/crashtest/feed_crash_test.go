package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// childFeed makes the test binary a change-feed consumer (feedChildMain).
const childFeed = "feed"

// feedConsumer is the durable consumer the children read as.
const feedConsumer = "crash-consumer"

// TestCrashFeedConsumerResumes SIGKILLs a change-feed consumer mid-stream,
// again and again, while an engine keeps committing runs, and checks that
// the consumer loses nothing: every event in the database was handled by
// some incarnation (at least once), each incarnation handled positions in
// increasing order, and each resumed no later than where the one before
// it stopped. The consumer is a child process reading flow.Engine.Changes
// as a named consumer; it "handles" a change by appending it, fsynced, to
// its own file before taking the next, so a change counts as handled only
// once that line is on disk, and the position is acknowledged only after.
func TestCrashFeedConsumerResumes(t *testing.T) {
	t.Parallel()
	const runs, kills = 120, 8
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xfeed))
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db")}
	ctx := t.Context()

	e, err := flowsqlite.Open(ctx, h.db, &flow.Config{PollInterval: 10 * time.Millisecond, DefaultRetry: *fastRetry}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.Register(e, feedWorkflow)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = e.Stop(sctx)
	}()

	// Runs start (and commit events) all through the kills.
	started := make(chan error, 1)
	go func() {
		for n := range runs {
			if _, err := flow.Start(ctx, e, feedWorkflow, n, &flow.StartOptions{RunID: fmt.Sprintf("feed-%04d", n)}); err != nil {
				started <- err
				return
			}
			time.Sleep(time.Duration(2+rand.IntN(8)) * time.Millisecond)
		}
		started <- nil
	}()

	inc := 0
	for range kills {
		inc++
		c := h.spawnFeed(inc, false)
		select {
		case <-c.ready:
		case err := <-c.done:
			c.done <- err
			h.fail("consumer %d exited before it was ready: %v", inc, err)
		case <-time.After(30 * time.Second):
			h.fail("consumer %d not ready after 30s", inc)
		}
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		c.kill()
	}
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	// Let every run finish, then let a last consumer read to the end.
	deadline := time.Now().Add(60 * time.Second)
	for {
		counts, err := e.CountRuns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts[flow.StatusCompleted] == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs not completed after 60s: %v", counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	inc++
	last := h.spawnFeed(inc, true)
	select {
	case err := <-last.done:
		if err != nil {
			h.fail("last consumer: %v", err)
		}
	case <-time.After(60 * time.Second):
		last.kill()
		h.fail("last consumer did not reach the end in 60s")
	}

	// Every event of the database, by position.
	want := map[int64]string{}
	var newest int64
	for c, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		want[c.Position] = c.RunID + " " + c.Kind
		newest = c.Position
	}
	handled := map[int64]int{}
	var prevLast int64
	for i := 1; i <= inc; i++ {
		positions := readFeedLedger(t, h.feedLedger(i), want)
		for j, p := range positions {
			if j > 0 && p <= positions[j-1] {
				t.Errorf("consumer %d handled position %d after %d", i, p, positions[j-1])
			}
			handled[p]++
		}
		if len(positions) > 0 {
			// It resumed at or before the change after the last one handled
			// before it: nothing between was skipped.
			if positions[0] > nextPosition(want, prevLast) {
				t.Errorf("consumer %d started at position %d; the last handled before it was %d", i, positions[0], prevLast)
			}
			prevLast = max(prevLast, positions[len(positions)-1])
		}
	}
	missing, again := 0, 0
	for p := range want {
		switch n := handled[p]; {
		case n == 0:
			missing++
			if missing <= 5 {
				t.Errorf("position %d (%s) was never handled", p, want[p])
			}
		case n > 1:
			again += n - 1
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d changes lost across %d kills", missing, len(want), kills)
	}
	cs, err := e.ChangeConsumers(ctx)
	if err != nil || len(cs) != 1 || cs[0].Position != newest {
		t.Errorf("consumers after the last read: %+v, %v; want %s at %d", cs, err, feedConsumer, newest)
	}
	t.Logf("%d changes, %d kills, %d handled again after a kill (at least once)", len(want), kills, again)
}

// nextPosition is the smallest position in want above p.
func nextPosition(want map[int64]string, p int64) int64 {
	next := int64(-1)
	for q := range want {
		if q > p && (next < 0 || q < next) {
			next = q
		}
	}
	return next
}

// readFeedLedger reads the positions a consumer handled. A SIGKILL may cut
// the last line short; a complete line must name an event of the database.
func readFeedLedger(t *testing.T, path string, want map[int64]string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 2)
		if len(fields) != 2 || !strings.HasSuffix(sc.Text(), ";") {
			continue // cut short by the kill
		}
		p, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			t.Fatalf("%s: bad line %q", path, sc.Text())
		}
		if got := strings.TrimSuffix(fields[1], ";"); want[p] != got {
			t.Errorf("%s: position %d handled as %q, the database has %q", path, p, got, want[p])
		}
		out = append(out, p)
	}
	return out
}

func (h *harness) feedLedger(inc int) string {
	return filepath.Join(h.dir, fmt.Sprintf("feed-%03d.txt", inc))
}

// spawnFeed starts consumer incarnation inc; with drain it reads to the
// newest change and exits instead of following.
func (h *harness) spawnFeed(inc int, drain bool) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+childFeed, envDB+"="+h.db, envLedger+"="+h.feedLedger(inc),
		envInc+"="+strconv.Itoa(inc), envDrain+"="+map[bool]string{true: "1", false: "0"}[drain])
	c := &child{inc: inc, cmd: cmd, ready: make(chan struct{}), done: make(chan error, 1)}
	cmd.Stdout = &readyWriter{ready: c.ready}
	logf, err := os.Create(h.logPath(inc))
	if err != nil {
		h.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start consumer %d: %v", inc, err)
	}
	go func() { c.done <- cmd.Wait() }()
	h.cur = c
	return c
}

// feedWorkflow is the workload whose changes the consumer reads.
var feedWorkflow = flow.Workflow[int, int]{
	Name: "feed_crash",
	Run: func(wc flow.Context, n int) (int, error) {
		v, err := flow.Do(wc, feedStep, n)
		if err != nil {
			return 0, err
		}
		return flow.Do(wc, feedStep, v)
	},
}

var feedStep = flow.Step[int, int]{
	Name: "add_one",
	Run:  func(ctx context.Context, n int) (int, error) { return n + 1, nil },
}

// feedChildMain reads the change feed as the durable consumer until it is
// killed (or, draining, until the newest change), writing each change it
// handles to its ledger, fsynced, before it takes the next.
func feedChildMain() int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "feed child: "+format+"\n", args...)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	e, err := flowsqlite.Open(ctx, os.Getenv(envDB), &flow.Config{}, childOptions)
	if err != nil {
		return fail("open: %v", err)
	}
	defer e.Close()
	f, err := os.OpenFile(os.Getenv(envLedger), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fail("open ledger: %v", err)
	}
	defer f.Close()
	fmt.Println("ready")
	drain := os.Getenv(envDrain) == "1"
	opts := &flow.ChangesOptions{Consumer: feedConsumer, Follow: !drain, PollInterval: 10 * time.Millisecond}
	for c, err := range e.Changes(ctx, opts) {
		if err != nil {
			return fail("read changes: %v", err)
		}
		if _, err := fmt.Fprintf(f, "%d %s %s;\n", c.Position, c.RunID, c.Kind); err != nil {
			return fail("write ledger: %v", err)
		}
		if err := f.Sync(); err != nil {
			return fail("sync ledger: %v", err)
		}
	}
	return 0
}
