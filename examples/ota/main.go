// Command ota rolls a firmware update out to a simulated fleet of IoT
// devices on flowlite, the gateway story of the project's seed articles.
//
// A parent workflow updates the fleet in waves (a 1% canary, then 10%, then
// the rest). Each wave runs as batch child runs of up to 100 devices; a
// batch downloads the image to every device (flaky links are retried with
// backoff), installs it, reboots, waits for the devices to boot on a durable
// timer, health-checks them and rolls back those that fail. Between waves
// the rollout soaks on a timer and asks a health gate; a wave with too many
// rollbacks halts the rollout, and the engine compensates it: every device
// the rollout updated is reverted.
//
// Time is simulated: the engine's clock jumps to the next due timer or retry
// whenever nothing is left to do, so hours of rollout pass in seconds and a
// seed always tells the same story. At the end the program prints devices
// updated, rolled back and failed per wave, the retries, the waves'
// timeline and a few devices' histories, and checks the simulated fleet
// against what the engine recorded.
//
// -bad-rev C ships a build that boot-loops on hardware revision C: the
// canary's gate halts the rollout. -cancel-at 1h17m has an operator cancel
// the rollout at that simulated time: the engine cancels the batches in
// flight, whose compensations roll their rebooted devices back, and reverts
// the waves already released.
//
//	go run ./examples/ota [-devices 10000] [-seed 1] [-bad-rev C] [-cancel-at 1h17m] [-db path] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsim"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "ota:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	dbPath     string
	keep       bool
	devices    int
	seed       uint64
	batch      int
	badRev     string
	maxRolledB float64
	cancelAt   time.Duration
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ota", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.dbPath, "db", "", "SQLite database `file` (default: a new temporary file, removed at exit)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary database file")
	fs.IntVar(&o.devices, "devices", 10_000, "number of devices in the fleet")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the simulated fleet's behaviour")
	fs.IntVar(&o.batch, "batch", 100, "devices per batch run")
	fs.StringVar(&o.badRev, "bad-rev", "", "hardware `revision` (A, B or C) on which the new build boot-loops; C makes the canary halt the rollout")
	fs.Float64Var(&o.maxRolledB, "max-rolled-back", 5, "health gate: most `percent` of a wave's booted devices that may roll back")
	fs.DurationVar(&o.cancelAt, "cancel-at", 0, "an operator cancels the rollout at this simulated `time` since its start, e.g. 1h17m (0: never)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.devices < 1 || o.devices > 99_999:
		return o, fmt.Errorf("-devices must be between 1 and 99999, got %d", o.devices)
	case o.batch < 1 || o.batch > 1000:
		return o, fmt.Errorf("-batch must be between 1 and 1000, got %d", o.batch)
	case o.badRev != "" && o.badRev != "A" && o.badRev != "B" && o.badRev != "C":
		return o, fmt.Errorf("-bad-rev must be A, B or C, got %q", o.badRev)
	case o.maxRolledB < 0 || o.maxRolledB > 100:
		return o, fmt.Errorf("-max-rolled-back must be a percentage, got %g", o.maxRolledB)
	case o.cancelAt < 0:
		return o, fmt.Errorf("-cancel-at must not be negative, got %s", o.cancelAt)
	}
	return o, nil
}

// plan returns the rollout of the story: canary 1%, early 10%, the rest.
func (o options) plan() Plan {
	return Plan{
		Firmware:  newFirmware,
		Devices:   o.devices,
		BatchSize: o.batch,
		Waves: []Wave{
			{Name: "canary", Percent: 1, Soak: time.Hour},
			{Name: "early", Percent: 10, Soak: 30 * time.Minute},
			{Name: "rest", Soak: 30 * time.Minute},
		},
		MaxRolledBackPct: o.maxRolledB,
	}
}

// run is the program: parse args, roll out, print the report to stdout. It
// returns an error when the fleet disagrees with the engine.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	_, err := runOTA(ctx, args, stdout)
	return err
}

// runOTA is run that also returns what happened, for the test.
func runOTA(ctx context.Context, args []string, stdout io.Writer) (*outcome, error) {
	opts, err := parseFlags(args, stdout)
	if err != nil {
		return nil, err
	}
	path, note := opts.dbPath, "(kept)"
	if path == "" {
		dir, err := os.MkdirTemp("", "ota-")
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "ota.db")
		if opts.keep {
			note = "(temporary, kept by -keep)"
		} else {
			note = "(temporary, removed at exit; -keep keeps it)"
			defer os.RemoveAll(dir)
		}
	}
	plan := opts.plan()
	fmt.Fprintf(stdout, "ota: firmware %s → %s on %s devices, in batches of %d\n", oldFirmware, newFirmware, count(plan.Devices), plan.BatchSize)
	fmt.Fprintf(stdout, "database:  %s %s\n", path, note)
	build := "a good build"
	if opts.badRev != "" {
		build = "a build that boot-loops on hardware rev " + opts.badRev
	}
	fmt.Fprintf(stdout, "fleet:     seed %d, %s; health gate: at most %.1f%% of a wave's booted devices rolled back\n",
		opts.seed, build, plan.MaxRolledBackPct)
	if opts.cancelAt > 0 {
		fmt.Fprintf(stdout, "operator:  cancels the rollout at +%s\n", simDuration(opts.cancelAt))
	}

	out, err := simulate(ctx, path, plan, newFleet(plan.Devices, opts.seed, opts.badRev), opts.cancelAt)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", err)
		}
		return nil, err
	}
	printReport(stdout, out)
	if problems := out.check(); len(problems) > 0 {
		return out, fmt.Errorf("%d consistency problem(s), first: %s", len(problems), problems[0])
	}
	return out, nil
}

// simStart is when the simulated rollout begins.
var simStart = time.Date(2025, 6, 2, 22, 0, 0, 0, time.UTC) // a Monday, 22:00: the maintenance window

// simulate opens an engine on path, runs the rollout on the simulated clock
// until every run settled, and collects the outcome. A positive cancelAt
// cancels the rollout at that simulated time since its start.
func simulate(ctx context.Context, path string, plan Plan, f *fleet, cancelAt time.Duration) (*outcome, error) {
	clk := flowsim.New(simStart)
	e, err := flowsqlite.Open(ctx, path, &flow.Config{
		Clock:        clk,
		PollInterval: 20 * time.Millisecond,
		// Batches run their devices' steps concurrently; more runs at once
		// give the writer bigger group commits.
		Queues: map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 32}},
	}, nil)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	o := newOTA(f)
	for _, register := range []func() error{
		func() error { return flow.RegisterSafely(e, o.rollout) },
		func() error { return flow.RegisterSafely(e, o.batch) },
	} {
		if err := register(); err != nil {
			return nil, err
		}
	}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}

	began := time.Now()
	id := "rollout-" + plan.Firmware
	r, err := flow.Start(ctx, e, o.rollout, plan, &flow.StartOptions{RunID: id})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	if r.Existing() {
		return nil, fmt.Errorf("%s already holds a run %s: pass a new -db file", path, id)
	}
	driveCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if cancelAt > 0 {
		if err := clk.AdvanceTo(driveCtx, e, simStart.Add(cancelAt)); err != nil {
			return nil, fmt.Errorf("simulation: %w", err)
		}
		// Cancelling a finished rollout is ErrRunFinished: nothing to do.
		if err := r.Cancel(driveCtx); err != nil && !errors.Is(err, flow.ErrRunFinished) {
			return nil, err
		}
	}
	if err := clk.Run(driveCtx, e); err != nil {
		return nil, fmt.Errorf("simulation: %w", err)
	}
	out := &outcome{plan: plan, fleet: f, o: o, elapsed: time.Since(began), simulated: clk.Elapsed()}
	out.summary, out.err = r.Result(ctx)
	if err := out.collect(ctx, e, r.ID()); err != nil {
		return nil, err
	}
	stopCtx, cancelStop := context.WithTimeout(ctx, 5*time.Second)
	defer cancelStop()
	if err := e.Stop(stopCtx); err != nil {
		return nil, err
	}
	return out, nil
}
