package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// limitUseJSON is a queue's limits with their use, in queues --json output.
type limitUseJSON struct {
	Limits       flow.QueueLimits `json:"limits"`
	Running      int              `json:"running"`
	RunningByKey map[string]int   `json:"running_by_key,omitempty"`
	Started      int              `json:"started_in_period"`
	Ready        int              `json:"ready"`
	HeldBack     int              `json:"held_back"`
}

func newLimitUseJSON(u flow.QueueLimitUse) *limitUseJSON {
	return &limitUseJSON{Limits: u.Limits, Running: u.Running, RunningByKey: u.RunningByKey,
		Started: u.Started, Ready: u.Ready, HeldBack: u.HeldBack}
}

// countText prints a limit, "-" for none.
func countText(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// keysText prints a queue's per-prefix limits, "-" for none.
func keysText(l flow.QueueLimits) string {
	if len(l.Keys) == 0 {
		if l.Fair {
			return "fair"
		}
		return "-"
	}
	parts := make([]string, 0, len(l.Keys)+1)
	if l.Fair {
		parts = append(parts, "fair")
	}
	for _, k := range l.Keys {
		parts = append(parts, k.String())
	}
	return strings.Join(parts, " ")
}

// printLimits prints the table of the queues' limits and their use, after
// the queues table; nothing when no queue has limits.
func (a *app) printLimits(uses []flow.QueueLimitUse) error {
	if len(uses) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	t := newTable(a.stdout, "QUEUE", "CONCURRENCY", "RATE", "KEY.CONC", "KEY.RATE", "KEYS", "RUNNING", "STARTED", "READY", "HELD")
	for _, u := range uses {
		l := u.Limits
		t.row(cell(u.Queue, 0), countText(l.Concurrency), l.Rate.String(), countText(l.KeyConcurrency), l.KeyRate.String(),
			cell(keysText(l), 60), strconv.Itoa(u.Running), strconv.Itoa(u.Started), strconv.Itoa(u.Ready), strconv.Itoa(u.HeldBack))
	}
	return t.flush()
}

// parseRate parses --flag's N/PERIOD (flow.ParseRateLimit).
func parseRate(flag, s string) (flow.RateLimit, error) {
	r, err := flow.ParseRateLimit(s)
	if err != nil {
		return flow.RateLimit{}, usageErrorf("%s: %v", flag, err)
	}
	return r, nil
}

// parseKeyLimit parses a --key (flow.ParseKeyLimit).
func parseKeyLimit(s string) (flow.KeyLimit, error) {
	k, err := flow.ParseKeyLimit(s)
	if err != nil {
		return flow.KeyLimit{}, usageErrorf("--key: %v", err)
	}
	return k, nil
}

func (a *app) queuesLimitCommand() *cobra.Command {
	var (
		conc, keyConc int
		rate, keyRate string
		fair, clearIt bool
		keys          []string
	)
	cmd := &cobra.Command{
		Use:   "limit QUEUE",
		Short: "Set or clear the flow control of a queue for every engine of the database",
		Long: `Set the limits of QUEUE for every engine of the database, replacing what it
had: the most runs executing at once (--concurrency) and per concurrency key
(--key-concurrency), the most starts per period (--rate 100/1s) and per key
(--key-rate), fair claims across keys (--fair), and per key prefix
(--key tenant:big=10,weight=5,rate=50/1s, repeatable). --clear removes them.
The limits are recorded in the database; other engines apply them within a
second. Bad input is an error naming it, and changes nothing.`,
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
			var l flow.QueueLimits
			set := false
			for _, f := range []string{"concurrency", "key-concurrency", "rate", "key-rate", "fair", "key"} {
				set = set || cmd.Flags().Changed(f)
			}
			switch {
			case clearIt && set:
				return usageErrorf("--clear takes no other limit flag")
			case !clearIt && !set:
				return usageErrorf("no limit given: set one (--concurrency, --rate, …) or --clear")
			case conc < 0:
				return usageErrorf("--concurrency %d: want a positive number of runs", conc)
			case keyConc < 0:
				return usageErrorf("--key-concurrency %d: want a positive number of runs", keyConc)
			}
			if !clearIt {
				l = flow.QueueLimits{Concurrency: conc, KeyConcurrency: keyConc, Fair: fair}
				var err error
				if rate != "" {
					if l.Rate, err = parseRate("--rate", rate); err != nil {
						return err
					}
				}
				if keyRate != "" {
					if l.KeyRate, err = parseRate("--key-rate", keyRate); err != nil {
						return err
					}
				}
				for _, s := range keys {
					k, err := parseKeyLimit(s)
					if err != nil {
						return err
					}
					l.Keys = append(l.Keys, k)
				}
			}
			return a.withEngine(ctx, func(e *flow.Engine) error {
				if err := e.SetQueueLimits(ctx, q, l); err != nil {
					return err
				}
				return a.printSetLimits(ctx, e, q, l)
			})
		}),
	}
	f := cmd.Flags()
	f.IntVar(&conc, "concurrency", 0, "the most runs of the queue executing at once, across engines")
	f.IntVar(&keyConc, "key-concurrency", 0, "the most runs with one concurrency key executing at once")
	f.StringVar(&rate, "rate", "", "the most runs starting per period, as `N/PERIOD` (100/1s)")
	f.StringVar(&keyRate, "key-rate", "", "the most runs with one key starting per period, as `N/PERIOD`")
	f.BoolVar(&fair, "fair", false, "claim ready runs round-robin across concurrency keys")
	f.StringArrayVar(&keys, "key", nil, "limits of the keys with a prefix, as `PREFIX=CONC[,weight=W][,rate=N/PERIOD]` (repeatable)")
	f.BoolVar(&clearIt, "clear", false, "remove the queue's limits")
	return cmd
}

// printSetLimits says what limit set or cleared.
func (a *app) printSetLimits(ctx context.Context, e *flow.Engine, q string, l flow.QueueLimits) error {
	msg := fmt.Sprintf("queue %s limits cleared", q)
	if !l.IsZero() {
		msg = fmt.Sprintf("queue %s limited: concurrency %s, rate %s, key concurrency %s, key rate %s, keys %s; other engines apply it within a second",
			q, countText(l.Concurrency), l.Rate.String(), countText(l.KeyConcurrency), l.KeyRate.String(), keysText(l))
	}
	if a.json {
		uses, err := e.QueueLimits(ctx)
		if err != nil {
			return err
		}
		out := struct {
			Queue   string        `json:"queue"`
			Limits  *limitUseJSON `json:"limits,omitempty"`
			Message string        `json:"message"`
		}{Queue: q, Message: msg}
		if i := slices.IndexFunc(uses, func(u flow.QueueLimitUse) bool { return u.Queue == q }); i >= 0 {
			out.Limits = newLimitUseJSON(uses[i])
		}
		return writeJSON(a.stdout, out)
	}
	_, err := fmt.Fprintln(a.stdout, msg)
	return err
}
