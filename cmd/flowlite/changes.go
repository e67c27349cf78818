package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

func (a *app) changesCommand() *cobra.Command {
	var (
		follow       bool
		consumer     string
		after        int64
		poll         time.Duration
		listConsumer bool
		deleteName   string
		shard        int
	)
	cmd := &cobra.Command{
		Use:   "changes",
		Short: "Print the change feed: every run's events in order, optionally following",
		Long: `Print the change feed: every event of every run (started, claimed,
waiting, finished, each step's start, completion, failure and compensation,
signals, timers, schedule fires), one per line in position order. A position
grows with every change and is never reused: pass the last one printed to
--after to go on from there. With --json each line is a JSON object
(position, run, at, kind, step, occurrence, attempt, detail).

--follow keeps printing new changes until interrupted; changes committed by
other processes are seen within --poll. --consumer NAME reads as a durable
consumer: it resumes after the position it acknowledged last, and
acknowledges each change once printed, so after a crash it prints again at
most the changes printed since its last acknowledgement (at least once).
--consumers lists the consumers and their positions; --delete NAME forgets
one.

A reader whose position retention has deleted past fails with exit code 1,
naming the consumer, its position and the oldest complete position.

Each file of a shard set (--db a.db,b.db) has a feed of its own, with its
own positions and consumers: pass --shard I to read shard I's.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			files, err := shardFiles(a.dbName())
			if err != nil {
				return err
			}
			switch {
			case len(files) > 1 && cmd.Flags().Changed("shard"):
				if shard < 0 || shard >= len(files) {
					return usageErrorf("--shard %d: the set has shards 0 to %d", shard, len(files)-1)
				}
			case len(files) > 1:
				return usageErrorf("each file of a shard set has its own change feed: pass --shard 0 to %d", len(files)-1)
			case shard != 0:
				return usageErrorf("--shard %d: --db names one file, shard 0", shard)
			}
			withReader := func(ctx context.Context, fn func(*flow.Engine) error) error {
				return a.withReader(ctx, func(e *flow.Engine) error { return fn(e.Shard(shard)) })
			}
			withEngine := func(ctx context.Context, fn func(*flow.Engine) error) error {
				return a.withEngine(ctx, func(e *flow.Engine) error { return fn(e.Shard(shard)) })
			}
			switch {
			case listConsumer:
				return withReader(ctx, func(e *flow.Engine) error { return a.printConsumers(ctx, e) })
			case deleteName != "":
				return withEngine(ctx, func(e *flow.Engine) error {
					ok, err := e.DeleteChangeConsumer(ctx, deleteName)
					if err != nil {
						return err
					}
					if !ok {
						return fmt.Errorf("change consumer %q: no such consumer", deleteName)
					}
					return nil
				})
			}
			if after < 0 {
				return usageErrorf("--after must not be negative, got %d", after)
			}
			opts := &flow.ChangesOptions{Consumer: consumer, After: after, Follow: follow, PollInterval: poll}
			open := withReader
			if consumer != "" {
				open = withEngine // acknowledgements are writes
			}
			return open(ctx, func(e *flow.Engine) error { return a.printChanges(ctx, e, opts) })
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new changes until interrupted")
	f.StringVar(&consumer, "consumer", "", "read as the durable consumer NAME, resuming where it stopped")
	f.Int64Var(&after, "after", 0, "start after this position (default: every change the feed holds whole)")
	f.DurationVar(&poll, "poll", 250*time.Millisecond, "with --follow, how often to look for changes of other processes")
	f.BoolVar(&listConsumer, "consumers", false, "list the durable consumers and their positions")
	f.StringVar(&deleteName, "delete", "", "forget the durable consumer NAME")
	f.IntVar(&shard, "shard", 0, "on a shard set (--db a,b,...), the shard whose feed to read")
	return cmd
}

// printChanges prints the feed as it comes, one line per change, flushed
// at once: a reader of a pipe sees each change when it happens.
func (a *app) printChanges(ctx context.Context, e *flow.Engine, opts *flow.ChangesOptions) error {
	enc := json.NewEncoder(a.stdout)
	for c, err := range e.Changes(ctx, opts) {
		if err != nil {
			if opts.Follow && errors.Is(err, context.Canceled) {
				return nil // interrupted: the usual end of --follow
			}
			return err
		}
		if a.json {
			c.At = utc(c.At)
			err = enc.Encode(c)
		} else {
			step := "-"
			if c.Step != "" {
				step = stepName(c.Step, c.Occurrence)
			}
			_, err = fmt.Fprintf(a.stdout, "%d\t%s\t%s\t%s\t%s\t%s\n", c.Position, rfcMillis(c.At), c.RunID, c.Kind, step, cell(c.Detail, 0))
		}
		if err != nil {
			return fmt.Errorf("write change %d: %w", c.Position, err)
		}
	}
	return nil
}

func (a *app) printConsumers(ctx context.Context, e *flow.Engine) error {
	cs, err := e.ChangeConsumers(ctx)
	if err != nil {
		return err
	}
	if a.json {
		type consumerJSON struct {
			Name      string    `json:"name"`
			Position  int64     `json:"position"`
			CreatedAt time.Time `json:"created_at"`
			AckedAt   time.Time `json:"acked_at"`
		}
		out := make([]consumerJSON, len(cs))
		for i, c := range cs {
			out[i] = consumerJSON{Name: c.Name, Position: c.Position, CreatedAt: utc(c.CreatedAt), AckedAt: utc(c.AckedAt)}
		}
		return writeJSON(a.stdout, out)
	}
	t := newTable(a.stdout, "CONSUMER", "POSITION", "ACKNOWLEDGED")
	for _, c := range cs {
		t.row(cell(c.Name, 0), fmt.Sprint(c.Position), rfcMillis(c.AckedAt))
	}
	return t.flush()
}
