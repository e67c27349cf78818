package main

import (
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment of the child process TestReadOnlyDatabase starts as an
// unprivileged user when the tests run as root.
const (
	roDBEnv      = "FLOWLITE_TEST_CLI_RO_DB"
	roReadOnlyAt = "FLOWLITE_TEST_CLI_RO_NAMED" // what the write error must name
)

// nobody is the user the child process runs as when the test runs as root,
// who would otherwise bypass file modes.
const nobody = 65534

// readCommands are the commands that only read, each of which must work on
// a read-only database.
var readCommands = [][]string{
	{"runs"}, {"runs", "--json"}, {"show", sagaRun}, {"history", sagaRun}, {"stats"}, {"check"},
	{"health"}, {"queues"}, {"dead", "list"}, {"migrate", "status"},
}

// checkReadOnlyCLI runs every read command on path, then serve --read-only,
// and checks that a write (cancel) fails saying the database is read-only
// and naming what is (the file or its directory).
func checkReadOnlyCLI(t *testing.T, path, named string) {
	t.Helper()
	for _, args := range readCommands {
		r := flowlite(t, nil, append([]string{"--db", path}, args...)...)
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("flowlite %s as uid %d: exit %d, stderr %q", strings.Join(args, " "), os.Geteuid(), r.code, r.stderr)
		}
	}
	base, stop := serve(t, path, "--read-only")
	if code, body := get(t, base+"/runs/"+sagaRun); code != http.StatusOK || !strings.Contains(body, sagaRun) {
		t.Errorf("serve --read-only as uid %d: run page %d", os.Geteuid(), code)
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("serve --read-only: /healthz %d", code)
	}
	if code, stderr := stop(); code != exitOK {
		t.Errorf("serve --read-only: exit %d: %s", code, stderr)
	}
	r := flowlite(t, nil, "--db", path, "cancel", pendingRun)
	if r.code != exitError || !strings.Contains(r.stderr, "read-only") || !strings.Contains(r.stderr, named) {
		t.Errorf("cancel on a read-only database: exit %d, stderr %q, want read-only naming %s", r.code, r.stderr, named)
	}
}

// TestReadOnlyChild is the child process of TestReadOnlyDatabase; it does
// nothing in a normal run.
func TestReadOnlyChild(t *testing.T) {
	path := os.Getenv(roDBEnv)
	if path == "" {
		t.Skip("runs only as the child process of TestReadOnlyDatabase")
	}
	checkReadOnlyCLI(t, path, os.Getenv(roReadOnlyAt))
}

// asUnprivileged runs checkReadOnlyCLI as a user that file modes bind: this
// process unless it is root, else a copy of the test binary run as nobody.
func asUnprivileged(t *testing.T, path, named string) {
	t.Helper()
	if os.Geteuid() != 0 {
		checkReadOnlyCLI(t, path, named)
		return
	}
	binDir := t.TempDir()
	for _, d := range []string{binDir, filepath.Dir(binDir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(binDir, "flowlite.test")
	if err := copyFile(bin, 0o755); err != nil {
		t.Fatalf("copy test binary: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^TestReadOnlyChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), roDBEnv+"="+path, roReadOnlyAt+"="+named)
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

// copyFile copies the running test binary to dst.
func copyFile(dst string, perm os.FileMode) error {
	src, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// dirSums returns the SHA-256 of every file in dir, by name.
func dirSums(t *testing.T, dir string) map[string][sha256.Size]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][sha256.Size]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = sha256.Sum256(b)
	}
	return out
}

func sameSums(t *testing.T, dir string, before map[string][sha256.Size]byte) {
	t.Helper()
	after := dirSums(t, dir)
	for name, sum := range after {
		if old, ok := before[name]; !ok {
			t.Errorf("file %s was created", name)
		} else if old != sum {
			t.Errorf("file %s was changed", name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("file %s was removed", name)
		}
	}
}

// copyFixture copies the fixture database into a new directory others may
// enter and returns the directory and the copy's path.
func copyFixture(t *testing.T) (dir, path string) {
	t.Helper()
	src := fixtureDB(t)
	dir = t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "app.db")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// TestReadOnlyDatabase runs the read commands on a read-only file and on a
// file in a read-only directory, checks that writes fail naming what is
// read-only, and that nothing beside the file was created or changed.
func TestReadOnlyDatabase(t *testing.T) {
	if os.Getenv(roDBEnv) != "" {
		t.Skip("child process")
	}
	t.Parallel()
	t.Run("file 0444", func(t *testing.T) {
		t.Parallel()
		dir, path := copyFixture(t)
		for p, m := range map[string]os.FileMode{path: 0o444, dir: 0o777} {
			if err := os.Chmod(p, m); err != nil {
				t.Fatal(err)
			}
		}
		before := dirSums(t, dir)
		asUnprivileged(t, path, path)
		sameSums(t, dir, before)
	})
	t.Run("directory 0555", func(t *testing.T) {
		t.Parallel()
		dir, path := copyFixture(t)
		for p, m := range map[string]os.FileMode{path: 0o666, dir: 0o555} {
			if err := os.Chmod(p, m); err != nil {
				t.Fatal(err)
			}
		}
		before := dirSums(t, dir)
		asUnprivileged(t, path, dir)
		sameSums(t, dir, before)
	})
	// A writable file: the read commands leave no -wal or -shm behind
	// either (SQLite's mode=ro alone would).
	t.Run("writable file", func(t *testing.T) {
		t.Parallel()
		dir, path := copyFixture(t)
		before := dirSums(t, dir)
		for _, args := range readCommands {
			ok(t, path, args...)
		}
		_, stop := serve(t, path, "--read-only")
		stop()
		sameSums(t, dir, before)
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
