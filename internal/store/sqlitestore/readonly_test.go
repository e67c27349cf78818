package sqlitestore_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// Environment of the child process of the read-only tests: which check to
// run, on which database, expecting which runs.
const (
	roCaseEnv = "FLOWLITE_TEST_RO_CASE"
	roDBEnv   = "FLOWLITE_TEST_RO_DB"
	roWantEnv = "FLOWLITE_TEST_RO_WANT"
)

// TestReadOnlyChild is the entry point of the child process the read-only
// tests start as an unprivileged user; it does nothing in a normal run.
func TestReadOnlyChild(t *testing.T) {
	c := os.Getenv(roCaseEnv)
	if c == "" {
		t.Skip("runs only as the child process of the read-only tests")
	}
	roCheck(t, c, os.Getenv(roDBEnv), strings.Split(os.Getenv(roWantEnv), ","))
}

// roCheck runs one read-only check on path: "read" opens it with
// OpenReadOnly, reads the runs want and checks that writes are refused;
// "write" checks that Open refuses it with ErrReadOnly naming what is
// read-only (the file, or its directory).
func roCheck(t *testing.T, check, path string, want []string) {
	t.Helper()
	ctx := t.Context()
	switch check {
	case "read":
		s, err := sqlitestore.OpenReadOnly(ctx, path, sqlitestore.Options{})
		if err != nil {
			t.Fatalf("OpenReadOnly as uid %d: %v", os.Geteuid(), err)
		}
		defer func() {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}()
		for _, id := range want {
			if _, err := s.Reader().RunGet(ctx, id); err != nil {
				t.Errorf("read run %s as uid %d: %v", id, os.Geteuid(), err)
			}
		}
		if problems, err := s.IntegrityCheck(ctx); err != nil || len(problems) > 0 {
			t.Errorf("integrity check: %v %v", problems, err)
		}
		err = s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "written") })
		if !errors.Is(err, flowtype.ErrReadOnly) || !strings.Contains(err.Error(), path) {
			t.Errorf("write to a read-only store: %v, want ErrReadOnly naming %s", err, path)
		}
		if _, err := s.Checkpoint(ctx, flowtype.CheckpointTruncate); !errors.Is(err, flowtype.ErrReadOnly) {
			t.Errorf("checkpoint of a read-only store: %v, want ErrReadOnly", err)
		}
	case "write":
		s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
		if err == nil {
			s.Close()
			t.Fatalf("Open as uid %d of a database it cannot write succeeded", os.Geteuid())
		}
		name := os.Getenv(roWantEnv)
		if !errors.Is(err, flowtype.ErrReadOnly) || !strings.Contains(err.Error(), name) {
			t.Errorf("Open as uid %d: %v, want ErrReadOnly naming %s", os.Geteuid(), err, name)
		}
	default:
		t.Fatalf("unknown check %q", check)
	}
}

// asUnprivileged runs roCheck(check, path, want) as a user who cannot
// bypass file modes: this process when it is not root, else a copy of the
// test binary run as nobody. Root ignores file modes (but not a read-only
// mount), so chmod alone would test nothing.
func asUnprivileged(t *testing.T, check, path string, want ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		roCheck(t, check, path, want)
		return
	}
	binDir := t.TempDir()
	for _, d := range []string{binDir, filepath.Dir(binDir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(binDir, "store.test")
	if err := copyExecutable(bin); err != nil {
		t.Fatalf("cannot re-exec the test as an unprivileged user: copy test binary: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^TestReadOnlyChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), roCaseEnv+"="+check, roDBEnv+"="+path, roWantEnv+"="+strings.Join(want, ","))
	cmd.Dir = binDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := combinedOutputRetry(cmd)
	if err != nil {
		t.Fatalf("child process as uid %d: %v\n%s", nobody, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestReadOnlyChild") {
		t.Fatalf("child process did not run the check:\n%s", out)
	}
}

// roDir returns a new directory in a parent others may enter, and gives it
// back a mode the test cleanup can remove at the end.
func roDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	return dir
}

func chmod(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// TestOpenReadOnlyStore reads a database through OpenReadOnly in the ways a
// database can be read-only, and checks that nothing is written: no file is
// created, changed or removed beside it, and writes fail with ErrReadOnly.
func TestOpenReadOnlyStore(t *testing.T) {
	if os.Getenv(roCaseEnv) != "" {
		t.Skip("child process")
	}
	t.Parallel()

	// Any user, root included: a writable file opened read-only on purpose.
	t.Run("writable file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "flowlite.db")
		createDB(t, path)
		before := snapshot(t, dir)
		roCheck(t, "read", path, []string{"r1"})
		checkSnapshot(t, dir, before)
	})

	// While an engine writes: the reader sees what sits in the WAL only,
	// and after both close, SQLite's usual cleanup leaves the file alone.
	t.Run("writable file with a live writer", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "flowlite.db")
		createDB(t, path)
		w := openStore(t, path, sqlitestore.Options{})
		if err := w.Write(t.Context(), func(tx store.Tx) error { return insertRun(t.Context(), tx, "r2") }); err != nil {
			t.Fatal(err)
		}
		roCheck(t, "read", path, []string{"r1", "r2"})
	})

	// chmod 0444: the file cannot be written, its directory can. SQLite's
	// mode=ro would create -wal and -shm and leave them behind.
	t.Run("read-only file", func(t *testing.T) {
		t.Parallel()
		dir := roDir(t)
		path := filepath.Join(dir, "flowlite.db")
		createDB(t, path)
		chmod(t, path, 0o444)
		chmod(t, dir, 0o777)
		before := snapshot(t, dir)
		asUnprivileged(t, "read", path, "r1")
		asUnprivileged(t, "write", path, path)
		checkSnapshot(t, dir, before)
	})

	// chmod 0555 on the directory: the file could be written, but SQLite
	// cannot create -wal and -shm beside it ("unable to open database file"
	// or "attempt to write a readonly database" before this change).
	t.Run("read-only directory", func(t *testing.T) {
		t.Parallel()
		dir := roDir(t)
		path := filepath.Join(dir, "flowlite.db")
		createDB(t, path)
		chmod(t, path, 0o666)
		chmod(t, dir, 0o555)
		before := snapshot(t, dir)
		asUnprivileged(t, "read", path, "r1")
		asUnprivileged(t, "write", path, dir)
		checkSnapshot(t, dir, before)
	})

	// A read-only directory while an engine (of a user who may write) has
	// the file open: the reader goes through the engine's -wal and -shm.
	t.Run("read-only directory with a live writer", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("needs a writer that may write where the reader may not: run as root")
		}
		dir := roDir(t)
		path := filepath.Join(dir, "flowlite.db")
		createDB(t, path)
		w := openStore(t, path, sqlitestore.Options{})
		if err := w.Write(t.Context(), func(tx store.Tx) error { return insertRun(t.Context(), tx, "r2") }); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path + "-wal"); err != nil {
			t.Fatalf("the writer has no WAL: %v", err)
		}
		names := func() []string {
			es, _ := os.ReadDir(dir)
			var n []string
			for _, e := range es {
				n = append(n, e.Name())
			}
			return n
		}
		was := names()
		asUnprivileged(t, "read", path, "r1", "r2")
		if now := names(); strings.Join(now, " ") != strings.Join(was, " ") {
			t.Errorf("files %v became %v", was, now)
		}
	})
}

// combinedOutputRetry runs cmd, retrying while exec fails with "text file
// busy": a process forked meanwhile by a parallel test may briefly hold the
// descriptor the binary was written through.
func combinedOutputRetry(cmd *exec.Cmd) ([]byte, error) {
	for i := 0; ; i++ {
		c := *cmd // a Cmd runs once: start a fresh copy each time
		out, err := c.CombinedOutput()
		if !errors.Is(err, syscall.ETXTBSY) || i == 20 {
			return out, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
