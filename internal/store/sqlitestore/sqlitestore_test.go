package sqlitestore_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
	"github.com/flowlite/flowlite/internal/store/storetest"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envSetLockHolder); path != "" {
		os.Exit(holdSetLock(path))
	}
	goleak.VerifyTestMain(m)
}

const base = int64(1_700_000_000_000)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "flowlite.db"), sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestConformanceOpenDB runs the suite on a store over a pool the caller
// opened, where reads and writes share one pool.
func TestConformanceOpenDB(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store {
		db := openDSN(t, filepath.Join(t.TempDir(), "flowlite.db"), "")
		s, err := sqlitestore.OpenDB(t.Context(), db, sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// openStore opens path and closes the store when the test ends.
func openStore(t *testing.T, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// openDSN opens path with sqlitestore.DSN and closes the pool when the test
// ends.
func openDSN(t *testing.T, path string, sync sqlitestore.Synchronous) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqlitestore.DSN(path, sync))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func insertRun(ctx context.Context, tx store.Tx, id string) error {
	ok, err := tx.RunInsert(ctx, store.RunInsertParams{
		ID: id, Workflow: flowtype.WorkflowKey{Name: "order", Version: 1}, Queue: "q", Input: []byte(`{}`), RunAt: base, Now: base,
	})
	if err == nil && !ok {
		err = fmt.Errorf("run %s already exists", id)
	}
	return err
}

// createDB creates a migrated database holding one run at path, and closes it.
func createDB(t *testing.T, path string) {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(t.Context(), func(tx store.Tx) error { return insertRun(t.Context(), tx, "r1") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// snapshot returns the SHA-256 of every file in dir, by name.
func snapshot(t *testing.T, dir string) map[string][sha256.Size]byte {
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

// checkSnapshot fails the test when a file of dir was created, removed or
// changed since before.
func checkSnapshot(t *testing.T, dir string, before map[string][sha256.Size]byte) {
	t.Helper()
	after := snapshot(t, dir)
	for name, sum := range after {
		old, ok := before[name]
		switch {
		case !ok:
			t.Errorf("file %s was created", name)
		case old != sum:
			t.Errorf("file %s was modified", name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("file %s was removed", name)
		}
	}
}

type pragmas struct {
	journalMode      string
	synchronous      int
	foreignKeys      int
	busyTimeout      int
	journalSizeLimit int64
	queryOnly        int
}

func readPragmas(ctx context.Context, conn *sql.Conn) (pragmas, error) {
	var p pragmas
	for _, q := range []struct {
		name string
		dst  any
	}{
		{"journal_mode", &p.journalMode},
		{"synchronous", &p.synchronous},
		{"foreign_keys", &p.foreignKeys},
		{"busy_timeout", &p.busyTimeout},
		{"journal_size_limit", &p.journalSizeLimit},
		{"query_only", &p.queryOnly},
	} {
		if err := conn.QueryRowContext(ctx, "PRAGMA "+q.name).Scan(q.dst); err != nil {
			return p, fmt.Errorf("pragma %s: %w", q.name, err)
		}
	}
	p.journalMode = strings.ToLower(p.journalMode)
	return p, nil
}

// checkEveryConn holds n connections of db at once, so that each is a
// distinct pooled connection, and checks the settings of each.
func checkEveryConn(t *testing.T, name string, db *sql.DB, n int, want pragmas) {
	t.Helper()
	ctx := t.Context()
	conns := make([]*sql.Conn, n)
	for i := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("%s: connection %d: %v", name, i, err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		got, err := readPragmas(ctx, c)
		if err != nil {
			t.Fatalf("%s: connection %d: %v", name, i, err)
		}
		if got != want {
			t.Errorf("%s: connection %d has %+v, want %+v", name, i, got, want)
		}
	}
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		sync sqlitestore.Synchronous
		want int
	}{
		{"Default", "", 2},
		{"Full", sqlitestore.SynchronousFull, 2},
		{"Normal", sqlitestore.SynchronousNormal, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "flowlite.db")
			const readConns = 3
			s := openStore(t, path, sqlitestore.Options{Synchronous: c.sync, ReadConns: readConns})
			want := pragmas{
				journalMode: "wal", synchronous: c.want, foreignKeys: 1,
				busyTimeout: sqlitestore.BusyTimeoutMillis, journalSizeLimit: 64 << 20,
			}
			writer, reader := sqlitestore.Pools(s)
			checkEveryConn(t, "writer", writer, 1, want)
			readOnly := want
			readOnly.queryOnly = 1
			checkEveryConn(t, "reader pool", reader, readConns, readOnly)

			db := openDSN(t, path, c.sync)
			db.SetMaxOpenConns(4)
			checkEveryConn(t, "pool opened with DSN", db, 4, want)
		})
	}
	if sqlitestore.BusyTimeoutMillis != 5000 {
		t.Errorf("BusyTimeoutMillis = %d, want 5000", sqlitestore.BusyTimeoutMillis)
	}
}

func TestOpenRejectsBadSynchronous(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "flowlite.db")
	_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{Synchronous: "OFF"})
	if err == nil || !strings.Contains(err.Error(), "synchronous") {
		t.Errorf("open with synchronous OFF: error %v, want one naming synchronous", err)
	}
	checkSnapshot(t, dir, nil)
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	createDB(t, path)
	s := openStore(t, path, sqlitestore.Options{})
	if _, err := s.Reader().RunGet(t.Context(), "r1"); err != nil {
		t.Errorf("run written before reopening: %v", err)
	}
	if problems, err := s.IntegrityCheck(t.Context()); err != nil || len(problems) != 0 {
		t.Errorf("integrity check = %v, %v", problems, err)
	}
}

func TestOpenNotDatabase(t *testing.T) {
	t.Parallel()
	random := make([]byte, 8192)
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	cases := []struct {
		name    string
		content []byte
	}{
		{"RandomBytes", random},
		{"TextFile", []byte(strings.Repeat("flowlite is not a database, this is a text file.\n", 200))},
		{"ShortTextFile", []byte("hello\n")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "flowlite.db")
			if err := os.WriteFile(path, c.content, 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, store.ErrNotDatabase) {
				t.Fatalf("open: error %v, want ErrNotDatabase", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			checkSnapshot(t, dir, before)
		})
	}
	t.Run("Directory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		_, err := sqlitestore.Open(t.Context(), dir, sqlitestore.Options{})
		if !errors.Is(err, store.ErrNotDatabase) {
			t.Errorf("open of a directory: error %v, want ErrNotDatabase", err)
		}
		checkSnapshot(t, dir, nil)
	})
}

func TestOpenCorrupt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		corrupt func(f *os.File) error
	}{
		{"ZeroedHeader", func(f *os.File) error {
			_, err := f.WriteAt(make([]byte, 100), 0)
			return err
		}},
		{"TruncatedHeader", func(f *os.File) error { return f.Truncate(50) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "flowlite.db")
			createDB(t, path)
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(c.corrupt(f), f.Close()); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)
			s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, store.ErrNotDatabase) {
				t.Fatalf("open: error %v, want ErrNotDatabase", err)
			}
			checkSnapshot(t, dir, before)
		})
	}
}

// latestMigration returns the highest migration version this binary has.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	names, err := fs.Glob(migrations.SQLite(), "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("list migrations: %v, %v", names, err)
	}
	var latest int64
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		latest = max(latest, v)
	}
	return latest
}

func TestOpenSchemaTooNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "flowlite.db")
	createDB(t, path)
	db, err := sql.Open("sqlite", sqlitestore.DSN(path, ""))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(t.Context(), "INSERT INTO flowlite_goose_db_version (version_id, is_applied) VALUES (99, 1)")
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)

	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("open: error %v, want ErrSchemaTooNew", err)
	}
	msg := strings.ReplaceAll(err.Error(), path, "")
	for _, v := range []int64{99, latestMigration(t)} {
		if !regexp.MustCompile(`\b` + strconv.FormatInt(v, 10) + `\b`).MatchString(msg) {
			t.Errorf("error %q does not name version %d", err, v)
		}
	}
	checkSnapshot(t, dir, before)

	// OpenDB refuses it too.
	db = openDSN(t, path, "")
	if _, err := sqlitestore.OpenDB(t.Context(), db, sqlitestore.Options{}); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Errorf("OpenDB: error %v, want ErrSchemaTooNew", err)
	}
}

// readOnlyEnv names the database the child process of TestOpenReadOnly
// opens; it is set only in that child.
const readOnlyEnv = "FLOWLITE_TEST_READONLY_DB"

// nobody is the user the child process runs as when the test runs as root,
// who could otherwise write to any file.
const nobody = 65534

func TestOpenReadOnly(t *testing.T) {
	if path := os.Getenv(readOnlyEnv); path != "" {
		readOnlyChild(t, path)
		return
	}
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "flowlite.db")
	createDB(t, path)
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)

	if os.Geteuid() != 0 {
		readOnlyChild(t, path)
		checkSnapshot(t, dir, before)
		return
	}

	// Root bypasses file modes: check as nobody, in a child process that
	// runs this test only. The test directories are root's, mode 0755, so
	// nobody can neither write the file nor create -wal/-shm beside it.
	binDir := t.TempDir()
	for _, d := range []string{dir, binDir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary lives in go's private work directory; copy it where
	// nobody can run it.
	bin := filepath.Join(binDir, "store.test")
	if err := copyExecutable(bin); err != nil {
		t.Fatalf("cannot re-exec the test as an unprivileged user: copy test binary: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^TestOpenReadOnly$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), readOnlyEnv+"="+path)
	cmd.Dir = binDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process as uid %d: %v\n%s", nobody, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestOpenReadOnly") {
		t.Fatalf("child process did not run the test:\n%s", out)
	}
	checkSnapshot(t, dir, before)
}

// readOnlyChild checks that the read-only database at path is refused.
func readOnlyChild(t *testing.T, path string) {
	t.Helper()
	// Prove the premise: this process cannot write the file.
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
		t.Fatalf("uid %d can write %s: the test does not exercise a read-only file", os.Geteuid(), path)
	}
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, flowtype.ErrReadOnly) {
		t.Fatalf("open of a read-only file as uid %d: error %v, want ErrReadOnly", os.Geteuid(), err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
}

func copyExecutable(dst string) error {
	src, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

func TestWriteInTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openDSN(t, filepath.Join(t.TempDir(), "flowlite.db"), "")
	s, err := sqlitestore.OpenDB(ctx, db, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}

	insertIn := func(id string) *sql.Tx {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.WriteInTx(ctx, tx, func(stx store.Tx) error {
			if stx.SQL() != tx {
				t.Error("Tx.SQL is not the caller's transaction")
			}
			if err := insertRun(ctx, stx, id); err != nil {
				return err
			}
			_, err := stx.RunGet(ctx, id)
			return err
		})
		if err != nil {
			tx.Rollback()
			t.Fatalf("write in caller's transaction: %v", err)
		}
		// Not visible before the caller commits.
		if _, err := s.Reader().RunGet(ctx, id); !errors.Is(err, flowtype.ErrRunNotFound) {
			t.Errorf("run %s visible before the caller committed: error %v", id, err)
		}
		return tx
	}

	if err := insertIn("rolled-back").Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reader().RunGet(ctx, "rolled-back"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("run of a rolled back transaction: error %v, want ErrRunNotFound", err)
	}
	if err := insertIn("committed").Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reader().RunGet(ctx, "committed"); err != nil {
		t.Errorf("run of a committed transaction: %v", err)
	}

	// fn's error reaches the caller, who rolls back.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.WriteInTx(ctx, tx, func(store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("WriteInTx returned %v, want fn's error", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteInTx(ctx, nil, func(store.Tx) error { return nil }); err == nil {
		t.Error("WriteInTx with a nil transaction succeeded")
	}

	// The store does not own the caller's pool.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("caller's pool unusable after the store closed: %v", err)
	}
}

func TestOpenDBRefusesNonWAL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "plain.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, err = sqlitestore.OpenDB(ctx, db, sqlitestore.Options{})
	if err == nil || !strings.Contains(err.Error(), "journal_mode") {
		t.Fatalf("OpenDB of a pool without WAL: error %v, want one naming journal_mode", err)
	}
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("refused database got %d schema objects, want none", tables)
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if strings.EqualFold(mode, "wal") {
		t.Error("refused database was switched to WAL")
	}
}

func TestWriteAfterClose(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "flowlite.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	called := false
	err = s.Write(t.Context(), func(store.Tx) error { called = true; return nil })
	if !errors.Is(err, flowtype.ErrClosed) || called {
		t.Errorf("Write after Close: error %v, fn called %v; want ErrClosed and not called", err, called)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
