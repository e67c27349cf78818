package flow

import (
	"context"
	"slices"
	"strings"
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
	lists, err := eachShard(ctx, e, func(ctx context.Context, s *Engine) ([]engine.UnworkedQueue, error) {
		return s.core.UnworkedQueues(ctx)
	})
	if err != nil {
		return nil, err
	}
	list := lists[0]
	if len(lists) > 1 {
		// A queue no engine works in one shard: its pending runs add up.
		byName := map[string]int{} // index in list
		list = nil
		for _, l := range lists {
			for _, q := range l {
				i, ok := byName[q.Queue]
				if !ok {
					byName[q.Queue] = len(list)
					list = append(list, q)
					continue
				}
				list[i].Pending += q.Pending
				if q.OldestCreatedAt.Before(list[i].OldestCreatedAt) {
					list[i].OldestCreatedAt = q.OldestCreatedAt
				}
			}
		}
		slices.SortFunc(list, func(a, b engine.UnworkedQueue) int { return strings.Compare(a.Queue, b.Queue) })
	}
	now := e.core.Config().Clock.Now()
	out := make([]UnworkedQueue, len(list))
	for i, q := range list {
		out[i] = UnworkedQueue{Queue: q.Queue, Pending: q.Pending, OldestAge: max(0, now.Sub(q.OldestCreatedAt))}
	}
	return out, nil
}
