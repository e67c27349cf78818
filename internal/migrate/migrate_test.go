package migrate_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/flowlite/flowlite/internal/migrate"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// countingLocker counts the migration locks Up takes.
type countingLocker struct{ locks, unlocks atomic.Int32 }

func (l *countingLocker) SessionLock(context.Context, *sql.Conn) error {
	l.locks.Add(1)
	return nil
}

func (l *countingLocker) SessionUnlock(context.Context, *sql.Conn) error {
	l.unlocks.Add(1)
	return nil
}

// TestUpLocksOnlyToApply: Up takes the dialect's lock to migrate a fresh
// database (to read its version, then to apply the migrations), and none
// on a current one, which it only reads; each step goes
// through the dialect's Retry.
func TestUpLocksOnlyToApply(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("sqlite", sqlitestore.DSN(filepath.Join(t.TempDir(), "m.db"), sqlitestore.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var locker countingLocker
	var steps int
	d := sqlitestore.Dialect()
	d.Locker = &locker
	d.Retry = func(_ context.Context, step func() error) error {
		steps++
		return step()
	}

	known, err := migrate.Known(db, d)
	if err != nil {
		t.Fatal(err)
	}
	if known.Latest == 0 || known.Current != 0 || known.Behind == 0 {
		t.Fatalf("Known = %+v, want every migration behind", known)
	}
	st, err := migrate.Up(ctx, db, d)
	if err != nil {
		t.Fatal(err)
	}
	if st.Current != known.Latest || st.Pending() {
		t.Errorf("Up of a fresh database = %+v, want version %d", st, known.Latest)
	}
	// Twice: to read the version under it, then to apply what is missing.
	if l, u := locker.locks.Load(), locker.unlocks.Load(); l != 2 || u != 2 {
		t.Errorf("Up of a fresh database took the lock %d times and released it %d times, want twice", l, u)
	}
	if steps != 2 {
		t.Errorf("Up of a fresh database ran %d steps through Retry, want 2 (read, apply)", steps)
	}

	steps = 0
	if st, err = migrate.Up(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	if st.Current != known.Latest {
		t.Errorf("Up of a current database = %+v, want version %d", st, known.Latest)
	}
	if l := locker.locks.Load(); l != 2 {
		t.Errorf("Up of a current database took the lock: %d locks in all, want the first Up's only", l)
	}
	if steps != 1 {
		t.Errorf("Up of a current database ran %d steps, want 1 (read)", steps)
	}
	if st, err = migrate.StatusOf(ctx, db, d); err != nil || st.Current != known.Latest || st.Behind != 0 {
		t.Errorf("StatusOf = %+v, %v; want version %d, nothing behind", st, err, known.Latest)
	}
}
