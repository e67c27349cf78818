// Command ordersaga runs an order saga on flowlite: reserve inventory, charge
// payment, ship. Some payments are declined and some parcels are refused, and
// those orders are rolled back by their compensations; one compensation
// keeps failing, and that run is suspended for an operator. It then prints
// what happened, checks that the simulated services agree with the engine,
// and shows the step timeline of a few runs.
//
//	go run ./examples/ordersaga [-orders 20] [-db path] [-keep]
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
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "ordersaga:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	dbPath string
	keep   bool
	orders int
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("ordersaga", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.dbPath, "db", "", "SQLite database `file` (default: a new temporary file, removed at exit)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary database file")
	fs.IntVar(&o.orders, "orders", 20, "number of orders to place")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case o.orders < 1:
		return o, fmt.Errorf("-orders must be at least 1, got %d", o.orders)
	}
	return o, nil
}

// run is the program: parse args, run the saga, print the report to stdout.
// It returns an error when the services disagree with the engine.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	_, err := runSaga(ctx, args, stdout)
	return err
}

// runSaga is run that also returns what happened, for the test.
func runSaga(ctx context.Context, args []string, stdout io.Writer) (*outcome, error) {
	opts, err := parseFlags(args, stdout)
	if err != nil {
		return nil, err
	}
	path, note := opts.dbPath, "(kept)"
	if path == "" {
		dir, err := os.MkdirTemp("", "ordersaga-")
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "orders.db")
		if opts.keep {
			note = "(temporary, kept by -keep)"
		} else {
			note = "(temporary, removed at exit; -keep keeps it)"
			defer os.RemoveAll(dir)
		}
	}
	fmt.Fprintf(stdout, "ordersaga: %s through reserve_inventory → charge_payment → ship_order\n", plural(opts.orders, "order"))
	fmt.Fprintf(stdout, "database:  %s %s\n", path, note)

	out, err := simulate(ctx, path, makeOrders(opts.orders))
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

// outcome is everything the report shows.
type outcome struct {
	svc       *services
	results   []result
	engine    map[flow.RunStatus]int64 // from Engine.CountRuns
	elapsed   time.Duration            // from the first Start to the last Result
	timelines []timeline
}

// result is what Run.Result said about one order.
type result struct {
	Order   Order
	Status  flow.RunStatus // completed, failed (rolled back) or suspended
	Receipt Receipt
	Err     error // *flow.RolledBackError or *flow.SuspendedError
}

// timeline is one run as Engine.Inspect and Engine.History tell it.
type timeline struct {
	Why    string
	Run    flow.RunInfo
	Events []flow.Event
}

// simulate opens an engine on path, places every order, waits for all of
// them to settle and collects the outcome.
func simulate(ctx context.Context, path string, orders []Order) (*outcome, error) {
	svc := newServices(skus, warehouses, stockPerSKU)
	e, err := flowsqlite.Open(ctx, path, &flow.Config{PollInterval: 50 * time.Millisecond}, nil)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	saga := newOrderSaga(svc)
	if err := flow.RegisterSafely(e, saga); err != nil {
		return nil, err
	}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}

	began := time.Now()
	runs := make([]*flow.Run[Receipt], len(orders))
	for i, o := range orders {
		r, err := flow.Start(ctx, e, saga, o, &flow.StartOptions{RunID: o.ID})
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", o.ID, err)
		}
		if r.Existing() {
			return nil, fmt.Errorf("%s already holds a run %s: pass a new -db file", path, o.ID)
		}
		runs[i] = r
	}

	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out := &outcome{svc: svc, results: make([]result, len(orders))}
	for i, r := range runs {
		receipt, err := r.Result(waitCtx)
		res := result{Order: orders[i], Receipt: receipt, Err: err}
		switch {
		case err == nil:
			res.Status = flow.StatusCompleted
		case errors.Is(err, flow.ErrRolledBack):
			res.Status = flow.StatusFailed
		case errors.Is(err, flow.ErrSuspended):
			res.Status = flow.StatusSuspended
		default:
			return nil, fmt.Errorf("result of %s: %w", r.ID(), err)
		}
		out.results[i] = res
	}
	out.elapsed = time.Since(began)

	if out.engine, err = e.CountRuns(ctx); err != nil {
		return nil, err
	}
	if out.timelines, err = collectTimelines(ctx, e, out); err != nil {
		return nil, err
	}
	stopCtx, cancelStop := context.WithTimeout(ctx, 5*time.Second)
	defer cancelStop()
	if err := e.Stop(stopCtx); err != nil {
		return nil, err
	}
	return out, nil
}

// collectTimelines picks a few telling runs: a completed one (with a retry
// if there is one), a rolled back one (with the most compensations) and a
// suspended one.
func collectTimelines(ctx context.Context, e *flow.Engine, out *outcome) ([]timeline, error) {
	type pick struct {
		why   string
		id    string
		score int
	}
	picks := map[flow.RunStatus]*pick{}
	for _, r := range out.results {
		why, score := "", 0
		switch r.Status {
		case flow.StatusCompleted:
			why = "completed"
			if out.svc.payments.ChargeCalls(r.Order.ID) > 1 {
				why, score = "completed after a retried payment", 1
			}
		case flow.StatusFailed:
			why = "rolled back"
			if charged, _ := out.svc.payments.Totals(r.Order.ID); charged > 0 {
				why, score = "rolled back: refunded, then released", 1
			}
		case flow.StatusSuspended:
			why = "suspended: a compensation keeps failing"
		}
		if p := picks[r.Status]; p == nil || score > p.score {
			picks[r.Status] = &pick{why: why, id: r.Order.ID, score: score}
		}
	}
	var tls []timeline
	for _, st := range []flow.RunStatus{flow.StatusCompleted, flow.StatusFailed, flow.StatusSuspended} {
		p := picks[st]
		if p == nil {
			continue
		}
		info, err := e.Inspect(ctx, p.id)
		if err != nil {
			return nil, err
		}
		events, err := e.History(ctx, p.id)
		if err != nil {
			return nil, err
		}
		tls = append(tls, timeline{Why: p.why, Run: info, Events: events})
	}
	return tls, nil
}
