package engine

import (
	"context"
	"errors"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// runListener wakes this engine as soon as another process makes work
// appear, when the store can tell it (store.Notifier, PostgreSQL's
// LISTEN/NOTIFY): a run started on another machine is then claimed at once
// instead of at the next poll, and a run executing here whose cancellation
// another process requested is cancelled at once instead of at its next
// heartbeat. It only hastens what polling and heartbeats do anyway, so a
// listener that fails is logged and otherwise ignored: polling stays the
// correctness path, unchanged.
func (e *Engine) runListener(ctx context.Context) {
	n, ok := e.store.(store.Notifier)
	if !ok {
		return
	}
	err := n.Listen(ctx, e.onWake)
	switch {
	case err == nil || ctx.Err() != nil:
	case errors.Is(err, flowtype.ErrNotSupported): // turned off, or not possible over this pool
		// Said once at start, at Info: behind a transaction pooler the
		// operator may not expect other processes' work to wait for a poll.
		e.log.Info("flowlite: not listening for wakes from other processes; work they start is found by polling",
			"poll_interval", e.cfg.PollInterval, "why", err)
	default:
		e.log.Warn("flowlite: not listening for wakes from other processes; work they start is found by polling",
			"poll_interval", e.cfg.PollInterval, "err", err)
	}
}

// onWake answers one wake. It never blocks: the listener calls it for each
// notification in turn. A wake is a hint (store.Notifier), so each answer
// is one the engine could make at any time: look for work in a queue, or
// cancel a run whose cancellation is already committed.
func (e *Engine) onWake(w store.Wake) {
	switch w.Kind {
	case store.WakeAll:
		if w.Err != nil {
			e.log.Warn("flowlite: wake listener reconnected; looking for work it may have missed", "err", w.Err)
		}
		e.wakeQueues()
	case store.WakeCancel:
		if w.RunID != "" {
			// The request is committed (the wake is sent on commit), so this
			// is what the run's next heartbeat would do.
			e.cancelActive([]string{w.RunID})
		}
		e.Wake(w.Queue) // an idle run is due now, to unwind
	default: // WakeReady, and kinds newer than this engine
		if w.Queue == "" {
			e.wakeQueues()
			return
		}
		delay := time.Duration(w.DueAt-e.nowMs()) * time.Millisecond
		switch {
		case w.DueAt == 0 || delay <= 0:
			e.Wake(w.Queue)
		case delay < e.cfg.PollInterval:
			// A run delayed for less than a poll: look when it is due. A
			// longer delay is found by a poll, as late at most as today;
			// a timer for it would only add up (one per delayed start).
			e.wakeAfter(w.Queue, delay)
		}
	}
}

// wakeQueues makes the claimer of every queue of this engine look for
// work. Unlike WakeAll, it does not check deadlines.
func (e *Engine) wakeQueues() {
	for _, q := range e.queueNames() {
		e.Wake(q)
	}
}
