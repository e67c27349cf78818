package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// childStream makes the test binary a worker of streamCrashWorkflow
// (streamChildMain).
const childStream = "stream"

// Shape of a stream run: streamParts times, the body writes one message,
// a step writes streamPerStep (slowly, so kills land mid-step), and the
// body publishes how far it got.
const (
	streamParts   = 3
	streamPerStep = 15
)

// streamPart is the step of one part: it writes its messages to "out".
var streamPart = flow.Step[int, int]{
	Name: "part", Retry: fastRetry,
	Run: func(ctx context.Context, part int) (int, error) {
		for i := range streamPerStep {
			if err := flow.WriteStreamCtx(ctx, "out", fmt.Sprintf("s%d-%d", part, i)); err != nil {
				return 0, err
			}
			time.Sleep(3 * time.Millisecond)
		}
		return part, nil
	},
}

var streamCrashWorkflow = flow.Workflow[int, int]{
	Name: "stream_crash",
	Run: func(wc flow.Context, n int) (int, error) {
		for part := range streamParts {
			if _, err := flow.WriteStream(wc, "out", fmt.Sprintf("b%d", part)); err != nil {
				return 0, err
			}
			if _, err := flow.Do(wc, streamPart, part); err != nil {
				return 0, err
			}
			if err := flow.Publish(wc, "part", part); err != nil {
				return 0, err
			}
		}
		return n, nil
	},
}

func streamChildMain() int {
	c, code := newWorkerEnv("stream child")
	if c == nil {
		return code
	}
	defer c.close()
	cfg := childConfig(c.inc, c.lw, c.log)
	cfg.Intercept = nil // no injected failures: the kills are the faults
	var e *flow.Engine
	var err error
	if os.Getenv(envPGDSN) != "" {
		e, err = openWorkerEngine(c.ctx, cfg)
	} else {
		e, err = flowsqlite.Open(c.ctx, os.Getenv(envDB), cfg, childOptions)
	}
	if err != nil {
		if c.ctx.Err() != nil {
			return 0
		}
		return c.fail("open: %v", err)
	}
	defer e.Close()
	flow.Register(e, streamCrashWorkflow)
	return workChild(c.ctx, e, c.fail)
}

// TestCrashStreamReaderSeesEachMessageOnce SIGKILLs workers again and
// again while runs write streams from their bodies and their steps, with
// a reader following each run's stream that restarts now and then from
// the position its ledger holds. It checks that the reader saw every
// position once, in order, with no gap; that the body's messages are in
// the stream exactly once each, in order; that each step's last attempt
// wrote all its messages, contiguously (an interrupted attempt may leave a
// prefix: step writes are at least once per attempt); and that every run
// published its last part. FLOWLITE_CRASH_LONG=1 runs more runs and kills.
func TestCrashStreamReaderSeesEachMessageOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	streamCrash(t, &harness{t: t, dir: dir, db: filepath.Join(dir, "flow.db"), ledger: filepath.Join(dir, "ledger.txt")})
}

// TestPGCrashStreamReaderSeesEachMessageOnce is the stream crash test on a
// PostgreSQL schema (FLOWLITE_PG_TEST=1), where the reader is woken by
// LISTEN/NOTIFY and appends take turns on the stream's row.
func TestPGCrashStreamReaderSeesEachMessageOnce(t *testing.T) {
	streamCrash(t, pgHarness(t))
}

// spawnStream starts stream worker inc on the harness's database.
func (h *harness) spawnStream(inc int, drain bool) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+childStream, envDB+"="+h.db, envLedger+"="+h.ledger,
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

func streamCrash(t *testing.T, h *harness) {
	runs, kills := 12, 4
	if os.Getenv("FLOWLITE_CRASH_LONG") == "1" {
		runs, kills = 40, 25
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x57e))
	ctx := t.Context()
	var parent *flow.Engine
	var err error
	pcfg := &flow.Config{PollInterval: 10 * time.Millisecond}
	if h.pg != nil {
		parent, err = h.pg.open(ctx, pcfg)
	} else {
		parent, err = flowsqlite.Open(ctx, h.db, pcfg, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	flow.Register(parent, streamCrashWorkflow)
	ids := make([]string, runs)
	for n := range runs {
		ids[n] = "stream-" + strconv.Itoa(n)
		if _, err := flow.Start(ctx, parent, streamCrashWorkflow, n, &flow.StartOptions{RunID: ids[n]}); err != nil {
			t.Fatal(err)
		}
	}
	// The reader: per run, the values it handled, position = index (its
	// ledger, from which each restart resumes).
	ledger := make([][]string, runs)
	readerDone := make(chan error, 1)
	go func() {
		readerDone <- func() error {
			for n, id := range ids {
				for {
					from := int64(len(ledger[n]))
					restart := false
					for m, err := range flow.ReadStream[string](ctx, parent, id, "out", from) {
						if err != nil {
							return err
						}
						if m.Position != int64(len(ledger[n])) {
							return fmt.Errorf("run %s: position %d after %d handled", id, m.Position, len(ledger[n]))
						}
						ledger[n] = append(ledger[n], m.Value)
						if rand.IntN(10) == 0 {
							restart = true // as a reader process restarting from its ledger
							break
						}
					}
					if !restart {
						break
					}
				}
			}
			return nil
		}()
	}()
	for inc := 1; inc <= kills; inc++ {
		c := h.spawnStream(inc, false)
		select {
		case <-c.ready:
		case err := <-c.done:
			h.fail("child %d exited before it was ready: %v", inc, err)
		case <-time.After(30 * time.Second):
			h.fail("child %d not ready", inc)
		}
		time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
		c.kill()
	}
	last := h.spawnStream(kills+1, true)
	select {
	case err := <-last.done:
		if err != nil {
			h.fail("draining child: %v", err)
		}
	case <-time.After(2 * time.Minute):
		h.fail("runs not drained in time")
	}
	select {
	case err := <-readerDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reader did not reach the end of the streams")
	}
	retried := 0
	for n, id := range ids {
		all, err := flow.StreamMessages[string](ctx, parent, id, "out", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != len(ledger[n]) {
			t.Errorf("run %s: reader handled %d messages, the stream holds %d", id, len(ledger[n]), len(all))
			continue
		}
		var body []string
		lastRun := map[int]string{} // part → the messages of its latest attempt, joined
		attemptOf := map[int]int{}
		for i, m := range all {
			if m.Position != int64(i) || ledger[n][i] != m.Value {
				t.Errorf("run %s: position %d holds %q, the reader saw %q", id, m.Position, m.Value, ledger[n][i])
			}
			if strings.HasPrefix(m.Value, "b") {
				body = append(body, m.Value)
				continue
			}
			var part, k int
			if _, err := fmt.Sscanf(m.Value, "s%d-%d", &part, &k); err != nil {
				t.Fatalf("run %s: message %q", id, m.Value)
			}
			if m.Attempt != attemptOf[part] {
				attemptOf[part], lastRun[part] = m.Attempt, ""
				if m.Attempt > 1 {
					retried++
				}
			}
			lastRun[part] += m.Value + " "
		}
		if got := strings.Join(body, " "); got != "b0 b1 b2" {
			t.Errorf("run %s: body messages %q, want b0 b1 b2 once each", id, got)
		}
		for part := range streamParts {
			var want strings.Builder
			for k := range streamPerStep {
				fmt.Fprintf(&want, "s%d-%d ", part, k)
			}
			if lastRun[part] != want.String() {
				t.Errorf("run %s: last attempt of part %d wrote %q", id, part, lastRun[part])
			}
		}
		if v, err := flow.GetPublished[int](ctx, parent, id, "part"); err != nil || v != streamParts-1 {
			t.Errorf("run %s: published part %d, %v", id, v, err)
		}
	}
	t.Logf("%d runs, %d kills, %d step attempts rewrote their messages after a kill", runs, kills, retried)
}
