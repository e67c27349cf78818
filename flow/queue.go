package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/internal/engine"
)

// PauseQueue stops every engine on the database, in every process, from
// claiming runs of queue, from its next claim on. The pause is recorded in
// the database, so it outlives restarts until ResumeQueue. Runs in flight
// go on until they finish or release their lease (to wait for a retry, a
// timer, a signal or a child); every other run of the queue stays where it
// is: pending runs stay pending, and waits that end are noticed on resume.
// Runs can still be started in a paused queue. Pausing a paused queue does
// nothing; a queue need not exist to be paused.
func (e *Engine) PauseQueue(ctx context.Context, queue string) error {
	return e.onAll(func(inner *Engine) error { return inner.core.PauseQueue(ctx, queue) })
}

// ResumeQueue lets engines claim runs of queue again; this engine looks at
// once, others at their next poll (at once on PostgreSQL, which wakes
// them). Resuming a queue that is not paused does
// nothing.
func (e *Engine) ResumeQueue(ctx context.Context, queue string) error {
	return e.onAll(func(inner *Engine) error { return inner.core.ResumeQueue(ctx, queue) })
}

// QueueStats describes a queue at the time QueueStats read it, on the
// engine clock.
type QueueStats struct {
	Queue  string
	Paused bool
	// Counts counts the queue's runs the database keeps, by state (see
	// Config.Retention for how long finished runs are kept).
	Counts map[RunStatus]int64
	// Ready counts the runs an engine could claim now: pending, waiting
	// whose wait ended, or compensating, and due. Runs delayed or waiting
	// for a retry's backoff are pending but not ready yet.
	Ready int64
	// OldestReadyAge is how long the oldest ready run has been due: the
	// queue's lag. Zero when no run is ready.
	OldestReadyAge time.Duration
	// DeadLetters counts the failed runs not requeued (see DeadLetters).
	DeadLetters int64
	// FinishedLastMinute and FinishedLastHour count the runs that finished
	// (completed, failed or cancelled) in the last minute and hour: the
	// queue's throughput.
	FinishedLastMinute int64
	FinishedLastHour   int64
	// AvgDuration and P95Duration are the mean and 95th percentile (nearest
	// rank) of the durations of the runs measured, DurationSamples of them:
	// the up to 1000 runs of the queue that completed most recently, within
	// the last hour. A run's duration is from its first claim to its
	// completion, so it includes its retries' backoff and its waits, but
	// not the time it waited in the queue. Zero when no run was measured.
	AvgDuration     time.Duration
	P95Duration     time.Duration
	DurationSamples int
}

// QueueStats describes every queue that has runs, was paused or resumed,
// or is configured on this engine, by name. It reads every run the
// database keeps, so its cost grows with them (about 150ms per 100,000
// runs on a small machine): it is meant for operators, not hot paths.
func (e *Engine) QueueStats(ctx context.Context) ([]QueueStats, error) {
	list, err := gather(ctx, e, func(ctx context.Context, inner *Engine) ([]engine.QueueStats, error) {
		return inner.core.QueueStats(ctx)
	}, mergeQueueStats)
	if err != nil {
		return nil, err
	}
	now := e.core.Config().Clock.Now()
	out := make([]QueueStats, len(list))
	for i, s := range list {
		q := QueueStats{
			Queue: s.Queue, Paused: s.Paused, Counts: s.Counts, Ready: s.Ready, DeadLetters: s.Dead,
			FinishedLastMinute: s.FinishedLastMinute, FinishedLastHour: s.FinishedLastHour,
			DurationSamples: len(s.Durations),
		}
		if s.OldestReadyAt != 0 {
			q.OldestReadyAge = max(0, now.Sub(time.UnixMilli(s.OldestReadyAt)))
		}
		q.AvgDuration, q.P95Duration = durationStats(s.Durations)
		out[i] = q
	}
	return out, nil
}

// durationStats returns the mean and the nearest-rank 95th percentile of
// durations in milliseconds, sorted ascending.
func durationStats(ms []int64) (avg, p95 time.Duration) {
	if len(ms) == 0 {
		return 0, 0
	}
	var sum int64
	for _, d := range ms {
		sum += d
	}
	rank := (95*len(ms) + 99) / 100 // ceil(0.95 n), 1-based
	return time.Duration(sum) * time.Millisecond / time.Duration(len(ms)), time.Duration(ms[rank-1]) * time.Millisecond
}

// WorkQueue makes this engine work queue too, with q's concurrency, from
// now on: at once when it runs, or from Start; q.Limits, when set, are
// recorded for every engine of the database as SetQueueLimits does. It is
// for queues that appear while the program runs (a queue per tenant); the
// queues every start needs belong in Config.Queues. A queue this engine
// works already is an error naming it, and so is a bad name.
func (e *Engine) WorkQueue(ctx context.Context, queue string, q QueueConfig) error {
	if q.Limits != nil {
		if err := e.SetQueueLimits(ctx, queue, *q.Limits); err != nil {
			return fmt.Errorf("work queue %s: %w", queue, err)
		}
	}
	return e.onAll(func(inner *Engine) error { return inner.core.WorkQueue(queue, q.Concurrency) })
}

// StopWorkingQueue makes this engine stop claiming runs of queue: the runs
// of the queue in flight here go on to their end, and its other runs wait
// for an engine that works it (this one again after WorkQueue). The queue's
// limits, pauses and runs in the database are left as they are. A queue
// this engine does not work is an error naming it.
func (e *Engine) StopWorkingQueue(queue string) error {
	return e.onAll(func(inner *Engine) error { return inner.core.StopWorkingQueue(queue) })
}
