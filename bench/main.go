// Command bench compares flowlite with River, go-workflows and BullMQ on
// the same machine in the same run. Run it from this directory:
//
//	go run . -svg results.svg -json results.json
//
// The suite runs every scenario of every system as its own child process
// (this binary again, or node for BullMQ), in interleaved rounds, and
// prints a markdown table of medians and ratios (flowlite ÷ peer) with the
// children's peak RSS and CPU seconds. See RESULTS.md for what each
// scenario measures and the settings of each system.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		child  = flag.Bool("child", false, "run one scenario of one system and print its result as JSON (used by the suite)")
		worker = flag.Bool("worker", false, "run one worker process of a multi-process scenario (used by a child)")
		p      params
		s      suiteConfig
	)
	flag.StringVar(&p.System, "system", "", "child/worker: the system")
	flag.StringVar(&p.Scenario, "scenario", "", "child/worker: the scenario")
	flag.IntVar(&p.N, "n", 0, "child/worker: how many jobs, workflows or samples")
	flag.IntVar(&p.Procs, "procs", 1, "child: worker processes (PostgreSQL scenarios)")
	flag.StringVar(&p.Dir, "dir", "", "child: a fresh directory for the SQLite file")
	flag.StringVar(&p.DSN, "dsn", "", "worker: the database of the scenario")
	flag.StringVar(&s.PGDSN, "pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL server (a maintenance database: each system gets a fresh database on it)")
	flag.IntVar(&s.Rounds, "rounds", 3, "interleaved rounds; the table shows medians")
	flag.Float64Var(&s.Scale, "scale", 1, "multiplies every scenario's size (the smoke test uses a tiny one)")
	flag.StringVar(&s.Only, "only", "", "run only the scenarios whose name contains this")
	flag.StringVar(&s.Out, "out", "", "also write the markdown table to this file")
	flag.StringVar(&s.SVG, "svg", "", "write a chart of the ratios to this SVG file")
	flag.StringVar(&s.JSON, "json", "", "write every measurement to this JSON file")
	from := flag.String("from", "", "print the table and write -out/-svg from a JSON file written by -json, running nothing")
	flag.StringVar(&s.BullMQ, "bullmq", "bullmq", "directory of the BullMQ harness (npm ci runs there when node_modules is missing)")
	flag.StringVar(&s.PGLock, "pglock", "/tmp/flowlite-pg.lock", "file to hold an exclusive flock on during PostgreSQL scenarios (whoever restarts the shared server holds it)")
	flag.DurationVar(&s.PGLockWait, "pglock-wait", 2*time.Minute, "how long to wait for -pglock before running without it (with a warning)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *worker:
		return runWorker(ctx, p)
	case *child:
		p.PGDSN = s.PGDSN
		r, err := runChild(ctx, p)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	case *from != "":
		return rerender(*from, s, os.Stdout)
	default:
		_, err := runSuite(ctx, s, os.Stdout)
		return err
	}
}
