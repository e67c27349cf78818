package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// While HoldWrites holds the writer, callers' writes wait and another
// connection takes the write lock at once, even with callers queued; after
// release the waiting writes commit.
func TestHoldWritesLetsAnotherConnectionWrite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	s := openStore(t, path, sqlitestore.Options{})
	other := openDSN(t, path, "")
	if _, err := other.ExecContext(ctx, "CREATE TABLE side (id INTEGER)"); err != nil {
		t.Fatal(err)
	}
	otherNow, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer otherNow.Close()
	if _, err := otherNow.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		t.Fatal(err)
	}

	// Callers keep the writer busy throughout.
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for p := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				id := fmt.Sprintf("busy-%d-%d", p, i)
				if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, id) }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		for range 4 {
			if err := <-errs; err != nil {
				t.Errorf("busy writer: %v", err)
			}
		}
	}()

	release, err := s.HoldWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A write of the store's waits while the hold lasts.
	held := make(chan error, 1)
	go func() {
		held <- s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "held") })
	}()
	// The other connection writes without waiting at all: with no busy
	// timeout, a writer in a transaction would make it fail with
	// SQLITE_BUSY.
	if _, err := otherNow.ExecContext(ctx, "INSERT INTO side VALUES (1)"); err != nil {
		t.Fatalf("write of another connection while the writer is held: %v", err)
	}
	select {
	case err := <-held:
		t.Fatalf("a store write committed while the writer was held (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	release() // a second release is harmless
	select {
	case err := <-held:
		if err != nil {
			t.Fatalf("write after the release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a store write still waits after the hold was released")
	}
}

// HoldWrites honours its context while the writer is busy elsewhere, and
// fails with ErrClosed once the store closed.
func TestHoldWritesErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	release, err := s.HoldWrites(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.HoldWrites(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second hold while the first lasts: %v, want context.DeadlineExceeded", err)
	}
	release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HoldWrites(t.Context()); !errors.Is(err, flowtype.ErrClosed) {
		t.Errorf("hold after Close: %v, want ErrClosed", err)
	}
}

// WALInUse reads how much of the WAL holds frames: the file's size while it
// only grew, and far less once a checkpoint restarted it, though the file
// keeps its length.
func TestWALInUse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	s := openStore(t, path, sqlitestore.Options{CheckpointInterval: -1})
	for i := range 50 {
		id := fmt.Sprintf("r%d", i)
		if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, id) }); err != nil {
			t.Fatal(err)
		}
	}
	grown := walFileSize(t, path)
	if got, err := s.WALInUse(); err != nil || got != grown {
		t.Fatalf("WALInUse while the WAL only grew = %d, %v; want the file's size %d", got, err, grown)
	}
	if res, err := s.Checkpoint(ctx, flowtype.CheckpointPassive); err != nil || res.Checkpointed != res.WALFrames {
		t.Fatalf("passive checkpoint of an idle store: %+v, %v; want every frame copied", res, err)
	}
	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "after") }); err != nil {
		t.Fatal(err)
	}
	inUse, err := s.WALInUse()
	if err != nil {
		t.Fatal(err)
	}
	if size := walFileSize(t, path); size != grown || inUse <= 0 || inUse >= grown/4 {
		t.Fatalf("after a restart and one write: WAL file %d bytes (want %d, unchanged), in use %d (want some, and far less)", size, grown, inUse)
	}
	var frames int64
	if err := sqlReader(t, path).QueryRowContext(ctx, "PRAGMA page_size").Scan(&frames); err != nil {
		t.Fatal(err)
	}
	if (inUse-32)%(frames+24) != 0 {
		t.Errorf("in use %d is not a WAL header and whole frames of %d bytes", inUse, frames+24)
	}
}

// walFileSize returns the size of the WAL file of the database at path.
func walFileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// sqlReader opens a read-only pool on the database at path.
func sqlReader(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
