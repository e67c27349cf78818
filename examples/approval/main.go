// Command approval runs expense approvals on flowlite: each expense reserves
// budget, asks the employee's manager, and waits durably, up to 48 hours,
// for the manager's decision signal. An approved expense is paid out; a
// rejected one, one that gets no answer in time, or one the budget cannot
// hold is rolled back by the engine's compensations, which withdraw the
// manager's task and release the budget.
//
// Time is simulated: the engine runs on a manual clock that the program
// moves from one manager's action to the next, stopping at every retry and
// timeout on the way, so three days pass in about a second. Managers approve
// some expenses, reject one, approve one twice (a double click the signal's
// key drops), approve one too late, and one never answers. The program then
// prints what happened, checks the simulated services against the engine,
// and shows the timelines of a few runs.
//
//	go run ./examples/approval [-db path] [-keep]
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
		fmt.Fprintln(os.Stderr, "approval:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	dbPath string
	keep   bool
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("approval", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.dbPath, "db", "", "SQLite database `file` (default: a new temporary file, removed at exit)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary database file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return o, nil
}

// run is the program: parse args, run the week, print the report to
// stdout. It returns an error when the services disagree with the engine.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	_, err := runApprovals(ctx, args, stdout)
	return err
}

// runApprovals is run that also returns what happened, for the test.
func runApprovals(ctx context.Context, args []string, stdout io.Writer) (*outcome, error) {
	opts, err := parseFlags(args, stdout)
	if err != nil {
		return nil, err
	}
	path, note := opts.dbPath, "(kept)"
	if path == "" {
		dir, err := os.MkdirTemp("", "approval-")
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, "approval.db")
		if opts.keep {
			note = "(temporary, kept by -keep)"
		} else {
			note = "(temporary, removed at exit; -keep keeps it)"
			defer os.RemoveAll(dir)
		}
	}
	fmt.Fprintf(stdout, "approval: %d expenses through reserve_budget → notify_manager → decision (%.0f hours at most) → pay_out\n",
		len(expenses), decisionTimeout.Hours())
	fmt.Fprintf(stdout, "database: %s %s\n", path, note)

	out, err := simulate(ctx, path)
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
	actions   []actionResult
	engine    map[flow.RunStatus]int64 // from Engine.CountRuns
	elapsed   time.Duration            // real time
	timelines []timeline
}

// result is what the engine says about one expense.
type result struct {
	Expense Expense
	Status  flow.RunStatus // completed or failed (rolled back)
	Payout  Payout
	Err     error // a *flow.RolledBackError
	Run     flow.RunInfo
	Events  []flow.Event
}

// actionResult is a manager's action and what Signal said.
type actionResult struct {
	action
	Err error // nil: accepted; flow.ErrRunFinished: too late
}

// timeline is one run as Engine.Inspect and Engine.History tell it.
type timeline struct {
	Why string
	result
}

// simulate opens an engine on path with a simulated clock, submits every
// expense, plays the managers' script and collects the outcome.
func simulate(ctx context.Context, path string) (*outcome, error) {
	clk := flowsim.New(simStart)
	e, err := flowsqlite.Open(ctx, path, &flow.Config{Clock: clk, PollInterval: 20 * time.Millisecond}, nil)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	svc := newServices()
	approval := newApproval(svc)
	if err := flow.RegisterSafely(e, approval); err != nil {
		return nil, err
	}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}

	began := time.Now()
	runs := make([]*flow.Run[Payout], len(expenses))
	for i, x := range expenses {
		r, err := flow.Start(ctx, e, approval, x, &flow.StartOptions{RunID: x.ID})
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", x.ID, err)
		}
		if r.Existing() {
			return nil, fmt.Errorf("%s already holds a run %s: pass a new -db file", path, x.ID)
		}
		runs[i] = r
	}

	simCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out := &outcome{svc: svc}
	for _, a := range script {
		if err := clk.AdvanceTo(simCtx, e, simStart.Add(a.At)); err != nil {
			return nil, err
		}
		// The manager clicks in the inbox, which sends the signal.
		svc.inbox.Decide(a.Expense)
		_, err := flow.Signal(simCtx, e, a.Expense, decisionSignal, a.Decision, &flow.SignalOptions{Key: a.Key})
		if err != nil && !errors.Is(err, flow.ErrRunFinished) {
			return nil, err
		}
		out.actions = append(out.actions, actionResult{action: a, Err: err})
	}
	if err := clk.AdvanceTo(simCtx, e, simStart.Add(storyEnd)); err != nil {
		return nil, err
	}
	out.elapsed = time.Since(began)

	for i, r := range runs {
		p, err := r.Result(simCtx)
		res := result{Expense: expenses[i], Payout: p, Err: err}
		switch {
		case err == nil:
			res.Status = flow.StatusCompleted
		case errors.Is(err, flow.ErrRolledBack):
			res.Status = flow.StatusFailed
		default:
			return nil, fmt.Errorf("result of %s: %w", r.ID(), err)
		}
		if res.Run, err = e.Inspect(ctx, r.ID()); err != nil {
			return nil, err
		}
		if res.Events, err = e.History(ctx, r.ID()); err != nil {
			return nil, err
		}
		out.results = append(out.results, res)
	}
	if out.engine, err = e.CountRuns(ctx); err != nil {
		return nil, err
	}
	out.timelines = pickTimelines(out.results)
	stopCtx, cancelStop := context.WithTimeout(ctx, 5*time.Second)
	defer cancelStop()
	if err := e.Stop(stopCtx); err != nil {
		return nil, err
	}
	return out, nil
}

// pickTimelines chooses the runs whose timelines tell the story best.
func pickTimelines(results []result) []timeline {
	why := map[string]string{
		"exp-003": "no decision: rolled back after 48 hours",
		"exp-005": "approved twice by a double click, paid after a retried payout",
		"exp-006": "over budget: failed at its first step, nothing to undo",
	}
	var tls []timeline
	for _, id := range []string{"exp-003", "exp-005", "exp-006"} {
		for _, r := range results {
			if r.Expense.ID == id {
				tls = append(tls, timeline{Why: why[id], result: r})
			}
		}
	}
	return tls
}
