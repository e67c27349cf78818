package engine

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/semaphore"
)

// The queues an engine works: those of its Config, and those WorkQueue
// adds or StopWorkingQueue removes while it runs (River issue 396: queues
// per tenant that appear while the program runs). Each worked queue has
// its slots, its wake channel and, while the engine runs, a claim loop.

// addQueue makes the engine work queue with concurrency limit; e.mu is held
// (or the engine is being built).
func (e *Engine) addQueue(queue string, limit int) {
	e.queues[queue] = limit
	e.wake[queue] = make(chan struct{}, 1)
	e.slots[queue] = semaphore.NewWeighted(int64(limit))
}

// startQueueLoop starts the claim loop of queue under loopCtx; e.mu is
// held and the engine running.
func (e *Engine) startQueueLoop(loopCtx context.Context, queue string, limit int) {
	ctx, stop := context.WithCancel(loopCtx)
	e.stopQueue[queue] = stop
	e.loops.Go(func() error { e.runQueue(ctx, queue, limit); return nil })
}

// WorkQueue makes the engine work queue too, with concurrency limit (0:
// DefaultConcurrency), from now on: at once when it runs, or from Start.
// A queue it works already is an error naming it; so is a bad name or a
// negative concurrency.
func (e *Engine) WorkQueue(queue string, limit int) error {
	if err := CheckName("queue", queue); err != nil {
		return fmt.Errorf("work queue: %w", err)
	}
	switch {
	case limit < 0:
		return fmt.Errorf("work queue %s: negative concurrency %d", queue, limit)
	case limit == 0:
		limit = DefaultConcurrency
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.queues[queue]; ok {
		return fmt.Errorf("work queue %s: this engine works it already", queue)
	}
	e.addQueue(queue, limit)
	if e.running {
		e.startQueueLoop(e.loopCtx, queue, limit)
	}
	e.log.Info("queue worked", "queue", queue, "concurrency", limit)
	return nil
}

// StopWorkingQueue makes the engine stop claiming runs of queue: its runs in
// flight here go on to their end, and its other runs wait for an engine
// that works the queue. A queue it does not work is an error naming it.
func (e *Engine) StopWorkingQueue(queue string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.queues[queue]; !ok {
		return fmt.Errorf("stop working queue %s: this engine does not work it (it works %v)", queue, e.queueNamesLocked())
	}
	if stop := e.stopQueue[queue]; stop != nil {
		stop()
	}
	delete(e.stopQueue, queue)
	delete(e.queues, queue)
	delete(e.slots, queue)
	delete(e.wake, queue)
	e.log.Info("queue no longer worked", "queue", queue)
	return nil
}

// works reports whether the engine works queue now.
func (e *Engine) works(queue string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.queues[queue]
	return ok
}

// queueNames returns the queues this engine works now, sorted.
func (e *Engine) queueNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.queueNamesLocked()
}

func (e *Engine) queueNamesLocked() []string {
	names := make([]string, 0, len(e.queues))
	for q := range e.queues {
		names = append(names, q)
	}
	slices.Sort(names)
	return names
}
