// Package broadcast wakes every goroutine waiting for something to happen
// next, such as the next commit of a store: waiters take a channel, and
// Notify closes it and starts a new one. It imports the standard library
// only.
package broadcast

import (
	"sync"
	"sync/atomic"
)

// Broadcast is a reusable one-to-many wake-up. The zero value is ready to
// use. Notify costs one atomic load when nobody waits, so a hot path (a
// store's commit) may call it every time.
type Broadcast struct {
	waiting atomic.Bool
	mu      sync.Mutex
	ch      chan struct{}
}

// Wait returns a channel closed by the next Notify after the call.
func (b *Broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	b.waiting.Store(true)
	return b.ch
}

// Notify wakes every goroutine that called Wait before it.
func (b *Broadcast) Notify() {
	if !b.waiting.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
	b.waiting.Store(false)
}
