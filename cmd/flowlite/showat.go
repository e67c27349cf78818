package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// runAtJSON is a run at a past instant, as show --at --json prints it.
type runAtJSON struct {
	At        time.Time      `json:"at"`
	Events    int            `json:"events"`
	LastEvent int64          `json:"last_event"`
	Run       runDetailJSON  `json:"run"`
	Waits     []stepJSON     `json:"waits"`
	Signals   []receivedJSON `json:"signals"`
}

// receivedJSON is a received signal in show --at --json output.
type receivedJSON struct {
	ID         int64           `json:"id"`
	Name       string          `json:"name"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	SentAt     time.Time       `json:"sent_at"`
	ReceivedAt time.Time       `json:"received_at"`
	Wait       string          `json:"wait"`
}

// showAt prints run id as it stood at the instant when names.
func (a *app) showAt(ctx context.Context, e *flow.Engine, id, when string) error {
	at, err := a.parseAt(ctx, e, id, when)
	if err != nil {
		return err
	}
	st, err := e.InspectAt(ctx, id, at)
	if err != nil {
		return runError(id, err)
	}
	if a.json {
		out := runAtJSON{At: utc(st.At), Events: st.Events, LastEvent: st.LastEvent,
			Run: newRunDetailJSON(st.Run), Waits: newRunDetailJSON(flow.RunInfo{Steps: st.Waits}).Steps,
			Signals: make([]receivedJSON, len(st.Signals))}
		for i, s := range st.Signals {
			out.Signals[i] = receivedJSON{ID: s.ID, Name: s.Name, Payload: s.Payload, SentAt: utc(s.SentAt),
				ReceivedAt: utc(s.ReceivedAt), Wait: s.Wait}
		}
		return writeJSON(a.stdout, out)
	}
	fmt.Fprintf(a.stdout, "As of %s (after %d events of its history)\n\n", rfcMillis(st.At), st.Events)
	if err := a.printRun(st.Run, ""); err != nil {
		return err
	}
	if len(st.Waits) > 0 {
		fmt.Fprintln(a.stdout)
		t := newTable(a.stdout, "OPEN WAIT", "SINCE", "INPUT")
		for _, w := range st.Waits {
			t.row(cell(stepName(w.Name, w.Occurrence), 0), rfcMillis(w.StartedAt), cell(string(w.Input), 60))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.Signals) > 0 {
		fmt.Fprintln(a.stdout)
		t := newTable(a.stdout, "SIGNAL", "ID", "RECEIVED", "PAYLOAD")
		for _, s := range st.Signals {
			t.row(cell(s.Name, 0), strconv.FormatInt(s.ID, 10), rfcMillis(s.ReceivedAt), cell(string(s.Payload), 60))
		}
		return t.flush()
	}
	return nil
}

// parseAt reads show --at: +DURATION after the run's first event, or what
// --since accepts (a time, or a duration before now).
func (a *app) parseAt(ctx context.Context, e *flow.Engine, id, when string) (time.Time, error) {
	if rest, ok := strings.CutPrefix(strings.TrimSpace(when), "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return time.Time{}, usageErrorf("invalid --at %q: want +DURATION after the run's first event (+1.5s, +250ms)", when)
		}
		events, err := e.History(ctx, id)
		if err != nil {
			return time.Time{}, runError(id, err)
		}
		if len(events) == 0 {
			return time.Time{}, fmt.Errorf("run %s has no history", id)
		}
		return events[0].At.Add(d), nil
	}
	at, err := parseWhen(when, time.Now())
	if err != nil {
		return time.Time{}, usageErrorf("invalid --at %q: %v, or +DURATION after the run's first event", when, err)
	}
	return at, nil
}
