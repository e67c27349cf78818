package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
)

// defaultSignalWait is how long signal watches a run that waits for the
// signal it sent: long enough for a worker that polls every second to take
// the run, short enough not to hold up a script when no worker runs.
const defaultSignalWait = 3 * time.Second

// signalVerdict is what became of a sent signal in the run's history.
type signalVerdict struct {
	received bool
	rejected string // why the payload was rejected; "" when not
}

// waitsForSignal reports whether the run's history shows a wait for the
// signal name that has not ended: a signal_waiting entry for it with no
// signal_received or signal_timed_out after it (since the run's last
// reset, which replays from an earlier call).
func waitsForSignal(events []flow.Event, name string) bool {
	open := 0
	for _, ev := range events {
		switch ev.Kind {
		case flow.EventSignalWaiting:
			if ev.Detail == "signal "+name || strings.HasPrefix(ev.Detail, "signal "+name+", timeout ") {
				open++
			}
		case flow.EventSignalReceived:
			if strings.HasPrefix(ev.Detail, "signal "+name+" #") && open > 0 {
				open--
			}
		case flow.EventSignalTimedOut:
			if ev.Detail == "signal "+name && open > 0 {
				open--
			}
		case flow.EventRunReset:
			open = 0
		}
	}
	return open > 0
}

// queueWorked reports whether a live engine works queue, as far as the
// engines' reports tell (flow.Report.Live): when none does, nothing takes
// the woken run until one starts. Engines that write no reports are not
// seen, so their queues are not watched either.
func queueWorked(ctx context.Context, e *flow.Engine, queue string) (bool, error) {
	reports, err := e.Reports(ctx)
	if err != nil {
		return false, err
	}
	now := time.Now()
	for _, r := range reports {
		if r.Live(now) && slices.Contains(r.Queues, queue) {
			return true, nil
		}
	}
	return false, nil
}

// lastEventID returns the ID of the last of events, 0 when there are none.
func lastEventID(events []flow.Event) int64 {
	if len(events) == 0 {
		return 0
	}
	return events[len(events)-1].ID
}

// watchSignal polls the run's history after the event after until the run
// receives or rejects a signal called name, or wait passes (ok false). A
// run that waits for name has no other signal of that name pending (it
// would have received it), so the first verdict for name is the one on
// the signal just sent.
func watchSignal(ctx context.Context, e *flow.Engine, runID, name string, after int64, wait time.Duration) (v signalVerdict, ok bool, err error) {
	deadline := time.Now().Add(wait)
	for {
		events, err := e.History(ctx, runID)
		if err != nil {
			return v, false, err
		}
		for _, ev := range events {
			if ev.ID <= after || !strings.HasPrefix(ev.Detail, "signal "+name+" #") {
				continue
			}
			switch ev.Kind {
			case flow.EventSignalReceived:
				return signalVerdict{received: true}, true, nil
			case flow.EventSignalRejected:
				why := ev.Detail
				if _, rest, found := strings.Cut(ev.Detail, ": payload rejected: "); found {
					why = rest
				}
				return signalVerdict{rejected: why}, true, nil
			}
		}
		if !time.Now().Before(deadline) {
			return v, false, nil
		}
		select {
		case <-ctx.Done():
			return v, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
