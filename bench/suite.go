package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// suiteConfig is what the suite's flags say.
type suiteConfig struct {
	PGDSN  string
	Rounds int
	Scale  float64
	Only   string
	Out    string
	SVG    string
	JSON   string
	// BullMQ is the directory of the Node harness; default "bullmq" beside
	// the working directory (the suite runs from bench/).
	BullMQ string
	// PGLock is a file the suite holds an exclusive flock on while a
	// PostgreSQL scenario runs, so that whoever restarts the shared server
	// (holding the same lock) never does so mid-measurement.
	PGLock string
	// PGLockWait bounds the wait for PGLock (see pgLock); default 2m.
	PGLockWait time.Duration
}

// scenario is one row group of the table: one measurement, run for each of
// its systems.
type scenario struct {
	Name        string // as shown; {n} stands for N
	Key         string // the child's -scenario
	Unit        string
	LowerBetter bool // latency: flowlite ÷ peer below 1 is a win
	N           int
	Procs       int
	Systems     []string // the first is flowlite, the baseline of the ratios
}

// plan is every scenario of the suite, at scale 1, PostgreSQL first.
func plan() []scenario {
	var s []scenario
	pg := []string{"flowlite-pg", "river-pg"}
	// The drains also run flowlite's jobs with a lean record (LeanRecord).
	pgDrain := []string{"flowlite-pg", "flowlite-pg-lean", "river-pg"}
	// 20k, as in the SQLite group: River drains them in under a second, and
	// a smaller backlog let the workers' start weigh on its figure.
	for _, procs := range []int{1, 2, 4} {
		s = append(s, scenario{Name: fmt.Sprintf("PG: {n} jobs drained, %d worker process(es)", procs),
			Key: "pg-drain", Unit: "jobs/s", N: 20000, Procs: procs, Systems: pgDrain})
	}
	for _, procs := range []int{1, 2, 4} {
		s = append(s, scenario{Name: fmt.Sprintf("PG: {n} 3-step workflows, %d worker process(es)", procs),
			Key: "pg-workflows", Unit: "workflows/s", N: 2000, Procs: procs, Systems: pg})
	}
	s = append(s, scenario{Name: "PG: bulk insert of {n} jobs, 1,000 per call (EnqueueMany / InsertManyFast)",
		Key: "pg-bulk", Unit: "jobs/s", N: 20000, Procs: 1, Systems: pg})
	s = append(s, scenario{Name: "PG: p99 start→first step at 200/s, across processes (LISTEN/NOTIFY)",
		Key: "pg-latency", Unit: "ms p99", LowerBetter: true, N: 2000, Procs: 1, Systems: pg})
	queues := []string{"flowlite", "river-sqlite", "bullmq"}
	s = append(s,
		scenario{Name: "{n} jobs drained after a bulk insert", Key: "drain", Unit: "jobs/s", N: 20000,
			Systems: []string{"flowlite", "flowlite-lean", "river-sqlite", "bullmq"}},
		scenario{Name: "bulk insert of {n} jobs, 1,000 per transaction/call", Key: "bulk", Unit: "jobs/s", N: 20000, Systems: queues},
		scenario{Name: "enqueue {n} one by one, 1 caller", Key: "enqueue1", Unit: "jobs/s", N: 2000, Systems: queues},
		scenario{Name: "enqueue {n} one by one, 16 callers", Key: "enqueue16", Unit: "jobs/s", N: 5000, Systems: queues},
		scenario{Name: "{n} 3-step workflows", Key: "workflows", Unit: "workflows/s", N: 2000,
			Systems: []string{"flowlite", "go-workflows", "river-sqlite", "bullmq"}},
		scenario{Name: "p99 start→first step at 200/s, in-process", Key: "latency", Unit: "ms p99", LowerBetter: true, N: 1000,
			Systems: []string{"flowlite", "go-workflows", "river-sqlite", "bullmq"}},
	)
	return append(s, limitsPlan()...)
}

// childScenarios maps "system/scenario" to its implementation.
func childScenarios() map[string]scenarioFunc {
	m := map[string]scenarioFunc{
		"flowlite/drain":         flowliteDrainSQLite,
		"flowlite-lean/drain":    leanSQLite(flowliteDrainSQLite),
		"flowlite/bulk":          flowliteBulkSQLite,
		"flowlite/enqueue1":      flowliteEnqueueSQLite(1),
		"flowlite/enqueue16":     flowliteEnqueueSQLite(16),
		"flowlite/workflows":     flowliteWorkflowsSQLite,
		"flowlite/latency":       flowliteLatencySQLite,
		"go-workflows/workflows": goWorkflows,
		"go-workflows/latency":   goWorkflows,
	}
	for _, k := range []string{"drain", "bulk", "enqueue1", "enqueue16", "workflows", "latency"} {
		m["river-sqlite/"+k] = riverSQLite
	}
	for k := range limitScenarios() {
		m["flowlite-limited/"+k] = limitsDrain(k, true)
		m["flowlite/"+k] = limitsDrain(k, false)
	}
	for _, sys := range []pgSystem{flowlitePG, leanPG(flowlitePG), riverPG} {
		m[sys.name+"/pg-drain"] = sys.throughput
		m[sys.name+"/pg-workflows"] = sys.throughput
		m[sys.name+"/pg-latency"] = sys.latency
		m[sys.name+"/pg-bulk"] = sys.bulkInsert
	}
	return m
}

// workerScenarios maps "system/scenario" to the worker process of a
// PostgreSQL scenario.
func workerScenarios() map[string]workerFunc {
	m := map[string]workerFunc{}
	for _, sys := range []pgSystem{flowlitePG, leanPG(flowlitePG), riverPG} {
		for _, k := range []string{"pg-drain", "pg-workflows", "pg-latency"} {
			m[sys.name+"/"+k] = sys.worker
		}
	}
	return m
}

// measurement is one child's outcome.
type measurement struct {
	Scenario string  `json:"scenario"`
	System   string  `json:"system"`
	Round    int     `json:"round"`
	Value    float64 `json:"value"`
	P50      float64 `json:"p50,omitempty"`
	Done     int     `json:"done"`
	N        int     `json:"n"`
	RSSMiB   float64 `json:"rss_mib"`
	CPUSec   float64 `json:"cpu_s"`
	WallSec  float64 `json:"wall_s"`
	Err      string  `json:"error,omitempty"`
	Warning  string  `json:"warning,omitempty"`
	// Held says how closely a flow control scenario's limit held.
	Held string `json:"held,omitempty"`
	// CommitsPer, RowsPer, ServerCPUPer and WorkerCPUPer: see result.
	CommitsPer   float64 `json:"commits_per,omitempty"`
	RowsPer      float64 `json:"rows_per,omitempty"`
	ServerCPUPer float64 `json:"server_cpu_us_per,omitempty"`
	WorkerCPUPer float64 `json:"worker_cpu_us_per,omitempty"`
}

// report is the suite's outcome: the plan as run and every measurement.
type report struct {
	Scenarios    []scenario    `json:"scenarios"`
	Measurements []measurement `json:"measurements"`
}

func runSuite(ctx context.Context, cfg suiteConfig, out io.Writer) (report, error) {
	cfg.BullMQ = cmpOr(cfg.BullMQ, "bullmq")
	cfg.PGLock = cmpOr(cfg.PGLock, "/tmp/flowlite-pg.lock")
	if cfg.PGLockWait <= 0 {
		cfg.PGLockWait = 2 * time.Minute
	}
	var rep report
	for _, s := range plan() {
		if cfg.Only != "" && !strings.Contains(s.Key+" "+s.Name, cfg.Only) {
			continue
		}
		s.N = max(1, int(math.Round(float64(s.N)*cfg.Scale)))
		s.Name = strings.ReplaceAll(s.Name, "{n}", countName(s.N))
		rep.Scenarios = append(rep.Scenarios, s)
	}
	self, err := os.Executable()
	if err != nil {
		return rep, fmt.Errorf("find own executable: %w", err)
	}
	if err := installBullMQ(ctx, cfg.BullMQ, rep.Scenarios); err != nil {
		return rep, err
	}
	lk := &pgLock{path: cfg.PGLock, wait: cfg.PGLockWait}
	began := time.Now()
	for round := 1; round <= cfg.Rounds; round++ {
		for _, s := range rep.Scenarios {
			for _, sys := range s.Systems {
				m := runOne(ctx, cfg, lk, self, s, sys, round)
				fmt.Fprintf(os.Stderr, "round %d  %-60s %-13s %10.2f %-12s rss %6.1f MiB  cpu %6.2f s  wall %6.1f s  %s%s%s\n",
					round, s.Name, sys, m.Value, s.Unit, m.RSSMiB, m.CPUSec, m.WallSec, m.Err, m.Warning, m.Held)
				rep.Measurements = append(rep.Measurements, m)
				if ctx.Err() != nil {
					return rep, ctx.Err()
				}
			}
		}
	}
	fmt.Fprintf(os.Stderr, "suite took %s\n", time.Since(began).Round(time.Second))
	return rep, writeReport(rep, cfg, out)
}

// writeReport prints the table of rep and writes the files cfg names.
func writeReport(rep report, cfg suiteConfig, out io.Writer) error {
	table := markdownTable(rep) + "\n" + scalingTable(rep)
	fmt.Fprint(out, table)
	var errs []error
	if cfg.Out != "" {
		errs = append(errs, os.WriteFile(cfg.Out, []byte(table), 0o644))
	}
	if cfg.SVG != "" {
		errs = append(errs, os.WriteFile(cfg.SVG, []byte(chartSVG(rep)), 0o644))
	}
	if cfg.JSON != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		errs = append(errs, err, os.WriteFile(cfg.JSON, b, 0o644))
	}
	return errors.Join(errs...)
}

// rerender prints the table and writes the chart of a report saved with
// -json, without running anything.
func rerender(path string, cfg suiteConfig, out io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read report: %w", err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("read report %s: %w", path, err)
	}
	cfg.JSON = ""
	return writeReport(rep, cfg, out)
}

// scalingTable shows how each system's throughput grows with worker
// processes: the PostgreSQL scenarios run at 1, 2 and 4.
func scalingTable(rep report) string {
	type row struct {
		key, sys string
	}
	var rows []row
	byProcs := map[row]map[int]float64{}
	var procs []int
	for _, s := range rep.Scenarios {
		if s.Procs == 0 || s.LowerBetter {
			continue
		}
		for _, sys := range s.Systems {
			r := row{s.Key + " (" + s.Unit + ")", sys}
			if byProcs[r] == nil {
				byProcs[r] = map[int]float64{}
				rows = append(rows, r)
			}
			byProcs[r][s.Procs] = summarize(rep, s, sys).Value
		}
		if !slices.Contains(procs, s.Procs) {
			procs = append(procs, s.Procs)
		}
	}
	if len(rows) == 0 {
		return ""
	}
	slices.Sort(procs)
	var b strings.Builder
	b.WriteString("| scenario | system |")
	for _, p := range procs {
		fmt.Fprintf(&b, " %d process(es) |", p)
	}
	fmt.Fprintf(&b, " %d ÷ %d |\n|---|---|", procs[len(procs)-1], procs[0])
	for range procs {
		b.WriteString("--:|")
	}
	b.WriteString("--:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s |", r.key, r.sys)
		for _, p := range procs {
			fmt.Fprintf(&b, " %s |", fmtNum(byProcs[r][p]))
		}
		fmt.Fprintf(&b, " %s |\n", fmtNum(byProcs[r][procs[len(procs)-1]]/byProcs[r][procs[0]]))
	}
	return b.String()
}

// runOne runs one scenario of one system as a child process and measures
// it: the child's figure, and its rusage (peak RSS, CPU seconds of it and
// of the processes it started and waited for).
func runOne(ctx context.Context, cfg suiteConfig, lk *pgLock, self string, s scenario, sys string, round int) measurement {
	m := measurement{Scenario: s.Name, System: sys, Round: round, N: s.N}
	dir, err := os.MkdirTemp("", "flbench-")
	if err != nil {
		m.Err = err.Error()
		return m
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if sys == "bullmq" {
		cmd = exec.CommandContext(ctx, "node", filepath.Join(cfg.BullMQ, "bench.mjs"), s.Key, strconv.Itoa(s.N), dir)
	} else {
		cmd = exec.CommandContext(ctx, self, "-child", "-system", sys, "-scenario", s.Key, "-n", strconv.Itoa(s.N),
			"-procs", strconv.Itoa(max(1, s.Procs)), "-dir", dir, "-pg", cfg.PGDSN)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if strings.HasPrefix(s.Key, "pg-") {
		unlock, warning, err := lk.lock()
		if err != nil {
			m.Err = err.Error()
			return m
		}
		defer unlock()
		m.Warning = warning
	}
	start := time.Now()
	err = cmd.Run()
	m.WallSec = time.Since(start).Seconds()
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.CPUSec = tvSec(ru.Utime) + tvSec(ru.Stime)
			m.RSSMiB = float64(ru.Maxrss) / 1024
		}
	}
	if err != nil {
		m.Err = fmt.Sprintf("%v: %s", err, lastLine(stderr.String()))
		return m
	}
	var r result
	if err := json.Unmarshal(lastLineBytes(stdout.Bytes()), &r); err != nil {
		m.Err = fmt.Sprintf("read result: %v: %q", err, lastLine(stdout.String()))
		return m
	}
	m.Value, m.P50, m.Done, m.CommitsPer, m.RowsPer = r.Value, r.P50, r.Done, r.CommitsPer, r.RowsPer
	m.ServerCPUPer, m.WorkerCPUPer, m.Held = r.ServerCPUPer, r.WorkerCPUPer, r.Held
	if r.RSSKB > 0 {
		m.RSSMiB = float64(r.RSSKB) / 1024
	}
	return m
}

// installBullMQ installs the Node harness's locked dependencies when a
// scenario needs them and they are missing (a fresh clone).
func installBullMQ(ctx context.Context, dir string, scenarios []scenario) error {
	needed := slices.ContainsFunc(scenarios, func(s scenario) bool { return slices.Contains(s.Systems, "bullmq") })
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "bullmq")); !needed || err == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s: %w", dir, err)
	}
	return nil
}

// pgLock is the exclusive flock the suite holds while a PostgreSQL
// scenario runs. If the lock is not had within wait, the scenario runs
// without it, with a warning on stderr and in the measurement: a server
// started by a process that held the lock inherits its descriptor and so
// holds the lock for as long as it runs, which would otherwise stall the
// suite for good. After one such timeout, later scenarios only try once.
type pgLock struct {
	path  string
	wait  time.Duration
	stuck bool
}

func (l *pgLock) lock() (unlock func(), warning string, err error) {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, "", fmt.Errorf("open lock %s: %w", l.path, err)
	}
	deadline := time.Now().Add(l.wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			l.stuck = false
			return func() { f.Close() }, "", nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, "", fmt.Errorf("lock %s: %w", l.path, err)
		}
		if l.stuck || time.Now().After(deadline) {
			l.stuck = true
			f.Close()
			w := fmt.Sprintf("ran without %s: held elsewhere for over %s", l.path, l.wait)
			fmt.Fprintln(os.Stderr, "bench: warning:", w)
			return func() {}, w, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tvSec(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func lastLineBytes(b []byte) []byte { return []byte(lastLine(string(b))) }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// summary is the medians of one scenario of one system over the rounds.
type summary struct {
	Value, P50, RSSMiB, CPUSec float64
	CommitsPer, RowsPer        float64
	ServerCPUPer, WorkerCPUPer float64
	Values                     []float64
	Failed, Unlocked           int
	Held                       string
}

func summarize(rep report, s scenario, sys string) summary {
	var v, p, r, c, cp, rp, sc, wc []float64
	var sum summary
	for _, m := range rep.Measurements {
		if m.Scenario != s.Name || m.System != sys {
			continue
		}
		if m.Err != "" {
			sum.Failed++
			continue
		}
		if m.Warning != "" {
			sum.Unlocked++
		}
		if m.Held != "" {
			sum.Held = m.Held // the last round's
		}
		v, p, r, c = append(v, m.Value), append(p, m.P50), append(r, m.RSSMiB), append(c, m.CPUSec)
		cp, rp = append(cp, m.CommitsPer), append(rp, m.RowsPer)
		sc, wc = append(sc, m.ServerCPUPer), append(wc, m.WorkerCPUPer)
	}
	sum.CommitsPer, sum.RowsPer = median(cp), median(rp)
	sum.ServerCPUPer, sum.WorkerCPUPer = median(sc), median(wc)
	sum.Value, sum.P50, sum.RSSMiB, sum.CPUSec, sum.Values = median(v), median(p), median(r), median(c), v
	return sum
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// markdownTable is one row per scenario and system: the median, the ratio
// flowlite ÷ system, every round's figure, and the medians of peak RSS and
// CPU seconds.
func markdownTable(rep report) string {
	var b strings.Builder
	b.WriteString("| scenario | system | median | flowlite ÷ system | rounds | peak RSS MiB | CPU s |\n")
	b.WriteString("|---|---|--:|--:|---|--:|--:|\n")
	for _, s := range rep.Scenarios {
		base := summarize(rep, s, s.Systems[0])
		for _, sys := range s.Systems {
			sum := summarize(rep, s, sys)
			ratio := "—"
			if sys != s.Systems[0] {
				ratio = fmtNum(base.Value / sum.Value)
				if s.LowerBetter {
					ratio += " (lower is better)"
				}
			}
			val := fmtNum(sum.Value) + " " + s.Unit
			if s.LowerBetter && !math.IsNaN(sum.P50) {
				val += fmt.Sprintf(" (p50 %s)", fmtNum(sum.P50))
			}
			if sum.CommitsPer > 0 {
				val += fmt.Sprintf(" (%s commits, %s rows written each", fmtNum(sum.CommitsPer), fmtNum(sum.RowsPer))
				if sum.ServerCPUPer > 0 {
					val += fmt.Sprintf("; CPU µs each: server %s, workers %s", fmtNum(sum.ServerCPUPer), fmtNum(sum.WorkerCPUPer))
				}
				val += ")"
			}
			if sum.Held != "" {
				val += " (" + sum.Held + ")"
			}
			var rounds []string
			for _, v := range sum.Values {
				rounds = append(rounds, fmtNum(v))
			}
			if sum.Failed > 0 {
				rounds = append(rounds, fmt.Sprintf("%d failed", sum.Failed))
			}
			if sum.Unlocked > 0 {
				rounds = append(rounds, fmt.Sprintf("%d without the PG lock", sum.Unlocked))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f | %.1f |\n",
				s.Name, sys, val, ratio, strings.Join(rounds, ", "), sum.RSSMiB, sum.CPUSec)
		}
	}
	return b.String()
}

// countName is n as the scenario names say it: 20k, 2,500, 20.
func countName(n int) string {
	switch {
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	case n >= 1000:
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return strconv.Itoa(n)
}

// fmtNum prints a figure with three significant digits or so.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case a >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
