//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package sqlitestore

import (
	"context"
	"sync"
)

// setLocks are the shard set's locks where POSIX record locks are not at
// hand: a turn per name, which makes the engines of one store take turns
// but not those of several processes (docs/shards.md says so).
type setLocks struct {
	mu    sync.Mutex
	names map[string]chan struct{}
}

// LockSet implements store.SetLocker, within this store only.
func (s *Store) LockSet(ctx context.Context, name string) (func(), error) {
	l := &s.setLocks
	l.mu.Lock()
	if l.names == nil {
		l.names = make(map[string]chan struct{})
	}
	turn := l.names[name]
	if turn == nil {
		turn = make(chan struct{}, 1)
		l.names[name] = turn
	}
	l.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Store) closeSetLocks() {}
