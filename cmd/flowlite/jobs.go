package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// defaultBatch is how many dead letters one step of a bulk requeue or
// purge handles, so that progress can be shown between steps.
const defaultBatch = 500

// requeueJSON is the --json output of retry and of dead requeue with run
// IDs: each dead letter and the run that requeued it.
type requeueJSON struct {
	Run     string `json:"run"`
	NewRun  string `json:"new_run"`
	Message string `json:"message"`
}

func (a *app) retryCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "retry RUN",
		Short: "Requeue a failed run (a dead letter) as a new run",
		Long: `Start a failed run (a dead letter) again from scratch as a new run, with
the same workflow version, queue, priority and input; its ID is the failed
run's plus "/requeue-N". The failed run keeps its steps and history and is
linked to the new one. Only a failed run that was not requeued yet can be
retried (otherwise exit code 1); a suspended run is resumed instead
(flowlite resume).`,
		Args: oneRunArg,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.withEngine(ctx, func(e *flow.Engine) error {
				return a.requeue(ctx, e, args)
			})
		}),
	}
}

// requeue requeues the dead letters ids one by one.
func (a *app) requeue(ctx context.Context, e *flow.Engine, ids []string) error {
	var out []requeueJSON
	for _, id := range ids {
		newID, err := e.Requeue(ctx, id)
		if err != nil {
			err = runError(id, err)
			if errors.Is(err, flow.ErrConflict) {
				if info, ierr := e.Inspect(ctx, id); ierr == nil {
					switch {
					case info.RequeuedAs != "":
						err = fmt.Errorf("run %s was requeued already, as %s: %w", id, info.RequeuedAs, flow.ErrConflict)
					case info.Status == flow.StatusSuspended:
						err = fmt.Errorf("run %s is suspended, not failed: resume, skip or cancel it instead: %w", id, flow.ErrConflict)
					case info.Status != flow.StatusFailed:
						err = fmt.Errorf("run %s is %s, not failed: only a failed run (a dead letter) can be retried: %w", id, info.Status, flow.ErrConflict)
					}
				}
			}
			if len(out) > 0 {
				_ = a.printRequeued(out) // the run's error is the one to report
			}
			return err
		}
		after, err := e.Inspect(ctx, newID)
		if err != nil {
			return runError(newID, err)
		}
		out = append(out, requeueJSON{Run: id, NewRun: newID,
			Message: fmt.Sprintf("run %s requeued as %s (%s): %s", id, newID, after.Status, pickup(after))})
	}
	return a.printRequeued(out)
}

// purge deletes the dead letters ids, all or none.
func (a *app) purge(ctx context.Context, e *flow.Engine, ids []string) error {
	ids = unique(ids)
	if err := e.PurgeDeadRuns(ctx, ids...); err != nil {
		return err
	}
	msg := fmt.Sprintf("purged %d dead letter(s): %s", len(ids), strings.Join(ids, ", "))
	if a.json {
		return writeJSON(a.stdout, bulkJSON{Action: "purge", Matched: len(ids), Done: len(ids), Message: msg})
	}
	_, err := fmt.Fprintln(a.stdout, msg)
	return err
}

// unique returns ids without repeats, in their first order.
func unique(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func (a *app) printRequeued(out []requeueJSON) error {
	if a.json {
		if len(out) == 1 {
			return writeJSON(a.stdout, out[0])
		}
		return writeJSON(a.stdout, out)
	}
	for _, r := range out {
		if _, err := fmt.Fprintln(a.stdout, r.Message); err != nil {
			return err
		}
	}
	return nil
}

// deadFlags are the filters of the dead subcommands.
type deadFlags struct {
	workflow, queue, since, until string
	limit, batch                  int
	all, dryRun, bulk             bool
}

func (f *deadFlags) register(cmd *cobra.Command, bulk bool) {
	f.bulk = bulk
	fl := cmd.Flags()
	fl.StringVar(&f.workflow, "workflow", "", "only dead letters of this workflow or job")
	fl.StringVar(&f.queue, "queue", "", "only dead letters of this queue")
	fl.StringVar(&f.since, "since", "", "only runs that failed at or after this time or this long ago (2h, 3d, 2006-01-02…)")
	fl.StringVar(&f.until, "until", "", "only runs that failed before this time or this long ago")
	if bulk {
		fl.BoolVar(&f.all, "all", false, "every dead letter, when no filter or run ID narrows them")
		fl.BoolVar(&f.dryRun, "dry-run", false, "only count the dead letters the command would handle")
		fl.IntVar(&f.batch, "batch", defaultBatch, "dead letters per step (progress shows between steps)")
	} else {
		fl.IntVar(&f.limit, "limit", 100, "list at most this many")
	}
}

// filter builds the flow filter, or a usage error.
func (f *deadFlags) filter(now time.Time) (flow.DeadLetterFilter, error) {
	w, err := parseWindow(f.since, f.until, now)
	if err != nil {
		return flow.DeadLetterFilter{}, err
	}
	if f.bulk && f.batch < 1 {
		return flow.DeadLetterFilter{}, usageErrorf("invalid --batch %d: must be at least 1", f.batch)
	}
	return flow.DeadLetterFilter{Workflow: f.workflow, Queue: f.queue, FailedAfter: w.since, FailedBefore: w.until, Limit: f.limit}, nil
}

func (f *deadFlags) narrowed() bool {
	return f.workflow != "" || f.queue != "" || f.since != "" || f.until != ""
}

// deadJSON is a dead letter in dead list --json output.
type deadJSON struct {
	runJSON
	FailedAt time.Time `json:"failed_at"`
}

// bulkJSON is the --json output of dead requeue and dead purge.
type bulkJSON struct {
	Action  string `json:"action"`
	Matched int    `json:"matched"` // dead letters the filter matched
	Done    int    `json:"done"`    // requeued or purged
	DryRun  bool   `json:"dry_run,omitempty"`
	Message string `json:"message"`
}

func (a *app) deadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "List, requeue or purge dead letters (failed runs)",
		Long: `Dead letters are runs that failed for good: their workflow returned an error
(for a job, its handler exhausted its attempts) and their completed steps were
compensated. They stay until requeued, purged, or deleted by retention.
Cancelled and suspended runs are not dead letters.

  dead list     list them, the most recently failed first
  dead requeue  start them again from scratch as new runs
  dead purge    delete them with their steps and history

Filters: --workflow, --queue, and --since/--until on when the run failed.
requeue and purge need run IDs, a filter, or --all; with a filter or --all,
--dry-run only counts. On a terminal they show their progress on stderr.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(*cobra.Command, []string) error {
			return usageErrorf("missing subcommand: list, requeue or purge")
		}),
	}

	var list deadFlags
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, the most recently failed first",
		Args:  cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			f, err := list.filter(time.Now())
			if err != nil {
				return err
			}
			if list.limit < 1 {
				return usageErrorf("invalid --limit %d: must be at least 1", list.limit)
			}
			ctx := cmd.Context()
			return a.withReader(ctx, func(e *flow.Engine) error {
				runs, err := e.DeadLetters(ctx, f)
				if err != nil {
					return err
				}
				if a.json {
					out := make([]deadJSON, len(runs))
					for i, r := range runs {
						out[i] = deadJSON{runJSON: newRunJSON(r), FailedAt: utc(r.FinishedAt)}
					}
					return writeJSON(a.stdout, out)
				}
				t := newTable(a.stdout, "ID", "WORKFLOW", "QUEUE", "FAILED", "ERROR")
				for _, r := range runs {
					t.row(cell(r.ID, 0), cell(workflowName(r.Workflow, r.Version), 0), cell(r.Queue, 0),
						tableTime(r.FinishedAt), cell(r.Error, 80))
				}
				return t.flush()
			})
		}),
	}
	list.register(listCmd, false)

	var rq deadFlags
	requeueCmd := &cobra.Command{
		Use:   "requeue [RUN...]",
		Short: "Requeue dead letters as new runs",
		Long: `Requeue the dead letters named, or those the filters match (or all of them
with --all), each as a new run started from scratch (see flowlite retry). A
dead letter whose unique key an unfinished run holds is left as it is.`,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if rq.narrowed() || rq.all || rq.dryRun {
					return usageErrorf("give run IDs or filters, not both")
				}
				for _, id := range args {
					if err := checkRunIDArg(id); err != nil {
						return err
					}
				}
			}
			f, err := rq.filter(time.Now())
			if err != nil {
				return err
			}
			if len(args) == 0 && !rq.narrowed() && !rq.all {
				return usageErrorf("requeue which dead letters? give run IDs, a filter (--workflow, --queue, --since, --until) or --all")
			}
			ctx := cmd.Context()
			return a.withEngine(ctx, func(e *flow.Engine) error {
				if len(args) > 0 {
					return a.requeue(ctx, e, args)
				}
				return a.bulkDead(ctx, e, f, "requeue", rq.dryRun, rq.batch, e.RequeueDead)
			})
		}),
	}
	rq.register(requeueCmd, true)

	var pg deadFlags
	purgeCmd := &cobra.Command{
		Use:   "purge [RUN...]",
		Short: "Delete dead letters with their steps and history",
		Long: `Delete the dead letters named, or those the filters match (or all of them with
--all), with their steps, history and signals. This cannot be undone: back
the database up first (flowlite backup DST) if their history may matter. A
failed child of an unfinished parent is kept.

Named runs are deleted all together or not at all: when one of them is
unknown, not failed, requeued already, or the failed child of an unfinished
parent, the command says which and why, and deletes nothing.`,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if pg.narrowed() || pg.all || pg.dryRun {
					return usageErrorf("give run IDs or filters, not both")
				}
				for _, id := range args {
					if err := checkRunIDArg(id); err != nil {
						return err
					}
				}
			}
			f, err := pg.filter(time.Now())
			if err != nil {
				return err
			}
			if len(args) == 0 && !pg.narrowed() && !pg.all {
				return usageErrorf("purge which dead letters? give run IDs, a filter (--workflow, --queue, --since, --until) or --all")
			}
			ctx := cmd.Context()
			return a.withEngine(ctx, func(e *flow.Engine) error {
				if len(args) > 0 {
					return a.purge(ctx, e, args)
				}
				return a.bulkDead(ctx, e, f, "purge", pg.dryRun, pg.batch, e.PurgeDead)
			})
		}),
	}
	pg.register(purgeCmd, true)

	cmd.AddCommand(listCmd, requeueCmd, purgeCmd)
	return cmd
}

// bulkDead applies op (RequeueDead or PurgeDead) to the dead letters f
// matches. It lists them first, then applies op to windows of their failure
// times, oldest first, batch runs at a time, so it can show progress;
// each window is one call of op, which works in its own transactions.
func (a *app) bulkDead(ctx context.Context, e *flow.Engine, f flow.DeadLetterFilter, verb string, dryRun bool, batch int,
	op func(context.Context, flow.DeadLetterFilter) (int, error)) error {
	lf := f
	lf.Limit = math.MaxInt32
	dead, err := e.DeadLetters(ctx, lf)
	if err != nil {
		return err
	}
	slices.Reverse(dead) // oldest first
	total := len(dead)
	past := map[string]string{"requeue": "requeued", "purge": "purged"}[verb]
	report := func(done int, err error) error {
		msg := fmt.Sprintf("%s %d of %d dead letter(s)", past, done, total)
		switch {
		case dryRun:
			msg = fmt.Sprintf("would %s %d dead letter(s)", verb, total)
		case err == nil && verb == "requeue" && done < total:
			msg += fmt.Sprintf("; %d left as they are: an unfinished run holds their unique key, or they changed meanwhile", total-done)
		}
		if a.json {
			if jerr := writeJSON(a.stdout, bulkJSON{Action: verb, Matched: total, Done: done, DryRun: dryRun, Message: msg}); jerr != nil {
				return jerr
			}
		} else if _, werr := fmt.Fprintln(a.stdout, msg); werr != nil {
			return werr
		}
		if err != nil {
			return fmt.Errorf("%s dead letters: stopped after %d of %d: %w", verb, done, total, err)
		}
		return nil
	}
	if dryRun || total == 0 {
		return report(0, nil)
	}
	m := a.meter(verb + " dead letters")
	defer m.stop()
	done := 0
	m.set(done, total)
	for i := 0; i < total; i += batch {
		j := min(i+batch, total)
		w := f
		w.Limit = 0
		w.FailedAfter = laterOf(f.FailedAfter, dead[i].FinishedAt)
		w.FailedBefore = earlierOf(f.FailedBefore, dead[j-1].FinishedAt.Add(time.Millisecond))
		n, err := op(ctx, w)
		done += n
		m.set(done, total)
		if err != nil {
			m.stop()
			return report(done, err)
		}
		a.logger.Debug("bulk "+verb, "done", done, "total", total, "step", strconv.Itoa(i/batch+1))
	}
	m.stop()
	return report(done, nil)
}

func laterOf(a, b time.Time) time.Time {
	if a.IsZero() || b.After(a) {
		return b
	}
	return a
}

func earlierOf(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// queueJSON is a queue in queues --json output.
type queueJSON struct {
	Queue              string                   `json:"queue"`
	Paused             bool                     `json:"paused"`
	Runs               map[flow.RunStatus]int64 `json:"runs"`
	Ready              int64                    `json:"ready"`
	LagSeconds         float64                  `json:"lag_seconds"`
	DeadLetters        int64                    `json:"dead_letters"`
	FinishedLastMinute int64                    `json:"finished_last_minute"`
	FinishedLastHour   int64                    `json:"finished_last_hour"`
	AvgSeconds         float64                  `json:"avg_duration_seconds"`
	P95Seconds         float64                  `json:"p95_duration_seconds"`
	DurationSamples    int                      `json:"duration_samples"`
	Limits             *limitUseJSON            `json:"limits,omitempty"`
}

func (a *app) queuesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "List queues with their statistics; pause or resume one",
		Long: `List every queue that has runs or was paused, with its runs by state, the
runs ready to be claimed now (READY) and how long the oldest of them has been
due (LAG), its dead letters, the runs finished in the last minute and hour,
and the mean and 95th percentile duration of the runs completed in the last
hour.

  queues pause QUEUE   stop every engine from claiming runs of QUEUE
  queues resume QUEUE  let them claim again
  queues limit QUEUE   set or clear its flow control (queues limit --help)

A pause is recorded in the database: it outlives restarts until resumed.
Runs in flight go on; runs can still be started in a paused queue.

The queues with limits get a second table: each limit (CONCURRENCY, RATE,
KEY.CONC, KEY.RATE, KEYS per prefix), the runs executing (RUNNING), started
within the rate period (STARTED), ready (READY), and the ready runs the
global limits hold back now (HELD).`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.withReader(ctx, func(e *flow.Engine) error {
				stats, err := e.QueueStats(ctx)
				if err != nil {
					return err
				}
				uses, err := e.QueueLimits(ctx)
				if err != nil {
					return err
				}
				if a.json {
					out := make([]queueJSON, len(stats))
					for i, s := range stats {
						out[i] = queueJSON{Queue: s.Queue, Paused: s.Paused, Runs: s.Counts, Ready: s.Ready,
							LagSeconds: s.OldestReadyAge.Seconds(), DeadLetters: s.DeadLetters,
							FinishedLastMinute: s.FinishedLastMinute, FinishedLastHour: s.FinishedLastHour,
							AvgSeconds: s.AvgDuration.Seconds(), P95Seconds: s.P95Duration.Seconds(), DurationSamples: s.DurationSamples}
						if out[i].Runs == nil {
							out[i].Runs = map[flow.RunStatus]int64{}
						}
					}
					for _, u := range uses {
						i := slices.IndexFunc(out, func(q queueJSON) bool { return q.Queue == u.Queue })
						if i < 0 {
							i = len(out)
							out = append(out, queueJSON{Queue: u.Queue, Runs: map[flow.RunStatus]int64{}})
						}
						out[i].Limits = newLimitUseJSON(u)
					}
					return writeJSON(a.stdout, out)
				}
				t := newTable(a.stdout, "QUEUE", "STATE", "PENDING", "RUNNING", "WAITING", "SUSPENDED", "READY", "LAG", "DEAD", "DONE/1M", "DONE/1H", "AVG", "P95")
				for _, s := range stats {
					state := "active"
					if s.Paused {
						state = "paused"
					}
					n := func(st flow.RunStatus) string { return strconv.FormatInt(s.Counts[st], 10) }
					t.row(cell(s.Queue, 0), state, n(flow.StatusPending), strconv.FormatInt(s.Counts[flow.StatusRunning]+s.Counts[flow.StatusCompensating], 10),
						n(flow.StatusWaiting), n(flow.StatusSuspended), strconv.FormatInt(s.Ready, 10), age(s.OldestReadyAge),
						strconv.FormatInt(s.DeadLetters, 10), strconv.FormatInt(s.FinishedLastMinute, 10), strconv.FormatInt(s.FinishedLastHour, 10),
						age(s.AvgDuration), age(s.P95Duration))
				}
				if err := t.flush(); err != nil {
					return err
				}
				return a.printLimits(uses)
			})
		}),
	}
	for _, verb := range []string{"pause", "resume"} {
		cmd.AddCommand(&cobra.Command{
			Use:   verb + " QUEUE",
			Short: map[string]string{"pause": "Stop engines from claiming runs of a queue", "resume": "Let engines claim runs of a queue again"}[verb],
			Args: func(_ *cobra.Command, args []string) error {
				switch {
				case len(args) != 1:
					return usageErrorf("expected one queue name, got %d arguments", len(args))
				case args[0] == "":
					return usageErrorf("empty queue name")
				}
				return nil
			},
			RunE: a.action(func(cmd *cobra.Command, args []string) error {
				ctx, q := cmd.Context(), args[0]
				return a.withEngine(ctx, func(e *flow.Engine) error {
					var msg string
					if verb == "pause" {
						if err := e.PauseQueue(ctx, q); err != nil {
							return err
						}
						msg = fmt.Sprintf("queue %s paused: engines stop claiming its runs at their next poll; runs in flight go on", q)
					} else {
						if err := e.ResumeQueue(ctx, q); err != nil {
							return err
						}
						msg = fmt.Sprintf("queue %s resumed: engines claim its runs again within their poll interval", q)
					}
					if a.json {
						return writeJSON(a.stdout, struct {
							Queue   string `json:"queue"`
							Paused  bool   `json:"paused"`
							Message string `json:"message"`
						}{q, verb == "pause", msg})
					}
					_, err := fmt.Fprintln(a.stdout, msg)
					return err
				})
			}),
		})
	}
	cmd.AddCommand(a.queuesLimitCommand())
	return cmd
}

// age prints a duration for the queue table; zero is "-".
func age(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
