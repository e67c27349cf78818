package replicatest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowlitestream"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// litestreamVersion is the Litestream flowlite links, and the one the
// separate-process trials run.
const litestreamVersion = "v0.5.18"

// syncInterval is the recovery point both set-ups are configured for.
const syncInterval = time.Second

// experiment is the size of one trial.
type experiment struct {
	trials int
	load   time.Duration // how long the engine enqueues before the loss
	rate   int           // runs enqueued per second
}

// sizing is the short form, the long one with FLOWLITE_REPLICA_LONG=1,
// and FLOWLITE_REPLICA_LOAD (a duration) shortens or lengthens each
// trial's load: CI runs the long form's 5 trials at 5s each.
func sizing() (experiment, error) {
	x := experiment{trials: 1, load: 2 * time.Second, rate: 100}
	if os.Getenv("FLOWLITE_REPLICA_LONG") == "1" {
		x = experiment{trials: 5, load: 20 * time.Second, rate: 300}
	}
	if v := os.Getenv("FLOWLITE_REPLICA_LOAD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return x, fmt.Errorf("FLOWLITE_REPLICA_LOAD=%q: want a duration of at least 1s", v)
		}
		x.load = d
	}
	return x, nil
}

// trialResult is one row of the table.
type trialResult struct {
	acked, missing, missingOld int
}

// The machine-loss tests run one after another, never in parallel: each
// loads the machine with its engine's enqueues and Litestream's copying,
// and a recovery point of one second is a timing property that two or
// three set-ups sharing two cores do not keep (CI saw a side-process trial
// lag past it while the in-process and control trials ran beside it).

// TestMachineLossInProcess: Litestream inside the engine
// (flowsqlite.Options.Replication).
func TestMachineLossInProcess(t *testing.T) {
	skipUnderRace(t)
	machineLoss(t, inProcess, "")
}

// TestMachineLossSideProcess: a litestream process beside the engine, which
// leaves checkpoints to it (Options.Checkpoints: CheckpointsByLitestream).
func TestMachineLossSideProcess(t *testing.T) {
	skipUnderRace(t)
	machineLoss(t, sideProcess, litestreamBinary(t))
}

// TestMachineLossControl is the set-up issue 26 measured, a litestream
// process beside an engine that checkpoints the file itself, for the long
// form's table only: it asserts nothing about losses.
func TestMachineLossControl(t *testing.T) {
	skipUnderRace(t)
	if os.Getenv("FLOWLITE_REPLICA_LONG") != "1" {
		t.Skip("the control set-up runs in the long form only (FLOWLITE_REPLICA_LONG=1)")
	}
	machineLoss(t, control, litestreamBinary(t))
}

// skipUnderRace skips a trial in a binary built with -race.
func skipUnderRace(t *testing.T) {
	if raceDetector {
		t.Skip("a timing experiment: under the race detector the engine and Litestream run 5-10x slower than the recovery point measured; go test without -race runs it")
	}
}

// machineLoss runs the trials of one set-up and checks that none lost a
// run acknowledged more than syncInterval before the loss.
func machineLoss(t *testing.T, s setUp, litestream string) {
	x, err := sizing()
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for i := range x.trials {
		r := trial(t, s, litestream, x)
		rows = append(rows, fmt.Sprintf("%d/%d/%d", r.acked, r.missing, r.missingOld))
		if r.missingOld > 0 && s != control {
			t.Errorf("trial %d: %d of %d acknowledged runs missing after restore, %d of them acknowledged more than %s before the loss",
				i+1, r.missing, r.acked, r.missingOld, syncInterval)
		}
		if r.acked < x.rate*int(x.load/time.Second)/10 { // the experiment ran at all (a loaded machine enqueues less)
			t.Errorf("trial %d: only %d runs acknowledged in %s at %d a second", i+1, r.acked, x.load, x.rate)
		}
	}
	t.Logf("%s, sync interval %s, %d runs/s for %s: acknowledged/missing/missing acknowledged >%s before the loss: %s",
		s, syncInterval, x.rate, x.load, syncInterval, strings.Join(rows, " · "))
}

// trial is one machine loss: the engine (and litestream) work for x.load,
// are SIGKILLed, and the replica is restored and searched.
func trial(t *testing.T, s setUp, litestream string, x experiment) trialResult {
	t.Helper()
	dir := t.TempDir()
	db, replica := filepath.Join(dir, "app.db"), filepath.Join(dir, "replica")
	engine := exec.Command(os.Args[0], "-test.run=^$")
	engine.Env = append(os.Environ(), envChild+"=1", envDB+"="+db, envMode+"="+string(s), envReplica+"="+replica,
		envSync+"="+syncInterval.String(), envRate+"="+strconv.Itoa(x.rate))
	engine.Stderr = logFile(t, dir, "engine.log")
	out, err := engine.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.Start(); err != nil {
		t.Fatalf("start the engine process: %v", err)
	}
	acks := readAcks(out)
	if err := acks.waitReady(30 * time.Second); err != nil {
		_ = engine.Process.Kill()
		_ = engine.Wait()
		t.Fatalf("engine process: %v (see %s)", err, filepath.Join(dir, "engine.log"))
	}

	var side *exec.Cmd
	config := filepath.Join(dir, "litestream.yml")
	if s != inProcess {
		// The settings docs/backups.md gives for a recovery point of
		// syncInterval: the WAL copied every quarter, uploads every half.
		yml := fmt.Sprintf("dbs:\n  - path: %s\n    monitor-interval: %s\n    replica:\n      type: file\n      path: %s\n      sync-interval: %s\n",
			db, syncInterval/4, replica, syncInterval/2)
		if err := os.WriteFile(config, []byte(yml), 0o644); err != nil {
			t.Fatal(err)
		}
		side = exec.Command(litestream, "replicate", "-config", config)
		side.Stdout = logFile(t, dir, "litestream.log")
		side.Stderr = side.Stdout
		if err := side.Start(); err != nil {
			_ = engine.Process.Kill()
			_ = engine.Wait()
			t.Fatalf("start litestream: %v", err)
		}
	}

	if side != nil {
		// As in the engine process for the in-process set-up: the load
		// counts from the replica's first snapshot.
		if err := waitForFile(filepath.Join(replica, "ltx"), 30*time.Second); err != nil {
			_ = engine.Process.Kill()
			_ = side.Process.Kill()
			_ = engine.Wait()
			_ = side.Wait()
			t.Fatalf("litestream: %v (see %s)", err, filepath.Join(dir, "litestream.log"))
		}
	}
	time.Sleep(x.load)
	// The machine is lost: every process on it stops at the same moment.
	lossAt := time.Now()
	_ = engine.Process.Kill()
	if side != nil {
		_ = side.Process.Kill()
	}
	_ = engine.Wait()
	if side != nil {
		_ = side.Wait()
	}
	acked := acks.done()

	restored := filepath.Join(dir, "restored.db")
	ctx := context.Background()
	if s != inProcess {
		cmd := exec.Command(litestream, "restore", "-o", restored, "file://"+replica)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("litestream restore: %v\n%s", err, b)
		}
	} else if err := flowlitestream.Restore(ctx, replica, restored, nil); err != nil {
		t.Fatalf("restore: %v", err)
	}
	e, err := flowsqlite.OpenReadOnly(ctx, restored, nil, nil)
	if err != nil {
		t.Fatalf("open the restored file: %v", err)
	}
	defer e.Close()
	if problems, err := e.Check(ctx); err != nil || len(problems) > 0 {
		t.Errorf("the restored file: %v %v", problems, err)
	}
	var r trialResult
	for id, at := range acked {
		r.acked++
		_, err := e.Inspect(ctx, id)
		switch {
		case errors.Is(err, flow.ErrRunNotFound):
			r.missing++
			if lossAt.Sub(at) > syncInterval {
				r.missingOld++
			}
		case err != nil:
			t.Fatalf("inspect %s: %v", id, err)
		}
	}
	return r
}

// ackReader collects what the engine process prints: "ready", then "ack
// <run ID>" for each run that committed, with the time each line came.
type ackReader struct {
	ready chan struct{}
	mu    sync.Mutex
	acks  map[string]time.Time
	end   chan struct{}
	err   error
}

func readAcks(r io.Reader) *ackReader {
	a := &ackReader{ready: make(chan struct{}), acks: make(map[string]time.Time), end: make(chan struct{})}
	go func() {
		defer close(a.end)
		sc := bufio.NewScanner(r)
		readyOnce := sync.OnceFunc(func() { close(a.ready) })
		for sc.Scan() {
			now := time.Now()
			switch line := sc.Text(); {
			case line == "ready":
				readyOnce()
			case strings.HasPrefix(line, "ack "):
				a.mu.Lock()
				a.acks[strings.TrimPrefix(line, "ack ")] = now
				a.mu.Unlock()
			}
		}
		a.err = sc.Err()
	}()
	return a
}

func (a *ackReader) waitReady(timeout time.Duration) error {
	select {
	case <-a.ready:
		return nil
	case <-a.end:
		return errors.New("exited before it was ready")
	case <-time.After(timeout):
		return fmt.Errorf("not ready after %s", timeout)
	}
}

// done returns the acknowledged runs once the engine's output ended.
func (a *ackReader) done() map[string]time.Time {
	<-a.end
	return a.acks
}

func logFile(t *testing.T, dir, name string) *os.File {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(f.Name()); err == nil && len(b) > 0 {
				t.Logf("%s:\n%s", name, tail(b, 4000))
			}
		}
		f.Close()
	})
	return f
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// litestreamBinary finds the litestream binary (see the package doc), or
// builds it; it skips the test when it can do neither, or fails it when
// FLOWLITE_REQUIRE_LITESTREAM=1.
func litestreamBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLOWLITE_LITESTREAM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("litestream"); err == nil {
		return p
	}
	for _, dir := range goBinDirs() {
		if p := filepath.Join(dir, "litestream"); isFile(p) {
			return p
		}
	}
	cache, err := os.UserCacheDir()
	if err == nil {
		bin := filepath.Join(cache, "flowlite", "litestream-"+litestreamVersion)
		if p := filepath.Join(bin, "litestream"); isFile(p) {
			return p
		}
		// The first build downloads and compiles Litestream's cloud SDKs
		// (minutes); it must end before the test binary's deadline.
		ctx := context.Background()
		if d, ok := t.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-time.Minute))
			defer cancel()
		}
		cmd := exec.CommandContext(ctx, "go", "install", "github.com/benbjohnson/litestream/cmd/litestream@"+litestreamVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+bin, "CGO_ENABLED=0", "GOFLAGS=")
		var b []byte
		if b, err = cmd.CombinedOutput(); err == nil {
			return filepath.Join(bin, "litestream")
		}
		err = fmt.Errorf("%v: %s", err, tail(b, 2000))
	}
	msg := fmt.Sprintf("no litestream binary, and building it failed (%v): install it with `go install github.com/benbjohnson/litestream/cmd/litestream@%s` or name it in FLOWLITE_LITESTREAM", err, litestreamVersion)
	if os.Getenv("FLOWLITE_REQUIRE_LITESTREAM") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// goBinDirs are where go install puts binaries.
func goBinDirs() []string {
	var dirs []string
	if d := os.Getenv("GOBIN"); d != "" {
		dirs = append(dirs, d)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, p := range filepath.SplitList(strings.TrimSpace(string(out))) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if runtime.GOOS == "windows" {
		return nil // the experiment sends SIGKILL; it runs on Unix
	}
	return dirs
}

func isFile(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.Mode().IsRegular()
}

// waitForFile waits until a regular file exists somewhere under dir.
func waitForFile(dir string, timeout time.Duration) error {
	return waitUntil("file under "+dir, timeout, func() (bool, error) {
		found := false
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				found = true
				return fs.SkipAll
			}
			return nil
		})
		return found, nil
	})
}
