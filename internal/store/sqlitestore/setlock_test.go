//go:build linux || darwin || freebsd || netbsd || openbsd

package sqlitestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// envSetLockHolder makes the test binary a process that takes the set
// lock "q" of the database it names, prints "locked", and holds it until
// it is killed.
const envSetLockHolder = "FLOWLITE_TEST_SETLOCK_HOLDER"

func holdSetLock(path string) int {
	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if _, err := s.LockSet(context.Background(), "q"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("locked")
	select {}
}

// A shard set's lock excludes other processes and the other stores of one
// process, names apart do not exclude each other, and a process killed
// while it holds the lock gives it back.
func TestLockSetAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shard0.db")
	a := openStore(t, path, sqlitestore.Options{})
	b := openStore(t, path, sqlitestore.Options{})

	unlock, err := a.LockSet(t.Context(), "q")
	if err != nil {
		t.Fatal(err)
	}
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	if _, err := b.LockSet(short(), "q"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second store of the file took the lock a first one holds: %v", err)
	}
	other, err := b.LockSet(short(), "another queue")
	if err != nil {
		t.Fatalf("a lock of another name waited: %v", err)
	}
	other()
	unlock()

	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), envSetLockHolder+"="+path)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("the holder process: %q, %v", line, err)
	}
	if _, err := a.LockSet(short(), "q"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("took the lock another process holds: %v", err)
	}
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	unlock, err = a.LockSet(ctx, "q")
	if err != nil {
		t.Fatalf("the lock of a killed process was not given back: %v", err)
	}
	unlock()
}
