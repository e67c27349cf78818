package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// Plan is the input of a rollout: which firmware goes to how many devices,
// in which waves, and how healthy each wave must be for the next to start.
type Plan struct {
	Firmware  string `json:"firmware"`
	Devices   int    `json:"devices"`    // dev-00001 … dev-NNNNN
	BatchSize int    `json:"batch_size"` // devices per batch run
	Waves     []Wave `json:"waves"`
	// MaxRolledBackPct is the health gate: a wave whose devices fail their
	// health check more often (in percent of those that booted the new
	// firmware) halts the rollout.
	MaxRolledBackPct float64 `json:"max_rolled_back_pct"`
}

// Wave is one step of the rollout: a share of the fleet, then a soak.
type Wave struct {
	Name    string        `json:"name"`
	Percent float64       `json:"percent"` // of the fleet; the last wave takes the rest
	Soak    time.Duration `json:"soak"`    // how long the wave runs before its health gate
}

// waveRanges returns, for each wave, the range [from, to) of the device
// indexes it updates.
func (p Plan) waveRanges() [][2]int {
	ranges := make([][2]int, len(p.Waves))
	from := 0
	for i, w := range p.Waves {
		n := p.Devices - from
		if i < len(p.Waves)-1 {
			n = min(n, max(1, int(math.Round(float64(p.Devices)*w.Percent/100))))
		}
		ranges[i] = [2]int{from, from + n}
		from += n
	}
	return ranges
}

// batches splits the device indexes [from, to) into batches of at most
// BatchSize device IDs.
func (p Plan) batches(from, to int) [][]string {
	var out [][]string
	for start := from; start < to; start += p.BatchSize {
		end := min(start+p.BatchSize, to)
		ids := make([]string, 0, end-start)
		for i := start; i < end; i++ {
			ids = append(ids, deviceID(i))
		}
		out = append(out, ids)
	}
	return out
}

// batchRunID names the run of batch j of a wave; the report finds the
// batches by these names.
func batchRunID(rolloutID, wave string, j int) string {
	return fmt.Sprintf("%s/%s/batch-%03d", rolloutID, wave, j+1)
}

// Batch is the input of a batch run: up to BatchSize devices of one wave.
type Batch struct {
	Wave     string   `json:"wave"`
	Firmware string   `json:"firmware"`
	Devices  []string `json:"devices"`
}

// Device outcomes.
const (
	stateUpdated    = "updated"     // runs the new firmware and is healthy
	stateRolledBack = "rolled back" // failed its health check, back on the old firmware
	stateFailed     = "failed"      // could not be updated (e.g. unreachable); never changed
	stateReverted   = "reverted"    // updated, then downgraded when the rollout halted
	stateNotReached = "not reached" // in a wave the rollout never started
	stateCancelled  = "cancelled"   // in a batch an operator's cancel stopped; back on the old firmware
)

// DeviceResult is what a batch run did to one device.
type DeviceResult struct {
	Device    string `json:"device"`
	State     string `json:"state"`               // updated, rolled back or failed
	Downloads int    `json:"downloads"`           // download attempts
	Checks    int    `json:"checks,omitempty"`    // health-check attempts
	Error     string `json:"error,omitempty"`     // why it was rolled back or failed
	FailedAt  string `json:"failed_at,omitempty"` // the step that failed for good
}

// BatchResult is the output of a batch run.
type BatchResult struct {
	Wave    string         `json:"wave"`
	Devices []DeviceResult `json:"devices"`
}

// WaveReport sums up one wave; the health gate step records it as its input.
type WaveReport struct {
	Name             string        `json:"name"`
	Devices          int           `json:"devices"`
	Batches          int           `json:"batches"`
	Updated          int           `json:"updated"`
	RolledBack       int           `json:"rolled_back"`
	Failed           int           `json:"failed"`
	DownloadRetries  int           `json:"download_retries"`
	CheckRetries     int           `json:"check_retries"`
	Started          time.Time     `json:"started"`
	Done             time.Time     `json:"done"` // every batch finished
	Soak             time.Duration `json:"soak"`
	MaxRolledBackPct float64       `json:"max_rolled_back_pct"`
}

// Gate is the health gate's verdict on a wave.
type Gate struct {
	Pass          bool    `json:"pass"`
	RolledBackPct float64 `json:"rolled_back_pct"`
	Reason        string  `json:"reason"`
}

// Release is the input of a wave's release step: the devices it updated.
type Release struct {
	Wave     string   `json:"wave"`
	Firmware string   `json:"firmware"`
	Devices  []string `json:"devices"`
}

// Summary is the output of a rollout that went through all its waves.
type Summary struct {
	Waves []string `json:"waves"`
}

// Job is the input of a per-device step.
type Job struct {
	Device   string `json:"device"`
	Firmware string `json:"firmware"`
}

// Retry policies, on the simulated clock. Jitter is off so that every run
// of a seed shows the same timeline; a real fleet wants the default jitter,
// so that thousands of devices failing together do not retry together.
var (
	// downloadRetry: 4 attempts, 1m, 2m, 4m apart.
	downloadRetry = &flow.RetryPolicy{MaxAttempts: 4, InitialInterval: time.Minute, Coefficient: 2, MaxInterval: 10 * time.Minute, Jitter: -1}
	// checkRetry: 3 health checks, 2m then 4m apart.
	checkRetry = &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: 2 * time.Minute, Coefficient: 2, MaxInterval: 10 * time.Minute, Jitter: -1}
	// deviceRetry covers the steps that only fail when a device drops off
	// mid-operation.
	deviceRetry = &flow.RetryPolicy{MaxAttempts: 3, InitialInterval: 30 * time.Second, Coefficient: 2, MaxInterval: 5 * time.Minute, Jitter: -1}
)

// bootWait is how long a batch lets its devices boot before checking them.
const bootWait = 5 * time.Minute

// permanentIf marks err permanent when it is one of targets: a device that
// refuses an operation, or a firmware that will not boot, does not get
// better by asking again.
func permanentIf(err error, targets ...error) error {
	for _, t := range targets {
		if errors.Is(err, t) {
			return flow.Permanent(err)
		}
	}
	return err
}

// ota holds the rollout's workflows and steps over a fleet.
type ota struct {
	rollout flow.Workflow[Plan, Summary]
	batch   flow.Workflow[Batch, BatchResult]

	download flow.Step[Job, Image]
	install  flow.Step[Job, Slot]
	reboot   flow.Step[Job, Boot]
	verify   flow.Step[Job, Health]
	rollback flow.Step[Job, Boot]
	release  flow.Step[Release, int]
	gate     flow.Step[WaveReport, Gate]
}

func newOTA(f *fleet) *ota {
	o := &ota{}
	o.download = flow.Step[Job, Image]{
		Name:    "download",
		Run:     func(_ context.Context, j Job) (Image, error) { return f.Download(j.Device, j.Firmware) },
		Retry:   downloadRetry,
		Timeout: time.Minute,
	}
	o.install = flow.Step[Job, Slot]{
		Name: "install",
		Run: func(_ context.Context, j Job) (Slot, error) {
			s, err := f.Install(j.Device, j.Firmware)
			return s, permanentIf(err, errWrongImage)
		},
		Retry:   deviceRetry,
		Timeout: time.Minute,
	}
	o.reboot = flow.Step[Job, Boot]{
		Name: "reboot",
		Run: func(_ context.Context, j Job) (Boot, error) {
			b, err := f.Reboot(j.Device, j.Firmware)
			return b, permanentIf(err, errWrongImage)
		},
		// Should the batch run unwind (cancelled by an operator, or by its
		// rollout halting), every device it rebooted into the new firmware
		// goes back to the old one.
		Compensate: func(_ context.Context, j Job, _ Boot) error {
			_, err := f.Rollback(j.Device)
			return err
		},
		Retry:   deviceRetry,
		Timeout: time.Minute,
	}
	o.verify = flow.Step[Job, Health]{
		Name: "verify",
		Run: func(_ context.Context, j Job) (Health, error) {
			h, err := f.HealthCheck(j.Device, j.Firmware)
			return h, permanentIf(err, errWrongImage, errBootLoop)
		},
		Retry:   checkRetry,
		Timeout: time.Minute,
	}
	o.rollback = flow.Step[Job, Boot]{
		Name:    "rollback",
		Run:     func(_ context.Context, j Job) (Boot, error) { return f.Rollback(j.Device) },
		Retry:   deviceRetry,
		Timeout: time.Minute,
	}
	o.release = flow.Step[Release, int]{
		Name: "release_wave",
		Run: func(_ context.Context, r Release) (int, error) {
			return len(r.Devices), f.Release(r.Wave, r.Devices)
		},
		// The rollout's saga: when a later health gate halts the rollout,
		// the engine reverts every released wave, the last one first.
		Compensate: func(_ context.Context, r Release, _ int) error { return f.Revert(r.Devices) },
	}
	o.gate = flow.Step[WaveReport, Gate]{
		Name: "health_gate",
		Run:  func(_ context.Context, w WaveReport) (Gate, error) { return healthGate(w), nil },
	}
	o.batch = flow.Workflow[Batch, BatchResult]{Name: "ota_batch", Run: o.runBatch}
	o.rollout = flow.Workflow[Plan, Summary]{Name: "ota_rollout", Run: o.runRollout}
	return o
}

// healthGate passes a wave whose share of devices that failed their health
// check, among those that booted the new firmware, is at most the plan's
// limit. Unreachable devices say nothing about the firmware and do not
// count.
func healthGate(w WaveReport) Gate {
	booted := w.Updated + w.RolledBack
	if booted == 0 {
		return Gate{Reason: "no device of the wave booted the new firmware"}
	}
	pct := 100 * float64(w.RolledBack) / float64(booted)
	g := Gate{RolledBackPct: pct, Pass: pct <= w.MaxRolledBackPct}
	verdict := "≤"
	if !g.Pass {
		verdict = ">"
	}
	g.Reason = fmt.Sprintf("%d of %d booted devices rolled back: %.1f%% %s %.1f%%", w.RolledBack, booted, pct, verdict, w.MaxRolledBackPct)
	return g
}

// runRollout is the parent workflow: for each wave it starts one batch run
// per BatchSize devices, waits for all of them, releases the updated
// devices, lets the wave soak, and asks the health gate. A failed gate
// returns an error, and the engine compensates the releases: every device
// the rollout updated is reverted.
func (o *ota) runRollout(wc flow.Context, p Plan) (Summary, error) {
	var sum Summary
	for i, r := range p.waveRanges() {
		w := p.Waves[i]
		rep := WaveReport{Name: w.Name, Devices: r[1] - r[0], Soak: w.Soak, MaxRolledBackPct: p.MaxRolledBackPct}
		var err error
		if rep.Started, err = flow.Now(wc); err != nil {
			return sum, err
		}
		batches := p.batches(r[0], r[1])
		rep.Batches = len(batches)
		children := make([]*flow.Child[BatchResult], len(batches))
		for j, ids := range batches {
			b := Batch{Wave: w.Name, Firmware: p.Firmware, Devices: ids}
			children[j], err = flow.StartChild(wc, o.batch, b, &flow.ChildOptions{RunID: batchRunID(wc.RunID(), w.Name, j)})
			if err != nil {
				return sum, err
			}
		}
		var updated []string
		for _, c := range children {
			res, err := c.Result(wc)
			if err != nil {
				return sum, err // a batch only fails if it was cancelled
			}
			for _, d := range res.Devices {
				rep.DownloadRetries += max(0, d.Downloads-1)
				rep.CheckRetries += max(0, d.Checks-1)
				switch d.State {
				case stateUpdated:
					rep.Updated++
					updated = append(updated, d.Device)
				case stateRolledBack:
					rep.RolledBack++
				default:
					rep.Failed++
				}
			}
		}
		if rep.Done, err = flow.Now(wc); err != nil {
			return sum, err
		}
		if _, err := flow.Do(wc, o.release, Release{Wave: w.Name, Firmware: p.Firmware, Devices: updated}); err != nil {
			return sum, err
		}
		if err := flow.Sleep(wc, w.Soak); err != nil {
			return sum, err
		}
		g, err := flow.Do(wc, o.gate, rep)
		if err != nil {
			return sum, err
		}
		if !g.Pass {
			return sum, fmt.Errorf("health gate halted the rollout at wave %s: %s", w.Name, g.Reason)
		}
		sum.Waves = append(sum.Waves, w.Name)
	}
	return sum, nil
}

// runBatch updates the devices of one batch in three phases, each across
// all devices at once (flow.All, one branch per device): download; install
// and reboot; then, after the devices had time to boot, verify, rolling back
// those that fail. A device that fails is recorded in the result; the batch
// itself succeeds.
//
// A device whose attempt fails waits for its retry alone: the other devices
// go on until they are done or wait too, then the batch run is released
// until the earliest retry is due, and replays to where it stopped. So each
// device's retries follow its own backoff, and a phase ends once every
// device is through it.
func (o *ota) runBatch(wc flow.Context, b Batch) (BatchResult, error) {
	res := BatchResult{Wave: b.Wave, Devices: make([]DeviceResult, len(b.Devices))}
	for i, id := range b.Devices {
		res.Devices[i] = DeviceResult{Device: id}
	}
	job := func(i int) Job { return Job{Device: b.Devices[i], Firmware: b.Firmware} }
	live := func(i int) bool { return res.Devices[i].State == "" }

	// Phase 1: download. Each branch writes only its own device's result.
	err := eachDevice(wc, len(b.Devices), func(wc flow.Context, i int) error {
		img, failed, err := try(wc, o.download, job(i))
		if err != nil {
			return err
		}
		d := &res.Devices[i]
		if failed != nil {
			d.State, d.FailedAt, d.Downloads, d.Error = stateFailed, "download", failed.Attempts, failed.Err.Error()
			return nil
		}
		d.Downloads = img.Attempt
		return nil
	})
	if err != nil {
		return res, err
	}

	// Phase 2: write the image to the inactive slot and reboot into it.
	err = eachDevice(wc, len(b.Devices), func(wc flow.Context, i int) error {
		if !live(i) {
			return nil
		}
		d := &res.Devices[i]
		_, failed, err := try(wc, o.install, job(i))
		if err != nil {
			return err
		}
		if failed != nil {
			d.State, d.FailedAt, d.Error = stateFailed, "install", failed.Err.Error()
			return nil
		}
		_, failed, err = try(wc, o.reboot, job(i))
		if err != nil {
			return err
		}
		if failed != nil {
			d.State, d.FailedAt, d.Error = stateFailed, "reboot", failed.Err.Error()
		}
		return nil
	})
	if err != nil {
		return res, err
	}

	// Give the devices time to boot: one durable timer for the batch.
	if err := flow.Sleep(wc, bootWait); err != nil {
		return res, err
	}

	// Phase 3: health check; a device that fails it is rolled back.
	err = eachDevice(wc, len(b.Devices), func(wc flow.Context, i int) error {
		if !live(i) {
			return nil
		}
		d := &res.Devices[i]
		h, failed, err := try(wc, o.verify, job(i))
		if err != nil {
			return err
		}
		if failed == nil {
			d.State, d.Checks = stateUpdated, h.Attempt
			return nil
		}
		d.Checks, d.Error = failed.Attempts, failed.Err.Error()
		_, rbFailed, err := try(wc, o.rollback, job(i))
		if err != nil {
			return err
		}
		if rbFailed != nil {
			d.State, d.FailedAt, d.Error = stateFailed, "rollback", d.Error+"; rollback: "+rbFailed.Err.Error()
			return nil
		}
		d.State, d.FailedAt = stateRolledBack, "verify"
		return nil
	})
	return res, err
}

// eachDevice runs fn for the devices 0…n-1 of a batch at once, one flow.All
// branch per device, and returns the first reason the run must stop.
func eachDevice(wc flow.Context, n int, fn func(wc flow.Context, i int) error) error {
	branches := make([]func(flow.Context) (struct{}, error), n)
	for i := range branches {
		branches[i] = func(wc flow.Context) (struct{}, error) { return struct{}{}, fn(wc, i) }
	}
	_, err := flow.All(wc, branches...)
	return err
}

// try calls a step and tells its failure for good (failed, which the batch
// records for the device) from a reason the run must stop (err, which the
// body must return).
func try[In, Out any](wc flow.Context, s flow.Step[In, Out], in In) (out Out, failed *flow.StepError, err error) {
	out, err = flow.Do(wc, s, in)
	if errors.As(err, &failed) {
		return out, failed, nil
	}
	return out, nil, err
}
