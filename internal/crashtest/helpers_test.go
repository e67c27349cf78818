package crashtest

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, for raw checks

	"github.com/flowlite/flowlite/flow/flowsqlite"
)

type rawDB = *sql.DB

// shortBusy is the busy timeout of the engines with one-second leases: a
// lease must outlast a heartbeat's interval plus its wait for the lock.
const shortBusy = 500 * time.Millisecond

// openRaw opens the database file for raw SQL checks, with the settings
// flowlite uses.
func openRaw(t testing.TB, path string) rawDB {
	t.Helper()
	db, err := sql.Open("sqlite", flowsqlite.DSN(path, flowsqlite.SynchronousFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dump returns the rows of query, each formatted as one string, so that
// two states of the database can be compared exactly.
func dump(t testing.TB, db rawDB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			fmt.Fprintf(&b, "%s=%v ", cols[i], v)
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// runState is everything recorded about one run: its row (status, output,
// fence, lease, updated_at …), its step rows and its history.
type runState struct {
	run, steps, events []string
}

func snapshot(t testing.TB, db rawDB, id string) runState {
	t.Helper()
	return runState{
		run:    dump(t, db, "SELECT * FROM flowlite_runs WHERE id = ?", id),
		steps:  dump(t, db, "SELECT * FROM flowlite_steps WHERE run_id = ? ORDER BY name, occurrence", id),
		events: dump(t, db, "SELECT * FROM flowlite_events WHERE run_id = ? ORDER BY id", id),
	}
}

func (s runState) diff(other runState) string {
	var b strings.Builder
	for _, part := range []struct {
		name string
		a, b []string
	}{{"run", s.run, other.run}, {"steps", s.steps, other.steps}, {"events", s.events, other.events}} {
		if strings.Join(part.a, "\n") != strings.Join(part.b, "\n") {
			fmt.Fprintf(&b, "%s before:\n  %s\n%s after:\n  %s\n", part.name, strings.Join(part.a, "\n  "), part.name, strings.Join(part.b, "\n  "))
		}
	}
	return b.String()
}

// logBuffer collects an engine's logs for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
