package sqlitestore_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// damage flips the high bit of the first byte of the value in column of
// the rows of table that where selects, as a bad sector or a stray write
// would. (A flip of a low bit can leave valid JSON, '2' becoming '3': no
// check short of a checksum sees that.)
func damage(t *testing.T, db *sql.DB, table, column, where string, args ...any) {
	t.Helper()
	ctx := t.Context()
	var old []byte
	if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s", column, table, where), args...).Scan(&old); err != nil {
		t.Fatalf("read stored %s of %s: %v", column, table, err)
	}
	bad := bytes.Clone(old)
	bad[0] ^= 0x80
	if _, err := db.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s", table, column, where), append([]any{bad}, args...)...); err != nil {
		t.Fatalf("damage stored %s of %s: %v", column, table, err)
	}
}

// TestIntegrityCheckFindsDamagedValues damages stored values byte by byte
// and expects IntegrityCheck, which used to report only SQLite's
// integrity_check (blind to the bytes of a value), to name each damaged
// one.
func TestIntegrityCheckFindsDamagedValues(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "flowlite.db")
	s := openStore(t, path, sqlitestore.Options{})
	step := store.StepKey{RunID: "r1", Name: "double", Occurrence: 0}
	err := s.Write(ctx, func(tx store.Tx) error {
		if err := insertRun(ctx, tx, "r1"); err != nil {
			return err
		}
		if _, err := tx.StepBegin(ctx, store.StepBeginParams{Key: step, Input: []byte(`21`), Now: base}); err != nil {
			return err
		}
		if err := tx.StepComplete(ctx, store.StepCompleteParams{Key: step, Output: []byte(`{"n":42}`), Now: base + 1}); err != nil {
			return err
		}
		// A run nobody works, holding a signal it has not received yet.
		if err := insertRun(ctx, tx, "r2"); err != nil {
			return err
		}
		_, err := tx.SignalSend(ctx, store.Signal{RunID: "r2", Name: "late", Payload: []byte(`{"n":1}`), SentAt: base})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := s.IntegrityCheck(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("check of a sound database: %q, %v", problems, err)
	}

	db := openDSN(t, path, "")
	damage(t, db, "flowlite_runs", "input", "id = ?", "r1")
	problems, err := s.IntegrityCheck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "run r1") || !strings.Contains(problems[0], "input") {
		t.Fatalf("check after damaging the run's input: %q, want one problem naming run r1's input", problems)
	}

	damage(t, db, "flowlite_steps", "output", "run_id = ?", "r1")
	damage(t, db, "flowlite_signals", "payload", "run_id = ?", "r2")
	problems, err = s.IntegrityCheck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(problems, "\n")
	for _, want := range []string{"run r1: stored input", "run r1 step double#0: stored output", "run r2 signal late (id 1): stored payload"} {
		if !strings.Contains(joined, want) {
			t.Errorf("check does not report %q:\n%s", want, joined)
		}
	}
}

// TestOpenRefusesDamagedPage damages a b-tree page of a database file and
// expects Open, which used to accept it and write on, to refuse it with
// ErrCorrupt (and ErrNotDatabase) naming the file, without changing a byte
// of it; SkipQuickCheck opens it all the same.
func TestOpenRefusesDamagedPage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "flowlite.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, id) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The root page of an index the store does not read at open: damage
	// there goes unnoticed until a query walks that index.
	db, err := sql.Open("sqlite", sqlitestore.DSN(path, ""))
	if err != nil {
		t.Fatal(err)
	}
	var page, pageSize int64
	err = errors.Join(
		db.QueryRowContext(ctx, "SELECT max(rootpage) FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").Scan(&page),
		db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize),
		db.Close(),
	)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Byte 0 of a b-tree page is its type (2, 5, 10 or 13); 0 is none.
	_, err = f.WriteAt([]byte{0}, (page-1)*pageSize)
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)

	s, err = sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a database with a damaged page")
	}
	if !errors.Is(err, store.ErrCorrupt) || !errors.Is(err, store.ErrNotDatabase) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open of a damaged file: %v, want ErrCorrupt (and ErrNotDatabase) naming %s", err, path)
	}
	checkSnapshot(t, dir, before)

	// The check can be skipped for files known to be sound.
	s, err = sqlitestore.Open(ctx, path, sqlitestore.Options{SkipQuickCheck: true})
	if err != nil {
		t.Fatalf("Open with SkipQuickCheck: %v", err)
	}
	s.Close()
}
