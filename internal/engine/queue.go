package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
)

// Queues: pausing and resuming a queue for every engine on the database,
// and the statistics of its runs.

// DurationSample bounds how many of the most recent completed runs of a
// queue QueueStats measures durations on, and DurationWindow how far back
// it looks.
const (
	DurationSample = 1000
	DurationWindow = time.Hour
)

// PauseQueue stops every engine on the database from claiming runs of
// queue, from their next claim on. Runs in flight go on until they finish
// or release their lease; every other run of the queue stays where it is
// until ResumeQueue. Pausing a paused queue does nothing.
func (e *Engine) PauseQueue(ctx context.Context, queue string) error {
	return e.setQueuePaused(ctx, queue, true)
}

// ResumeQueue lets engines claim runs of queue again. Resuming a queue that
// is not paused does nothing.
func (e *Engine) ResumeQueue(ctx context.Context, queue string) error {
	if err := e.setQueuePaused(ctx, queue, false); err != nil {
		return err
	}
	e.Wake(queue)
	return nil
}

func (e *Engine) setQueuePaused(ctx context.Context, queue string, paused bool) error {
	verb := map[bool]string{true: "pause", false: "resume"}[paused]
	if err := CheckName("queue", queue); err != nil {
		return fmt.Errorf("%s queue: %w", verb, err)
	}
	var changed bool
	err := e.store.Write(ctx, func(tx store.Tx) error {
		var err error
		changed, err = tx.QueueSetPaused(ctx, queue, paused, e.nowMs())
		return err
	})
	if err != nil {
		return err
	}
	if changed {
		e.log.Info("queue "+verb+"d", "queue", queue)
	}
	return nil
}

// QueueStats describes one queue.
type QueueStats struct {
	Queue  string
	Paused bool
	// Counts counts the runs of the queue the database keeps, by state.
	Counts map[flowtype.RunStatus]int64
	// Ready counts the runs an engine could claim now; OldestReadyAt is the
	// earliest due time among them (Unix ms; 0 for none).
	Ready         int64
	OldestReadyAt int64
	// Dead counts the dead letters: failed runs not requeued.
	Dead int64
	// FinishedLastMinute and FinishedLastHour count the runs that finished
	// (completed, failed or cancelled) in the last minute and hour.
	FinishedLastMinute int64
	FinishedLastHour   int64
	// Durations are the durations of the up to DurationSample runs of the
	// queue that completed most recently within DurationWindow, from their
	// first claim to their completion, in milliseconds, shortest first.
	Durations []int64
}

// QueueStats describes every queue that has runs, was paused or resumed,
// or is worked by this engine, by name.
func (e *Engine) QueueStats(ctx context.Context) ([]QueueStats, error) {
	r := e.store.Reader()
	now := e.nowMs()
	counts, err := r.QueueCounts(ctx, store.QueueCountsParams{
		Now: now, MinuteAgo: now - time.Minute.Milliseconds(), HourAgo: now - time.Hour.Milliseconds(),
	})
	if err != nil {
		return nil, err
	}
	queues, err := r.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	stats := make(map[string]*QueueStats)
	get := func(name string) *QueueStats {
		s := stats[name]
		if s == nil {
			s = &QueueStats{Queue: name, Counts: make(map[flowtype.RunStatus]int64)}
			stats[name] = s
		}
		return s
	}
	for _, name := range e.queueNames() {
		get(name)
	}
	for _, q := range queues {
		get(q.Name).Paused = q.Paused
	}
	for _, c := range counts {
		s := get(c.Queue)
		s.Counts[c.Status] += c.Runs
		s.Ready += c.Ready
		if c.OldestReadyAt != 0 && (s.OldestReadyAt == 0 || c.OldestReadyAt < s.OldestReadyAt) {
			s.OldestReadyAt = c.OldestReadyAt
		}
		s.Dead += c.Dead
		s.FinishedLastMinute += c.FinishedLastMinute
		s.FinishedLastHour += c.FinishedLastHour
	}
	out := make([]QueueStats, 0, len(stats))
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		s := stats[name]
		if s.Counts[flowtype.StatusCompleted] > 0 {
			d, err := r.QueueDurations(ctx, name, now-DurationWindow.Milliseconds(), DurationSample)
			if err != nil {
				return nil, err
			}
			slices.Sort(d)
			s.Durations = d
		}
		out = append(out, *s)
	}
	return out, nil
}
