//go:build linux || darwin || freebsd || netbsd || openbsd

package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The shard set's locks (store.SetLocker) are POSIX record locks on bytes
// of a file beside shard 0, "<file>-limits", one byte per name (by a hash
// of it, so two names may share a byte and take turns together, which is
// only slower). A record lock is the process's: the kernel gives it back
// when the process ends, a SIGKILL included, so a crashed engine never
// leaves a set locked.
//
// Because record locks belong to the process, not to a descriptor, the
// goroutines of one process (and the stores of one file it opened twice)
// take turns per file and name first, and the process opens
// each lock file once: closing any descriptor of it would give back every
// lock the process holds on it.

// setLockBytes is how many bytes of the lock file names hash to.
const setLockBytes = 1 << 16

// lockFile is one lock file of this process, shared by the stores of its
// database.
type lockFile struct {
	f     *os.File
	refs  int
	names map[string]chan struct{} // a turn per name: a buffer of one
	// inUse is held (read) from a lock's taking to its giving back, so
	// that the last store to let go of the file closes it only between
	// locks.
	inUse sync.RWMutex
}

// lockFiles are this process's lock files, by path.
var lockFiles = struct {
	sync.Mutex
	byPath map[string]*lockFile
}{byPath: make(map[string]*lockFile)}

// setLocks is a store's hold on its lock file, opened at its first lock.
type setLocks struct {
	mu   sync.Mutex
	path string // "" until opened
	file *lockFile
}

// LockSet implements store.SetLocker.
func (s *Store) LockSet(ctx context.Context, name string) (func(), error) {
	lf, err := s.lockFile(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock the shard set: %w", err)
	}
	lockFiles.Lock()
	turn := lf.names[name]
	if turn == nil {
		turn = make(chan struct{}, 1)
		lf.names[name] = turn
	}
	lockFiles.Unlock()

	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	lf.inUse.RLock()
	release := func() { lf.inUse.RUnlock(); <-turn }
	if lf.f == nil { // a database in memory: no other process shares it
		return release, nil
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: int64(h.Sum32() % setLockBytes), Len: 1}
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		err := syscall.FcntlFlock(lf.f.Fd(), syscall.F_SETLK, &lk)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EINTR) {
			release()
			return nil, fmt.Errorf("lock the shard set (%s): %w", lf.f.Name(), err)
		}
		select {
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	return func() {
		un := lk
		un.Type = syscall.F_UNLCK
		_ = syscall.FcntlFlock(lf.f.Fd(), syscall.F_SETLK, &un)
		release()
	}, nil
}

// lockFile opens (once per process) the lock file beside the store's
// database.
func (s *Store) lockFile(ctx context.Context) (*lockFile, error) {
	s.setLocks.mu.Lock()
	defer s.setLocks.mu.Unlock()
	if s.setLocks.file != nil {
		return s.setLocks.file, nil
	}
	// The file of the main database, also for a pool the caller opened
	// (whose DSN may say more than the path); none in memory.
	path, err := s.Path(ctx)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		path += "-limits"
	}
	lockFiles.Lock()
	defer lockFiles.Unlock()
	lf := lockFiles.byPath[path]
	if lf == nil {
		lf = &lockFile{names: make(map[string]chan struct{})}
		if path != "" {
			if lf.f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644); err != nil {
				return nil, err
			}
		}
		lockFiles.byPath[path] = lf
	}
	lf.refs++
	s.setLocks.path, s.setLocks.file = path, lf
	return lf, nil
}

// closeSetLocks lets go of the store's lock file; the last store of the
// process to let go closes it.
func (s *Store) closeSetLocks() {
	s.setLocks.mu.Lock()
	defer s.setLocks.mu.Unlock()
	lf := s.setLocks.file
	if lf == nil {
		return
	}
	s.setLocks.file = nil
	lockFiles.Lock()
	defer lockFiles.Unlock()
	if lf.refs--; lf.refs == 0 {
		delete(lockFiles.byPath, s.setLocks.path)
		if lf.f != nil {
			lf.inUse.Lock() // no lock is held on it
			lf.f.Close()
			lf.inUse.Unlock()
		}
	}
}
