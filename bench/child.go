package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// params are what one child (one scenario of one system) is told.
type params struct {
	System   string
	Scenario string
	N        int
	Procs    int
	Dir      string // SQLite scenarios: a fresh directory
	PGDSN    string // PostgreSQL scenarios: the server's maintenance database
	DSN      string // workers: the scenario's own database
}

// result is what a child prints: the figure, and what it needs to report
// beyond its own rusage.
type result struct {
	// Value is the figure: jobs/s, workflows/s, or p99 milliseconds.
	Value float64 `json:"value"`
	// P50 is the median latency of latency scenarios, in milliseconds.
	P50 float64 `json:"p50,omitempty"`
	// Done is how many jobs or workflows the scenario saw finish (or
	// latency samples it took): the smoke test checks it equals N.
	Done int `json:"done"`
	// RSSKB, when set, is the peak RSS of the child and the processes it
	// started, summed: a parent's rusage has only the largest of them.
	RSSKB int64 `json:"rss_kb,omitempty"`
	// CommitsPer and RowsPer are, on PostgreSQL, the transactions committed
	// and the rows written (inserted, updated, deleted) in the database per
	// job or workflow while the workers drained it: what the server had to
	// do for each.
	CommitsPer float64 `json:"commits_per,omitempty"`
	RowsPer    float64 `json:"rows_per,omitempty"`
	// ServerCPUPer and WorkerCPUPer are the CPU microseconds per job or
	// workflow that the PostgreSQL server (when it runs on this machine)
	// and the worker processes used while they drained: the two cores'
	// time, split between the database and the engine.
	ServerCPUPer float64 `json:"server_cpu_us_per,omitempty"`
	WorkerCPUPer float64 `json:"worker_cpu_us_per,omitempty"`
	// Held says how closely a flow control scenario's limit held (see
	// limits.go).
	Held string `json:"held,omitempty"`
}

// scenarioFunc runs one scenario of one system in this process.
type scenarioFunc func(ctx context.Context, p params) (result, error)

// workerFunc is the body of one worker process of a multi-process scenario:
// it prepares, calls ready, waits for go, works until stop is closed, and
// returns what it measured (latency samples in milliseconds, if any).
type workerFunc func(ctx context.Context, p params, ready func(), start, stop <-chan struct{}) ([]float64, error)

func runChild(ctx context.Context, p params) (result, error) {
	f, ok := childScenarios()[p.System+"/"+p.Scenario]
	if !ok {
		return result{}, fmt.Errorf("no scenario %s of system %s", p.Scenario, p.System)
	}
	r, err := f(ctx, p)
	if err != nil {
		return result{}, fmt.Errorf("%s %s: %w", p.System, p.Scenario, err)
	}
	return r, nil
}

// runWorker is a worker process: it prints "ready" once prepared, starts
// working at the line "go" on stdin, stops at the end of stdin, and prints
// its latency samples as JSON.
func runWorker(ctx context.Context, p params) error {
	f, ok := workerScenarios()[p.System+"/"+p.Scenario]
	if !ok {
		return fmt.Errorf("no worker for scenario %s of system %s", p.Scenario, p.System)
	}
	start, stop := make(chan struct{}), make(chan struct{})
	go func() {
		in := bufio.NewReader(os.Stdin)
		if line, err := in.ReadString('\n'); err == nil && line == "go\n" {
			close(start)
		}
		_, _ = io.Copy(io.Discard, in)
		close(stop)
	}()
	ready := func() { fmt.Println("ready") }
	samples, err := f(ctx, p, ready, start, stop)
	if err != nil {
		return fmt.Errorf("worker %s %s: %w", p.System, p.Scenario, err)
	}
	return json.NewEncoder(os.Stdout).Encode(samples)
}

// started waits for the worker's go, and reports false if it was told to
// stop first (its parent gave up before the start).
func started(start, stop <-chan struct{}) bool {
	select {
	case <-start:
		return true
	case <-stop:
		return false
	}
}

// workerProcs are the worker processes of one multi-process scenario.
type workerProcs struct {
	procs []*workerProc
}

type workerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	// cpuAtGo is the CPU time the worker had used getting ready, when it
	// was told to start: stop leaves it out of the work's.
	cpuAtGo time.Duration
}

// startWorkers starts n worker processes of the scenario on dsn and waits
// until every one is ready.
func startWorkers(ctx context.Context, p params, dsn string, n int) (*workerProcs, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	w := &workerProcs{}
	for i := range n {
		cmd := exec.CommandContext(ctx, self, "-worker", "-system", p.System, "-scenario", p.Scenario,
			"-n", strconv.Itoa(p.N), "-dsn", dsn)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			w.kill()
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			w.kill()
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		if err := cmd.Start(); err != nil {
			w.kill()
			return nil, fmt.Errorf("start worker %d: %w", i, err)
		}
		w.procs = append(w.procs, &workerProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)})
	}
	for i, wp := range w.procs {
		line, err := wp.out.ReadString('\n')
		if err != nil || line != "ready\n" {
			w.kill()
			return nil, fmt.Errorf("worker %d did not get ready: %q, %v", i, line, err)
		}
	}
	return w, nil
}

// goAll tells every worker to start and returns the time it did.
func (w *workerProcs) goAll() (time.Time, error) {
	t := time.Now()
	for i, wp := range w.procs {
		wp.cpuAtGo = processCPU(wp.cmd.Process.Pid)
		if _, err := io.WriteString(wp.stdin, "go\n"); err != nil {
			return t, fmt.Errorf("start worker %d: %w", i, err)
		}
	}
	return t, nil
}

// workersDone is what stop gathers from the workers.
type workersDone struct {
	samples []float64     // their latency samples, in milliseconds
	rssKB   int64         // the sum of their peak RSS
	cpu     time.Duration // the CPU time they used after goAll, summed
}

// stop ends every worker (closing its stdin), waits for it, and returns
// what they measured and used.
func (w *workerProcs) stop() (done workersDone, err error) {
	for _, wp := range w.procs {
		_ = wp.stdin.Close()
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i, wp := range w.procs {
		wg.Go(func() {
			var s []float64
			decErr := json.NewDecoder(wp.out).Decode(&s)
			waitErr := wp.cmd.Wait()
			mu.Lock()
			defer mu.Unlock()
			if waitErr != nil {
				errs = append(errs, fmt.Errorf("worker %d: %w", i, waitErr))
				return
			}
			if decErr != nil {
				errs = append(errs, fmt.Errorf("worker %d: read samples: %w", i, decErr))
				return
			}
			done.samples = append(done.samples, s...)
			if ru, ok := wp.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				done.rssKB += ru.Maxrss
			}
			done.cpu += wp.cmd.ProcessState.UserTime() + wp.cmd.ProcessState.SystemTime() - wp.cpuAtGo
		})
	}
	wg.Wait()
	return done, errors.Join(errs...)
}

func (w *workerProcs) kill() {
	for _, wp := range w.procs {
		_ = wp.cmd.Process.Kill()
		_ = wp.cmd.Wait()
	}
}

// selfRSSKB is this process's own peak RSS in KiB.
func selfRSSKB() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss
}

// waitFor polls done every interval until it reports true, and returns
// when it first did.
func waitFor(ctx context.Context, interval time.Duration, done func() (bool, error)) (time.Time, error) {
	for {
		ok, err := done()
		if err != nil {
			return time.Time{}, err
		}
		if ok {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// latencyResult turns samples (milliseconds) into a result: p99 as the
// value, p50 beside it.
func latencyResult(samples []float64) result {
	if len(samples) == 0 {
		return result{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	at := func(q float64) float64 { return s[int(q*float64(len(s)-1))] }
	return result{Value: at(0.99), P50: at(0.5), Done: len(s)}
}

// pace calls f n times at rate per second from one goroutine, on a fixed
// schedule (a late call does not shift the later ones), and stops at the
// first error.
func pace(ctx context.Context, n int, rate float64, f func(i int) error) error {
	interval := time.Duration(float64(time.Second) / rate)
	begin := time.Now()
	for i := range n {
		if d := time.Until(begin.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		if err := f(i); err != nil {
			return err
		}
	}
	return nil
}

// sinceMS is the time since t, in milliseconds, with t in Unix nanoseconds
// as a producer recorded it (same host, so the wall clock is shared).
func sinceMS(unixNano int64) float64 {
	return float64(time.Now().UnixNano()-unixNano) / 1e6
}

// latencyRate is the start rate of the latency scenarios, per second.
const latencyRate = 200
