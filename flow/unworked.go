package flow

import (
	"context"
	"time"

	"github.com/flowlite/flowlite/internal/engine"
)

// UnworkedQueue is a queue that has pending runs but that no live engine
// works (see Config.Queues): its runs will not start until an engine that
// lists the queue runs.
type UnworkedQueue struct {
	Queue string
	// Pending counts the queue's pending runs.
	Pending int64
	// OldestAge is how long ago, on the engine clock, the oldest of them
	// was started.
	OldestAge time.Duration
}

// UnworkedQueues names, by name, each queue with pending runs that no live
// engine works. An engine counts as live while it runs here, or while its
// report (see Reports) is not marked stopped and was rewritten recently: a
// running engine rewrites it at least once a minute, so a crashed engine
// stops counting within about three (or three ReportIntervals, if longer).
// Engines that write no reports (Config.ReportInterval negative) are not
// seen, so their queues are named here by other processes.
func (e *Engine) UnworkedQueues(ctx context.Context) ([]UnworkedQueue, error) {
	list, err := gather(ctx, e, func(ctx context.Context, inner *Engine) ([]engine.UnworkedQueue, error) {
		return inner.core.UnworkedQueues(ctx)
	}, mergeUnworked)
	if err != nil {
		return nil, err
	}
	now := e.core.Config().Clock.Now()
	out := make([]UnworkedQueue, len(list))
	for i, q := range list {
		out[i] = UnworkedQueue{Queue: q.Queue, Pending: q.Pending, OldestAge: max(0, now.Sub(q.OldestCreatedAt))}
	}
	return out, nil
}
