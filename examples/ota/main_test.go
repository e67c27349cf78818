package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/flow"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rollout runs the program on a fresh database and fails the test on error.
func rollout(t *testing.T, args ...string) (*outcome, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ota.db")
	var stdout bytes.Buffer
	out, err := runOTA(testContext(t), append([]string{"-db", path}, args...), &stdout)
	if err != nil {
		t.Fatalf("run %q: %v\n%s", args, err, stdout.String())
	}
	return out, stdout.String()
}

// states counts the final device states per wave.
func states(out *outcome) map[string]map[string]int {
	m := make(map[string]map[string]int)
	for _, w := range out.waves {
		m[w.Wave.Name] = w.States
	}
	return m
}

// checkPartition checks that every device of the fleet is in exactly one
// final state and that the states add up to the fleet.
func checkPartition(t *testing.T, out *outcome) {
	t.Helper()
	seen := make(map[string]string, out.plan.Devices)
	sum := 0
	for _, d := range out.devices {
		if prev, dup := seen[d.Device]; dup {
			t.Errorf("%s is both %s and %s", d.Device, prev, d.Final)
		}
		seen[d.Device] = d.Final
	}
	for i := range out.plan.Devices {
		if _, ok := seen[deviceID(i)]; !ok {
			t.Errorf("%s has no final state", deviceID(i))
		}
	}
	for _, w := range out.waves {
		for _, n := range w.States {
			sum += n
		}
	}
	if sum != out.plan.Devices || len(out.devices) != out.plan.Devices {
		t.Errorf("states sum to %d over %d device results, want %d", sum, len(out.devices), out.plan.Devices)
	}
	if problems := out.check(); len(problems) > 0 {
		t.Errorf("check: %q", problems)
	}
}

// The tests run small fleets: modernc.org/sqlite is Go, so the race detector
// instruments the whole database engine and slows it down tenfold. The
// default 10,000 devices take about 15 s without it (see the README).

// TestRolloutCompletes runs the good build on 400 devices in batches of 50
// with seed 1 and checks every count, the timeline and the report.
func TestRolloutCompletes(t *testing.T) {
	t.Parallel()
	out, text := rollout(t, "-devices", "400", "-batch", "50", "-seed", "1")
	checkPartition(t, out)
	if strings.Contains(text, "cancelled") {
		t.Error("the report mentions cancelled devices, but none was")
	}
	if out.err != nil {
		t.Fatalf("rollout: %v", out.err)
	}
	if want := []string{"canary", "early", "rest"}; !reflect.DeepEqual(out.summary.Waves, want) {
		t.Errorf("summary waves %q, want %q", out.summary.Waves, want)
	}
	want := map[string]map[string]int{
		"canary": {stateUpdated: 4},
		"early":  {stateUpdated: 40},
		"rest":   {stateUpdated: 351, stateRolledBack: 3, stateFailed: 2},
	}
	if got := states(out); !reflect.DeepEqual(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	if got, want := out.retries, map[string]int{"download": 88, "verify": 22}; !reflect.DeepEqual(got, want) {
		t.Errorf("retries %v, want %v", got, want)
	}
	if got := out.engine; got[flow.StatusCompleted] != 11 || len(got) != 1 {
		t.Errorf("Engine.CountRuns = %v, want 11 completed (the rollout and 10 batches)", got)
	}
	// The simulated timeline is the same on every machine.
	type times struct{ started, done, gate time.Duration }
	wantTimes := []times{
		{0, 7 * time.Minute, 67 * time.Minute},
		{67 * time.Minute, 81 * time.Minute, 111 * time.Minute},
		{111 * time.Minute, 125 * time.Minute, 155 * time.Minute},
	}
	for i, w := range out.waves {
		got := times{w.Report.Started.Sub(simStart), w.Report.Done.Sub(simStart), w.GateAt.Sub(simStart)}
		if got != wantTimes[i] {
			t.Errorf("wave %s: started, done, gate at %v, want %v", w.Wave.Name, got, wantTimes[i])
		}
		if !w.Gate.Pass || !w.Released || w.Reverted {
			t.Errorf("wave %s: gate %+v, released %v, reverted %v", w.Wave.Name, *w.Gate, w.Released, w.Reverted)
		}
	}
	if out.simulated != 155*time.Minute {
		t.Errorf("simulated %s, want 2h35m", out.simulated)
	}
	for _, re := range []string{
		`(?m)^Rollout completed: 3 waves passed their health gate\.$`,
		`(?m)^Took \d+ms of real time for 2h35m of simulated time\.$`,
		`(?m)^  wave +devices +batches +updated +rolled back +failed +reverted +not reached$`,
		`(?m)^  canary +4 +1 +4 +0 +0 +0 +0$`,
		`(?m)^  rest +356 +8 +351 +3 +2 +0 +0$`,
		`(?m)^  total +400 +10 +395 +3 +2 +0 +0$`,
		`(?m)^ +2  download: device <device> unreachable: no heartbeat for 6h$`,
		`(?m)^  download +88  on 54 devices, backoff 1m, 2m, 4m$`,
		`(?m)^  health check +22  on 22 devices, backoff 2m, 4m$`,
		`(?m)^  early +\+1h07m +\+1h21m +30m +\+1h51m  pass: 0 of 40 booted devices rolled back: 0\.0% ≤ 5\.0%$`,
		`(?m)^  \+2h35m  rollout completed$`,
		`(?m)^History of dev-00020, updated after 3 download retries \(wave early, run rollout-2\.4\.0/early/batch-001, branch 15\)$`,
		`(?m)^  \+1h08m  step_retried +download +2  download to dev-00020 interrupted at 50%: connection reset; next attempt in 2m0s$`,
		`(?m)^  \+1h14m  step_completed +download +4$`,
		`(?m)^  \+1h14m  timer_started +flow\.sleep +until 2025-06-02T23:19:00Z$`,
		`(?m)^  \+1h59m  step_failed +verify +1  device dev-00103 \(rev A\): boot loop`,
		`(?m)^  \+1h59m  step_completed +rollback +1$`,
		`(?m)^  \+1h58m  step_failed +download +4  device dev-00229 unreachable`,
		`(?m)^Consistency: OK`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output does not match %s", re)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// TestRolloutHaltsAndReverts runs a build that boot-loops on revision B (30%
// of the fleet) behind a lenient 35% gate: the canary passes, the early wave
// does not, and the engine reverts both waves, the last one first.
func TestRolloutHaltsAndReverts(t *testing.T) {
	t.Parallel()
	out, text := rollout(t, "-devices", "400", "-batch", "50", "-seed", "16", "-bad-rev", "B", "-max-rolled-back", "35")
	checkPartition(t, out)
	var rb *flow.RolledBackError
	if !errors.As(out.err, &rb) || !strings.HasPrefix(rb.Cause, "health gate halted the rollout at wave early: 17 of 40") {
		t.Fatalf("rollout err %v, want rolled back by the early wave's gate", out.err)
	}
	want := map[string]map[string]int{
		"canary": {stateReverted: 4},
		"early":  {stateReverted: 23, stateRolledBack: 17},
		"rest":   {stateNotReached: 356},
	}
	if got := states(out); !reflect.DeepEqual(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	// Every device runs the old firmware again, and the registry is empty.
	for i := range out.plan.Devices {
		if s := out.fleet.State(deviceID(i)); s.Running != oldFirmware || s.Released {
			t.Fatalf("%s runs %s, released %v", deviceID(i), s.Running, s.Released)
		}
	}
	// The releases were compensated in reverse order.
	var reverts []int
	for _, ev := range out.history {
		if ev.Kind == flow.EventCompensationCompleted && ev.Step == "release_wave" {
			reverts = append(reverts, ev.Occurrence)
		}
	}
	if !reflect.DeepEqual(reverts, []int{1, 0}) {
		t.Errorf("release_wave compensations by occurrence %v, want [1 0]", reverts)
	}
	if out.rollout.Status != flow.StatusFailed {
		t.Errorf("rollout status %s, want failed", out.rollout.Status)
	}
	for _, re := range []string{
		`(?m)^Rollout HALTED and rolled back: health gate halted the rollout at wave early: 17 of 40 booted devices rolled back: 42\.5% > 35\.0%$`,
		`(?m)^  rest +356 +0 +0 +0 +0 +0 +356$`,
		`(?m)^  rest +- +- +- +- +not reached$`,
		`(?m)^  \+1h54m  compensation: wave early reverted \(23 devices back on 2\.3\.9\)\n  \+1h54m  compensation: wave canary reverted \(4 devices back on 2\.3\.9\)$`,
		`(?m)^History of dev-\d+, updated after .*, then reverted with the rollout`,
		`(?m)^Consistency: OK`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output does not match %s", re)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// TestRolloutCancelled has an operator cancel the rollout while the early
// wave's batch waits for its devices to boot: the engine cancels the batch,
// whose reboot compensations roll its 40 devices back, and reverts the
// canary's release.
func TestRolloutCancelled(t *testing.T) {
	t.Parallel()
	out, text := rollout(t, "-devices", "400", "-batch", "50", "-seed", "1", "-cancel-at", "1h17m")
	checkPartition(t, out)
	if !errors.Is(out.err, flow.ErrCancelled) {
		t.Fatalf("rollout err %v, want cancelled", out.err)
	}
	want := map[string]map[string]int{
		"canary": {stateReverted: 4},
		"early":  {stateCancelled: 40},
		"rest":   {stateNotReached: 356},
	}
	if got := states(out); !reflect.DeepEqual(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
	for _, d := range out.devices {
		s := out.fleet.State(d.Device)
		if d.Wave == "early" && (s.Reboots != 1 || s.Rollbacks != 1 || s.Running != oldFirmware) {
			t.Errorf("%s: %d reboots, %d rollbacks, runs %s; want rebooted, then rolled back to %s", d.Device, s.Reboots, s.Rollbacks, s.Running, oldFirmware)
		}
	}
	if got := out.engine; got[flow.StatusCompleted] != 1 || got[flow.StatusCancelled] != 2 || len(got) != 2 {
		t.Errorf("Engine.CountRuns = %v, want the canary batch completed, the rollout and the early batch cancelled", got)
	}
	for _, re := range []string{
		`(?m)^operator:  cancels the rollout at \+1h17m$`,
		`(?m)^Rollout CANCELLED by the operator, and rolled back\.$`,
		`(?m)^  early +40 +1 +0 +0 +0 +0 +40 +0$`,
		`(?m)^  early +- +- +- +- +cancelled with 1 batch run\(s\) in flight$`,
		`(?m)^  \+1h17m  compensation: wave canary reverted \(4 devices back on 2\.3\.9\)$`,
		`(?m)^  \+1h17m  rollout cancelled$`,
		`(?m)^History of dev-\d+, cancelled while its batch waited for the reboot`,
		`(?m)^  \+1h17m  cancel_requested +parent rollout-2\.4\.0 was cancelled; compensations run when an engine claims it$`,
		`(?m)^  \+1h17m  compensation_completed +reboot +1$`,
		`(?m)^Consistency: OK`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("output does not match %s", re)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// TestRolloutIsDeterministic runs one seed twice: every device's result,
// every wave's report and the simulated timeline are the same.
func TestRolloutIsDeterministic(t *testing.T) {
	t.Parallel()
	a, _ := rollout(t, "-devices", "120", "-seed", "42", "-batch", "20")
	b, _ := rollout(t, "-devices", "120", "-seed", "42", "-batch", "20")
	checkPartition(t, a)
	checkPartition(t, b)
	if !reflect.DeepEqual(a.devices, b.devices) {
		t.Error("device results differ between two runs of one seed")
	}
	for i := range a.waves {
		wa, wb := a.waves[i], b.waves[i]
		if !reflect.DeepEqual(wa.Report, wb.Report) || !reflect.DeepEqual(wa.Gate, wb.Gate) || !wa.GateAt.Equal(wb.GateAt) {
			t.Errorf("wave %s differs: %+v %+v at %s vs %+v %+v at %s", wa.Wave.Name, wa.Report, wa.Gate, wa.GateAt, wb.Report, wb.Gate, wb.GateAt)
		}
	}
	if a.simulated != b.simulated || !reflect.DeepEqual(a.retries, b.retries) {
		t.Errorf("simulated %s vs %s, retries %v vs %v", a.simulated, b.simulated, a.retries, b.retries)
	}
	c, _ := rollout(t, "-devices", "120", "-seed", "43", "-batch", "20")
	if reflect.DeepEqual(a.devices, c.devices) {
		t.Error("seeds 42 and 43 tell the same story")
	}
}

// TestRolloutSmallFleets checks the partition for fleets smaller than a
// batch, a wave or the gate's resolution.
func TestRolloutSmallFleets(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-devices", "1"},
		{"-devices", "3", "-batch", "1"},
		{"-devices", "150", "-batch", "7", "-seed", "9"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			out, _ := rollout(t, args...)
			checkPartition(t, out)
		})
	}
}

// TestRunTempDatabase checks the default database: a temporary file,
// printed, and removed at exit unless -keep.
func TestRunTempDatabase(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		args := []string{"-devices", "20"}
		if keep {
			args = append(args, "-keep")
		}
		var stdout bytes.Buffer
		if err := run(testContext(t), args, &stdout); err != nil {
			t.Fatalf("run %q: %v", args, err)
		}
		m := regexp.MustCompile(`(?m)^database:  (\S+) `).FindStringSubmatch(stdout.String())
		if m == nil {
			t.Fatalf("run %q printed no database path:\n%s", args, stdout.String())
		}
		_, err := os.Stat(m[1])
		switch {
		case keep && err != nil:
			t.Errorf("-keep: database %s: %v", m[1], err)
		case !keep && !errors.Is(err, os.ErrNotExist):
			t.Errorf("database %s still exists (err %v)", m[1], err)
		}
		if keep {
			if err := os.RemoveAll(filepath.Dir(m[1])); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestRunRefusesUsedDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ota.db")
	args := []string{"-db", path, "-devices", "20"}
	if err := run(testContext(t), args, &bytes.Buffer{}); err != nil {
		t.Fatalf("first run: %v", err)
	}
	err := run(testContext(t), args, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "already holds a run rollout-2.4.0") {
		t.Fatalf("second run on the same database: err %v, want one saying it already holds the run", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-devices", "0"}, {"-devices", "x"}, {"-batch", "0"}, {"-bad-rev", "D"},
		{"-max-rolled-back", "101"}, {"-cancel-at", "-1h"}, {"-nope"}, {"extra"},
	} {
		if err := run(testContext(t), args, &bytes.Buffer{}); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
	if err := run(testContext(t), []string{"-h"}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run -h: err %v, want flag.ErrHelp", err)
	}
}
