package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
)

// The fleet is simulated in this process, so that what the rollout did to
// every device can be checked at the end. Each device's behaviour follows
// from the seed and its ID alone, never from the order in which the engine
// happens to run things, so a seed always tells the same story.

// Firmware versions of the story.
const (
	oldFirmware = "2.3.9"
	newFirmware = "2.4.0"
)

// errWrongImage is a device refusing an operation out of order, which would
// be a bug in the rollout: it is never worth retrying.
var errWrongImage = errors.New("wrong image")

// traits are what the simulation decides about a device up front.
type traits struct {
	rev          string // hardware revision: A, B or C
	offline      bool   // never reachable during the rollout
	flakyLinks   int    // download attempts that fail before one succeeds
	slowBoot     bool   // not reporting yet at the first health check
	bootLoop     bool   // the new firmware does not come up on it
	downloadSize int    // bytes
}

// device is one simulated device: two firmware slots, the running one and
// the other, and counters of what was done to it.
type device struct {
	traits
	running, other  string // firmware of the active and the inactive slot
	staged          string // downloaded image, not yet installed
	downloads       int    // download attempts
	checks          int    // health checks, all boots
	checksSinceBoot int
	reboots         int
	rollbacks       int // slot switches back after a failed health check
	reverts         int // downgrades of a healthy device by a halted rollout
}

// fleet is every device plus the registry that says which firmware a device
// is released on.
type fleet struct {
	mu       sync.Mutex
	devices  map[string]*device
	badRev   string            // hardware revision the new build bricks; "" for a good build
	released map[string]string // device → wave whose commit released it on the new firmware
}

// newFleet returns n devices running the old firmware, with traits drawn
// from seed. badRev names a hardware revision on which the new build boot
// loops ("" for none).
func newFleet(n int, seed uint64, badRev string) *fleet {
	f := &fleet{devices: make(map[string]*device, n), badRev: badRev, released: make(map[string]string)}
	for i := range n {
		id := deviceID(i)
		f.devices[id] = &device{traits: drawTraits(seed, id), running: oldFirmware, other: oldFirmware}
	}
	return f
}

// deviceID names the i-th device (0-based) of the fleet.
func deviceID(i int) string { return fmt.Sprintf("dev-%05d", i+1) }

// drawTraits decides a device's behaviour from the seed and its ID: about
// 1 device in 200 is offline, 15% have a flaky link (1 to 3 failed
// downloads), 5% boot slowly, 1% boot loop on the new build whatever their
// revision, and 10% are revision C.
func drawTraits(seed uint64, id string) traits {
	h := fnv.New64a()
	h.Write([]byte(id))
	state := h.Sum64() ^ (seed * 0x9e3779b97f4a7c15)
	draw := func() float64 { // splitmix64, as a float in [0, 1)
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		return float64(z>>11) / (1 << 53)
	}
	var t traits
	switch r := draw(); {
	case r < 0.60:
		t.rev = "A"
	case r < 0.90:
		t.rev = "B"
	default:
		t.rev = "C"
	}
	switch r := draw(); {
	case r < 0.005:
		t.offline = true
	case r < 0.02:
		t.flakyLinks = 3
	case r < 0.06:
		t.flakyLinks = 2
	case r < 0.15:
		t.flakyLinks = 1
	}
	t.slowBoot = draw() < 0.05
	t.bootLoop = draw() < 0.01
	t.downloadSize = 48<<20 + int(draw()*float64(1<<20))
	return t
}

func (f *fleet) device(id string) (*device, error) {
	d := f.devices[id]
	if d == nil {
		return nil, fmt.Errorf("device %s: unknown", id)
	}
	return d, nil
}

// Image is a firmware image downloaded to a device.
type Image struct {
	Firmware string `json:"firmware"`
	Bytes    int    `json:"bytes"`
	Attempt  int    `json:"attempt"` // the attempt that succeeded
}

// Download fetches the image of firmware onto the device. Offline devices
// and flaky links fail; a later attempt may succeed.
func (f *fleet) Download(id, firmware string) (Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.device(id)
	if err != nil {
		return Image{}, err
	}
	d.downloads++
	switch {
	case d.offline:
		return Image{}, fmt.Errorf("device %s unreachable: no heartbeat for 6h", id)
	case d.downloads <= d.flakyLinks:
		return Image{}, fmt.Errorf("download to %s interrupted at %d%%: connection reset", id, 100*d.downloads/(d.flakyLinks+1))
	}
	d.staged = firmware
	return Image{Firmware: firmware, Bytes: d.downloadSize, Attempt: d.downloads}, nil
}

// Slot is the inactive slot an image was written to.
type Slot struct {
	Slot     string `json:"slot"`
	Firmware string `json:"firmware"`
}

// Install writes the downloaded image to the device's inactive slot; the
// running firmware is untouched until the reboot.
func (f *fleet) Install(id, firmware string) (Slot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.device(id)
	if err != nil {
		return Slot{}, err
	}
	if d.running == firmware {
		return Slot{Slot: "active", Firmware: firmware}, nil // installed and booted before
	}
	if d.staged != firmware {
		return Slot{}, fmt.Errorf("install %s on %s: %w: %q downloaded", firmware, id, errWrongImage, d.staged)
	}
	d.other = firmware
	return Slot{Slot: "inactive", Firmware: firmware}, nil
}

// Boot is a reboot of a device into a firmware.
type Boot struct {
	Running  string `json:"running"`
	Previous string `json:"previous"`
}

// Reboot switches the device to the slot holding firmware and boots it.
// Rebooting a device that already runs it does nothing.
func (f *fleet) Reboot(id, firmware string) (Boot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.device(id)
	if err != nil {
		return Boot{}, err
	}
	if d.running == firmware {
		return Boot{Running: firmware, Previous: d.other}, nil
	}
	if d.other != firmware {
		return Boot{}, fmt.Errorf("reboot %s into %s: %w: the inactive slot holds %s", id, firmware, errWrongImage, d.other)
	}
	d.running, d.other = d.other, d.running
	d.reboots++
	d.checksSinceBoot = 0
	return Boot{Running: d.running, Previous: d.other}, nil
}

// Health is a passed health check.
type Health struct {
	Running string `json:"running"`
	Rev     string `json:"rev"`
	Attempt int    `json:"attempt"` // the check that passed
}

// errBootLoop is a device that does not come up on the new firmware.
var errBootLoop = errors.New("boot loop: watchdog reset 3 times since the reboot")

// HealthCheck asks the device whether it runs firmware and is healthy. A
// slow device does not report at the first check after its reboot; a device
// in a boot loop never does.
func (f *fleet) HealthCheck(id, firmware string) (Health, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.device(id)
	if err != nil {
		return Health{}, err
	}
	d.checks++
	d.checksSinceBoot++
	switch {
	case d.running != firmware:
		return Health{}, fmt.Errorf("device %s runs %s, not %s: %w", id, d.running, firmware, errWrongImage)
	case d.bootLoop || d.rev == f.badRev:
		return Health{}, fmt.Errorf("device %s (rev %s): %w", id, d.rev, errBootLoop)
	case d.slowBoot && d.checksSinceBoot == 1:
		return Health{}, fmt.Errorf("device %s not reporting yet", id)
	}
	return Health{Running: d.running, Rev: d.rev, Attempt: d.checksSinceBoot}, nil
}

// Rollback switches the device back to the slot of the old firmware and
// boots it. Rolling back a device that runs the old firmware does nothing.
func (f *fleet) Rollback(id string) (Boot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.device(id)
	if err != nil {
		return Boot{}, err
	}
	if d.running == oldFirmware {
		return Boot{Running: d.running, Previous: d.other}, nil
	}
	d.running, d.other = d.other, d.running
	d.rollbacks++
	d.checksSinceBoot = 0
	return Boot{Running: d.running, Previous: d.other}, nil
}

// Release records in the registry that a wave's updated devices are
// released on the new firmware.
func (f *fleet) Release(wave string, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if _, err := f.device(id); err != nil {
			return err
		}
		f.released[id] = wave
	}
	return nil
}

// Revert takes a wave's release back: its devices are downgraded to the old
// firmware over the air and leave the registry. Devices already reverted
// are skipped, so a retried revert does each device once.
func (f *fleet) Revert(ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		d, err := f.device(id)
		if err != nil {
			return err
		}
		if d.running != oldFirmware {
			d.running, d.other = oldFirmware, d.running
			d.reverts++
		}
		delete(f.released, id)
	}
	return nil
}

// deviceState is a snapshot of one device for the final check.
type deviceState struct {
	traits
	Running                     string
	Released                    bool
	Downloads, Checks           int
	Reboots, Rollbacks, Reverts int
}

// State returns a snapshot of the device id.
func (f *fleet) State(id string) deviceState {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.devices[id]
	if d == nil {
		return deviceState{}
	}
	_, released := f.released[id]
	return deviceState{
		traits: d.traits, Running: d.running, Released: released,
		Downloads: d.downloads, Checks: d.checks, Reboots: d.reboots, Rollbacks: d.rollbacks, Reverts: d.reverts,
	}
}
