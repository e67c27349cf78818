package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// outcome is everything the report shows, read back from the engine.
type outcome struct {
	plan  Plan
	fleet *fleet
	o     *ota

	elapsed   time.Duration // real time, from the start of the rollout until every run settled
	simulated time.Duration // simulated time, likewise

	summary Summary // the rollout's output, when it completed
	err     error   // the rollout's Result error, e.g. a *flow.RolledBackError

	rollout flow.RunInfo   // Engine.Inspect of the rollout
	history []flow.Event   // Engine.History of the rollout
	waves   []waveOutcome  // one per wave of the plan
	devices []deviceResult // one per device, in fleet order
	engine  map[flow.RunStatus]int64
	retries map[string]int // per step name: attempts beyond the first, from Engine.Inspect
	traces  []trace
}

// waveOutcome is one wave as the rollout's and its batches' records tell it.
type waveOutcome struct {
	Wave    Wave
	Devices int
	Batches int         // batch runs started
	Report  *WaveReport // the health gate's input; nil if the gate never ran
	Gate    *Gate       // the health gate's verdict; nil if it never ran
	GateAt  time.Time
	// Released says the wave's release step completed; Reverted that the
	// engine compensated it when the rollout halted.
	Released, Reverted bool
	RevertedAt         time.Time
	States             map[string]int // final device states
}

// deviceResult is one device's final state and what its batch recorded.
type deviceResult struct {
	DeviceResult
	Final string // DeviceResult.State, or reverted, or not reached
	Wave  string
	Batch string // batch run ID; empty if not reached
	Index int    // the device's branch in its batch
}

// collect reads the rollout, its batches and their steps back from the
// engine.
func (out *outcome) collect(ctx context.Context, e *flow.Engine, rolloutID string) error {
	var err error
	if out.rollout, err = e.Inspect(ctx, rolloutID); err != nil {
		return err
	}
	if out.history, err = e.History(ctx, rolloutID); err != nil {
		return err
	}
	var gates, releases []flow.StepRecord
	for _, s := range out.rollout.Steps {
		switch s.Name {
		case out.o.gate.Name:
			gates = append(gates, s)
		case out.o.release.Name:
			releases = append(releases, s)
		}
	}
	reverted := make(map[int]time.Time) // release occurrence → when its compensation completed
	for _, ev := range out.history {
		if ev.Kind == flow.EventCompensationCompleted && ev.Step == out.o.release.Name {
			reverted[ev.Occurrence] = ev.At
		}
	}

	out.retries = make(map[string]int)
	out.devices = make([]deviceResult, 0, out.plan.Devices)
	for i, r := range out.plan.waveRanges() {
		w := waveOutcome{Wave: out.plan.Waves[i], Devices: r[1] - r[0], States: make(map[string]int)}
		if i < len(gates) && gates[i].Status == "completed" {
			w.Report, w.Gate, w.GateAt = new(WaveReport), new(Gate), gates[i].StartedAt
			if err := json.Unmarshal(gates[i].Input, w.Report); err != nil {
				return fmt.Errorf("health gate %d input: %w", i, err)
			}
			if err := json.Unmarshal(gates[i].Output, w.Gate); err != nil {
				return fmt.Errorf("health gate %d output: %w", i, err)
			}
		}
		if i < len(releases) {
			w.Released = releases[i].Status == "completed"
			w.Reverted = releases[i].Compensation == "completed"
			w.RevertedAt = reverted[releases[i].Occurrence]
		}
		for j, ids := range out.plan.batches(r[0], r[1]) {
			devices, err := out.collectBatch(ctx, e, batchRunID(rolloutID, w.Wave.Name, j), ids)
			if err != nil {
				return err
			}
			if devices[0].Batch != "" {
				w.Batches++
			}
			for _, d := range devices {
				d.Wave = w.Wave.Name
				if d.Final == stateUpdated && w.Reverted {
					d.Final = stateReverted
				}
				w.States[d.Final]++
				out.devices = append(out.devices, d)
			}
		}
		out.waves = append(out.waves, w)
	}
	if out.engine, err = e.CountRuns(ctx); err != nil {
		return err
	}
	return out.collectTraces(ctx, e)
}

// collectBatch returns the devices of one batch run as its result records
// them, and adds its steps' attempts to the retry counts. A batch the
// rollout never started leaves its devices not reached.
func (out *outcome) collectBatch(ctx context.Context, e *flow.Engine, id string, ids []string) ([]deviceResult, error) {
	devices := make([]deviceResult, len(ids))
	for k, d := range ids {
		devices[k] = deviceResult{DeviceResult: DeviceResult{Device: d}, Final: stateNotReached, Index: k}
	}
	run, err := flow.Lookup(ctx, e, out.o.batch, id)
	if errors.Is(err, flow.ErrRunNotFound) {
		return devices, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := e.Inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, s := range info.Steps {
		_, name := splitScope(s.Name)
		if s.Attempts > 1 {
			out.retries[name] += s.Attempts - 1
		}
	}
	res, err := run.Result(ctx)
	switch {
	case errors.Is(err, flow.ErrCancelled):
		// No result: what the batch did to each device is in its steps.
		for k := range devices {
			devices[k].Final, devices[k].Batch = stateCancelled, id
		}
		for _, s := range info.Steps {
			switch branch, name := splitScope(s.Name); name {
			case out.o.download.Name:
				devices[branch].Downloads = s.Attempts
			case out.o.verify.Name:
				devices[branch].Checks = s.Attempts
			}
		}
		return devices, nil
	case err != nil:
		return nil, fmt.Errorf("batch %s: %w", id, err)
	case len(res.Devices) != len(ids):
		return nil, fmt.Errorf("batch %s: %d device results for %d devices", id, len(res.Devices), len(ids))
	}
	for k, d := range res.Devices {
		devices[k].DeviceResult, devices[k].Final, devices[k].Batch = d, d.State, id
	}
	return devices, nil
}

// splitScope splits a step key recorded inside a flow.All branch, such as
// "all2.17/verify", into the branch index (17) and the step name; keys
// outside a branch give -1.
func splitScope(key string) (branch int, name string) {
	scope, name, ok := strings.Cut(key, "/")
	if !ok || !strings.HasPrefix(scope, "all") {
		return -1, key
	}
	_, idx, _ := strings.Cut(scope, ".")
	n, err := strconv.Atoi(idx)
	if err != nil {
		return -1, key
	}
	return n, name
}

// trace is the history of one device: its batch's events that concern it.
type trace struct {
	Why    string
	Device deviceResult
	Events []flow.Event
}

// collectTraces picks a few telling devices and reads their histories from
// their batches: the updated (or reverted) device with the most retries, a
// rolled back one and a failed one.
func (out *outcome) collectTraces(ctx context.Context, e *flow.Engine) error {
	picks := []func(d deviceResult) int{ // a score; the best positive one wins
		func(d deviceResult) int {
			if d.Final != stateUpdated && d.Final != stateReverted {
				return 0
			}
			return 10*d.Downloads + d.Checks
		},
		func(d deviceResult) int { return b2i(d.Final == stateRolledBack) },
		func(d deviceResult) int { return b2i(d.Final == stateFailed) },
		func(d deviceResult) int {
			return b2i(d.Final == stateCancelled && out.fleet.State(d.Device).Reboots > 0)
		},
	}
	for _, score := range picks {
		best, high := -1, 0
		for i, d := range out.devices {
			if s := score(d); s > high {
				best, high = i, s
			}
		}
		if best < 0 {
			continue
		}
		d := out.devices[best]
		events, err := e.History(ctx, d.Batch)
		if err != nil {
			return err
		}
		tr := trace{Why: describe(d), Device: d}
		for _, ev := range events {
			branch, name := splitScope(ev.Step)
			if branch == d.Index || (branch < 0 && (name == "flow.sleep" || batchEvents[ev.Kind])) {
				tr.Events = append(tr.Events, ev)
			}
		}
		out.traces = append(out.traces, tr)
	}
	return nil
}

// batchEvents are the events of a batch run that every device's history
// shows.
var batchEvents = map[string]bool{
	flow.EventRunCompleted: true, flow.EventCancelRequested: true,
	flow.EventWorkflowFailed: true, flow.EventRunCancelled: true,
}

// describe says in a few words what happened to a device.
func describe(d deviceResult) string {
	var parts []string
	if n := d.Downloads - 1; n > 0 && d.FailedAt != "download" {
		parts = append(parts, fmt.Sprintf("%d download retr%s", n, map[bool]string{true: "y", false: "ies"}[n == 1]))
	}
	if d.Checks > 1 && d.Final != stateRolledBack {
		parts = append(parts, "a slow boot")
	}
	what := d.Final
	if len(parts) > 0 {
		what += " after " + strings.Join(parts, " and ")
	}
	switch d.Final {
	case stateReverted:
		what = "updated" + strings.TrimPrefix(what, stateReverted) + ", then reverted with the rollout"
	case stateCancelled:
		what = "cancelled while its batch waited for the reboot: the engine rolled it back"
	case stateRolledBack:
		what += " after its health check failed"
	case stateFailed:
		what = fmt.Sprintf("failed: %s gave up after %d attempt(s)", d.FailedAt, max(d.Downloads, 1))
		if d.FailedAt != "download" {
			what = "failed at " + d.FailedAt
		}
	}
	return what
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// check compares the simulated fleet with what the engine recorded and
// returns every disagreement.
func (out *outcome) check() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// Each device in exactly one final state.
	seen := make(map[string]bool, len(out.devices))
	states := make(map[string]int)
	for _, d := range out.devices {
		if seen[d.Device] {
			add("%s appears twice", d.Device)
		}
		seen[d.Device] = true
		states[d.Final]++
	}
	total := 0
	for _, n := range states {
		total += n
	}
	if total != out.plan.Devices || len(seen) != out.plan.Devices {
		add("%d device outcomes for %d distinct devices, want %d", total, len(seen), out.plan.Devices)
	}

	// The fleet agrees with every device's final state.
	fleetRetries := make(map[string]int)
	for _, d := range out.devices {
		s := out.fleet.State(d.Device)
		want := oldFirmware
		if d.Final == stateUpdated {
			want = newFirmware
		}
		if s.Running != want {
			add("%s is %s but runs %s", d.Device, d.Final, s.Running)
		}
		if s.Released != (d.Final == stateUpdated) {
			add("%s is %s but released=%v in the registry", d.Device, d.Final, s.Released)
		}
		// A device is rolled back once if it failed its health check, or if
		// its batch was cancelled after it rebooted into the new firmware.
		wantRollbacks := b2i(d.Final == stateRolledBack || (d.Final == stateCancelled && s.Reboots > 0))
		if s.Rollbacks != wantRollbacks {
			add("%s is %s but was rolled back %d time(s)", d.Device, d.Final, s.Rollbacks)
		}
		if (s.Reverts > 0) != (d.Final == stateReverted) || s.Reverts > 1 {
			add("%s is %s but was reverted %d time(s)", d.Device, d.Final, s.Reverts)
		}
		if d.Final == stateNotReached && (s.Downloads > 0 || s.Reboots > 0) {
			add("%s was not reached but was touched", d.Device)
		}
		if s.Downloads != d.Downloads || s.Checks != d.Checks {
			add("%s: fleet saw %d downloads and %d checks, its batch recorded %d and %d", d.Device, s.Downloads, s.Checks, d.Downloads, d.Checks)
		}
		fleetRetries["download"] += max(0, s.Downloads-1)
		fleetRetries["verify"] += max(0, s.Checks-1)
	}

	// Retries: the engine's attempts match the fleet's calls.
	for name, n := range out.retries {
		if n != fleetRetries[name] {
			add("engine recorded %d %s retries, the fleet saw %d", n, name, fleetRetries[name])
		}
	}
	for name, n := range fleetRetries {
		if n != out.retries[name] {
			add("fleet saw %d %s retries, the engine recorded %d", n, name, out.retries[name])
		}
	}

	// The rollout's verdict matches its waves.
	halted, cancelled := false, errors.Is(out.err, flow.ErrCancelled)
	for _, w := range out.waves {
		if w.Gate != nil && !w.Gate.Pass {
			halted = true
		}
	}
	for _, w := range out.waves {
		if w.Report != nil && (w.Report.Updated+w.Report.RolledBack+w.Report.Failed != w.Devices) {
			add("wave %s: the gate counted %d devices, the wave has %d", w.Wave.Name,
				w.Report.Updated+w.Report.RolledBack+w.Report.Failed, w.Devices)
		}
		if w.Released && w.Reverted != (halted || cancelled) {
			add("wave %s: reverted=%v, rollout halted=%v, cancelled=%v", w.Wave.Name, w.Reverted, halted, cancelled)
		}
	}
	switch {
	case halted && !errors.Is(out.err, flow.ErrRolledBack):
		add("a health gate failed but the rollout ended with %v", out.err)
	case !halted && !cancelled && out.err != nil:
		add("every health gate passed but the rollout ended with %v", out.err)
	}
	var unsettled int64
	for st, n := range out.engine {
		if st != flow.StatusCompleted && st != flow.StatusFailed && st != flow.StatusCancelled {
			unsettled += n
		}
	}
	if unsettled > 0 {
		add("%d run(s) neither completed, rolled back nor cancelled: %v", unsettled, out.engine)
	}
	return problems
}
