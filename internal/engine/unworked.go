package engine

import (
	"context"
	"fmt"
	"time"
)

// Unworked queues: an engine claims runs of the queues in its Config.Queues
// only, so a run started in any other queue waits, pending, until an
// engine that works the queue runs. When none ever does (a queue name
// typed in StartOptions.Queue or Job.Queue but not configured anywhere),
// nothing fails and nothing is logged by the claim: the run simply never
// starts. Two things make that visible. The engine that starts such a run
// logs a warning, once per queue; and UnworkedQueues, which flowlite
// health, the dashboard and /metrics show, names each queue with pending
// runs that no live engine works, from the queues engines list in their
// reports (report.go).

// UnworkedQueue is a queue with pending runs that no live engine works.
type UnworkedQueue struct {
	Queue           string
	Pending         int64 // pending runs
	OldestCreatedAt time.Time
}

// WarnIfUnworked logs, once per queue for the life of the engine, that a
// run was started in queue although this engine does not work it. Other
// engines may work it; the warning says so, since this engine cannot tell
// cheaply, and it is what turns a silently stuck run into a log line.
func (e *Engine) WarnIfUnworked(queue string) {
	if e.works(queue) {
		return
	}
	if _, seen := e.warnedQueues.LoadOrStore(queue, struct{}{}); seen {
		return
	}
	e.log.Warn("run started in a queue this engine does not work: it stays pending until an engine with the queue in its Config.Queues runs",
		"queue", queue, "engine_queues", e.queueNames())
}

// UnworkedQueues returns the queues that have pending runs but that no live
// engine works, by name. An engine counts as live when it is this one,
// started, or when its report (report.go) is not marked stopped and not
// older than its LiveUntil on this engine's clock. Engines that write no
// reports (ReportInterval negative) are not seen, so their queues look
// unworked from other processes.
func (e *Engine) UnworkedQueues(ctx context.Context) ([]UnworkedQueue, error) {
	pending, err := e.store.Reader().QueuePendingRuns(ctx)
	if err != nil {
		return nil, fmt.Errorf("unworked queues: %w", err)
	}
	if len(pending) == 0 {
		return nil, nil
	}
	reports, err := e.Reports(ctx)
	if err != nil {
		return nil, fmt.Errorf("unworked queues: %w", err)
	}
	worked := make(map[string]bool)
	now := e.now()
	for _, r := range reports {
		if r.Live(now) {
			for _, q := range r.Queues {
				worked[q] = true
			}
		}
	}
	e.mu.Lock()
	if e.running {
		for q := range e.queues {
			worked[q] = true
		}
	}
	e.mu.Unlock()
	var out []UnworkedQueue
	for _, p := range pending {
		if !worked[p.Queue] {
			out = append(out, UnworkedQueue{Queue: p.Queue, Pending: p.Runs, OldestCreatedAt: time.UnixMilli(p.OldestCreatedAt)})
		}
	}
	return out, nil
}
