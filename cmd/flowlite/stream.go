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

// streamMessageJSON is a stream's message in --json output, one per line.
type streamMessageJSON struct {
	Position   int64           `json:"position"`
	Value      json.RawMessage `json:"value"`
	At         time.Time       `json:"at"`
	Step       string          `json:"step"`
	Occurrence int             `json:"occurrence"`
	Attempt    int             `json:"attempt,omitempty"`
}

func (a *app) streamCommand() *cobra.Command {
	var (
		from   int64
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "stream RUN NAME",
		Short: "Print a run's stream, optionally following it",
		Long: `Print the messages of a run's stream (flow.WriteStream), one per line in
position order: the position, then the message as JSON. Positions are dense
(0, 1, 2...) and never reused: pass the one after the last printed to --from
to go on from there. With --json each line is a JSON object (position,
value, at, step, occurrence, attempt).

--follow keeps printing new messages until the stream is closed, the run
finishes, or the command is interrupted; messages committed by other
processes are seen at the poll interval (at once on PostgreSQL).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErrorf("stream takes a run ID and a stream name")
			}
			return nil
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			id, name := args[0], args[1]
			if from < 0 {
				return usageErrorf("--from %d: positions start at 0", from)
			}
			ctx := cmd.Context()
			return a.withReader(ctx, func(e *flow.Engine) error {
				if !follow {
					msgs, err := flow.StreamMessages[json.RawMessage](ctx, e, id, name, from)
					if err != nil {
						return runError(id, err)
					}
					for _, m := range msgs {
						if err := a.printStreamMessage(m); err != nil {
							return err
						}
					}
					return nil
				}
				for m, err := range flow.ReadStream[json.RawMessage](ctx, e, id, name, from) {
					if errors.Is(err, context.Canceled) {
						return nil // interrupted
					}
					if err != nil {
						return runError(id, err)
					}
					if err := a.printStreamMessage(m); err != nil {
						return err
					}
				}
				return nil
			})
		}),
	}
	cmd.Flags().Int64Var(&from, "from", 0, "start at position `N`")
	cmd.Flags().BoolVar(&follow, "follow", false, "wait for new messages until the stream ends")
	return cmd
}

func (a *app) printStreamMessage(m flow.StreamMessage[json.RawMessage]) error {
	if a.json {
		return writeJSON(a.stdout, streamMessageJSON{
			Position: m.Position, Value: m.Value, At: utc(m.At), Step: m.Step, Occurrence: m.Occurrence, Attempt: m.Attempt,
		})
	}
	_, err := fmt.Fprintf(a.stdout, "%d\t%s\n", m.Position, m.Value)
	return err
}
