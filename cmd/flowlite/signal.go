package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/flowlite/flowlite/flow"
)

// signalJSON is the --json output of signal.
type signalJSON struct {
	Run     string          `json:"run"`
	Signal  string          `json:"signal"`
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload"`
	Status  flow.RunStatus  `json:"status"`
	// Dropped is true when an earlier signal with the same key was sent to
	// the run: this one changed nothing.
	Dropped bool `json:"dropped"`
	// Received is true when the run waited for the signal and received it
	// within --wait.
	Received bool   `json:"received"`
	Message  string `json:"message"`
}

func (a *app) signalCommand() *cobra.Command {
	var key string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "signal RUN NAME [JSON]",
		Short: "Send a signal to a run",
		Long: `Send the signal NAME with a JSON payload (default null) to a run. The run
receives it the next time its workflow waits for NAME (flow.Receive), or at
once if it waits already; a signal sent earlier is kept until received.

--key makes the send idempotent: a second signal with the same key to the
same run is dropped. A payload that is not valid JSON is a usage error (exit
code 2); an unknown or finished run is exit code 1.

When the run waits for NAME already, signal watches its history for up to
--wait (0: not at all) and says whether the run received the signal. A
payload the run rejects (it does not decode into the type the workflow
receives, e.g. a string for a bool; fields the type lacks are ignored) is
reported as "rejected: <reason>" with exit code 1: the run goes on waiting
for a signal of that name. A run that does not wait for NAME yet checks the
payload only when it does, and a run in a queue no live engine works (as
the engines' reports tell) only when one does: signal does not watch them
(see the run's history).`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) < 2:
				return usageErrorf("expected a run ID and a signal name")
			case len(args) > 3:
				return usageErrorf("expected a run ID, a signal name and at most one JSON payload, got %d arguments", len(args))
			case checkRunIDArg(args[0]) != nil:
				return checkRunIDArg(args[0])
			case args[1] == "":
				return usageErrorf("empty signal name")
			}
			return nil
		},
		RunE: a.action(func(cmd *cobra.Command, args []string) error {
			id, name := args[0], args[1]
			payload := json.RawMessage("null")
			if len(args) == 3 {
				var v any
				if err := json.Unmarshal([]byte(args[2]), &v); err != nil {
					return usageErrorf("invalid JSON payload %s: %v", cell(args[2], 60), err)
				}
				payload = json.RawMessage(args[2])
			}
			ctx := cmd.Context()
			return a.withEngine(ctx, func(e *flow.Engine) error {
				var opts *flow.SignalOptions
				if key != "" {
					opts = &flow.SignalOptions{Key: key}
				}
				// A run that waits for the signal says at once what it made
				// of the payload; the history before the send tells which
				// entries after it are new. (An unknown run fails Signal.)
				before, events, err := e.InspectWithHistory(ctx, id)
				waiting := err == nil && !before.Status.Finished() && waitsForSignal(events, name)
				sent, err := flow.Signal(ctx, e, id, name, payload, opts)
				if err != nil {
					return runError(id, err)
				}
				var verdict signalVerdict
				if sent && waiting && wait > 0 && before.Queue != "" {
					// No engine would take the run now: nothing to watch.
					worked, err := queueWorked(ctx, e, before.Queue)
					if err != nil {
						return runError(id, err)
					}
					waiting = worked
				}
				if sent && waiting && wait > 0 {
					if verdict, _, err = watchSignal(ctx, e, id, name, lastEventID(events), wait); err != nil {
						return runError(id, err)
					}
				}
				if verdict.rejected != "" {
					return fmt.Errorf("signal %s sent to run %s but rejected: %s; the run still waits for %s", name, id, verdict.rejected, name)
				}
				after, err := e.Inspect(ctx, id)
				if err != nil {
					return runError(id, err)
				}
				msg := fmt.Sprintf("signal %s sent to run %s (it is %s)", name, id, after.Status)
				switch {
				case verdict.received && key != "":
					msg = fmt.Sprintf("signal %s with key %s sent to run %s and received (it is %s)", name, key, id, after.Status)
				case verdict.received:
					msg = fmt.Sprintf("signal %s sent to run %s and received (it is %s)", name, id, after.Status)
				case !sent:
					msg = fmt.Sprintf("signal %s with key %s dropped: run %s already got a signal with this key, which stands (it is %s)",
						name, key, id, after.Status)
				case key != "":
					msg = fmt.Sprintf("signal %s with key %s sent to run %s (it is %s)", name, key, id, after.Status)
				}
				if a.json {
					var compact bytes.Buffer
					if err := json.Compact(&compact, payload); err != nil {
						return err
					}
					return writeJSON(a.stdout, signalJSON{Run: id, Signal: name, Key: key, Payload: compact.Bytes(), Status: after.Status, Dropped: !sent, Received: verdict.received, Message: msg})
				}
				_, err = fmt.Fprintln(a.stdout, msg)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key: a repeat with the same key is dropped")
	cmd.Flags().DurationVar(&wait, "wait", defaultSignalWait, "how long to watch a run that waits for the signal, to report whether it received or rejected it (0: do not watch)")
	return cmd
}
