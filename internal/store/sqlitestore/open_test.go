package sqlitestore_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// TestWriteFailsWithErrBusyAfterTheBusyTimeout: a connection of its
// own holding BEGIN EXCLUSIVE, as another process would, keeps a Write
// waiting for Options.BusyTimeout, after which it fails with ErrBusy
// naming the file and the wait, and writes nothing. Once the lock is given
// back, writes go through.
func TestWriteFailsWithErrBusyAfterTheBusyTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	const busy = 300 * time.Millisecond
	s := openStore(t, path, sqlitestore.Options{BusyTimeout: busy})

	conn, err := openDSN(t, path, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "blocked") })
	waited := time.Since(start)
	if !errors.Is(err, flowtype.ErrBusy) {
		t.Fatalf("Write under an exclusive lock: %v, want ErrBusy", err)
	}
	for _, want := range []string{path, "busy timeout of 300ms", "database is locked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// The upper bound guards against a retry loop, with room for the race
	// detector's slowdown.
	if waited < busy || waited > 10*busy {
		t.Errorf("Write gave up after %s, want about the busy timeout of %s", waited, busy)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reader().RunGet(ctx, "blocked"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("the refused Write left a run behind: %v", err)
	}
	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "after") }); err != nil {
		t.Errorf("Write after the lock was given back: %v", err)
	}
}

// TestWriteToAFullDatabaseFailsWithErrFull caps a database just above its
// size, as a full disk would, and expects a write that needs more room to
// fail with ErrDiskFull and change nothing; with room again it goes through.
func TestWriteToAFullDatabaseFailsWithErrFull(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	createDB(t, path)
	var pages int64
	if err := openDSN(t, path, "").QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	capped, err := sql.Open("sqlite", sqlitestore.DSN(path, "")+"&_pragma=max_page_count("+strconv.FormatInt(pages+4, 10)+")")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { capped.Close() })
	s, err := sqlitestore.OpenDB(ctx, capped, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	big := store.RunInsertParams{
		ID: "big", Workflow: flowtype.WorkflowKey{Name: "order", Version: 1}, Queue: "q",
		Input: []byte(`"` + strings.Repeat("x", 1<<20) + `"`), RunAt: base, Now: base,
	}
	insertBig := func(tx store.Tx) error { _, err := tx.RunInsert(ctx, big); return err }
	if err := s.Write(ctx, insertBig); !errors.Is(err, flowtype.ErrDiskFull) {
		t.Fatalf("Write past the database's cap: %v, want ErrDiskFull", err)
	}
	if _, err := s.Reader().RunGet(ctx, "big"); !errors.Is(err, flowtype.ErrRunNotFound) {
		t.Errorf("the refused Write left a run behind: %v", err)
	}
	if _, err := s.Reader().RunGet(ctx, "r1"); err != nil {
		t.Errorf("the run written before: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	roomy := openStore(t, path, sqlitestore.Options{})
	if err := roomy.Write(ctx, insertBig); err != nil {
		t.Fatalf("Write with room again: %v", err)
	}
	if _, err := roomy.Reader().RunGet(ctx, "big"); err != nil {
		t.Errorf("the run written with room again: %v", err)
	}
}
