package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// TestLeaseMustOutlastBusyTimeout: a heartbeat may wait BusyTimeout for
// the lock, so a lease shorter than a heartbeat interval plus that wait
// could lapse under a live worker. Open refuses it, naming the values.
func TestLeaseMustOutlastBusyTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  flow.Config
		busy time.Duration // flowsqlite.Options.BusyTimeout
		want string        // "" = accepted
	}{
		{"default busy timeout", flow.Config{LeaseTimeout: time.Second}, 0,
			"lease timeout 1s must be longer than the heartbeat interval 333.333333ms plus the busy timeout 5s"},
		{"equal", flow.Config{LeaseTimeout: 5 * time.Second, HeartbeatInterval: time.Second}, 4 * time.Second,
			"lease timeout 5s must be longer than the heartbeat interval 1s plus the busy timeout 4s"},
		{"negative busy timeout", flow.Config{}, -time.Second, "busy timeout must not be negative, got -1s"},
		{"short lease, short wait", flow.Config{LeaseTimeout: time.Second}, 500 * time.Millisecond, ""},
		{"defaults", flow.Config{}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := flowsqlite.Open(t.Context(), dbPath(t), &tc.cfg, &flowsqlite.Options{BusyTimeout: tc.busy})
			if err == nil {
				e.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestBusyTimeoutAndErrBusy: a third process holding BEGIN EXCLUSIVE keeps
// a Start waiting for Options.BusyTimeout, after which it fails with
// ErrBusy naming the file and the wait, and writes nothing.
func TestBusyTimeoutAndErrBusy(t *testing.T) {
	skipOnPostgres(t, "the busy timeout of SQLite's single write lock")
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openSQLiteEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowsqlite.Options{BusyTimeout: 300 * time.Millisecond})
	wf := flow.Workflow[int, int]{Name: "id", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)

	locker := rawDB(t, path)
	conn, err := locker.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "blocked"})
	waited := time.Since(start)
	if !errors.Is(err, flow.ErrBusy) {
		t.Fatalf("Start under an exclusive lock: %v, want ErrBusy", err)
	}
	for _, want := range []string{path, "busy timeout of 300ms", "database is locked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if waited < 300*time.Millisecond || waited > slowBound(3*time.Second) {
		t.Errorf("Start gave up after %s, want about the busy timeout of 300ms", waited)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Inspect(ctx, "blocked"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Errorf("the refused Start left a run behind: %v", err)
	}
	startEngine(t, e)
	if got := runToEnd(t, ctx, e, wf, 7); got != 7 {
		t.Errorf("after the lock: %d, want 7", got)
	}
}

// TestNewBusyTimeoutMustMatchPool: New cannot change the busy_timeout of
// the caller's pool, so a different Options.BusyTimeout is refused rather
// than ignored.
func TestNewBusyTimeoutMustMatchPool(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	db, err := sql.Open("sqlite", flowsqlite.DSNBusy(path, flowsqlite.SynchronousFull, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := flowsqlite.New(t.Context(), db, &flow.Config{}, &flowsqlite.Options{BusyTimeout: time.Second}); err == nil ||
		!strings.Contains(err.Error(), "Options.BusyTimeout is 1s but the pool's busy_timeout is 2s") {
		t.Fatalf("New with a mismatched busy timeout: %v", err)
	}
	e, err := flowsqlite.New(context.Background(), db, &flow.Config{}, &flowsqlite.Options{BusyTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

// TestChangeConsumerWaitsOutALockedDatabase is issue 19's third item: a
// consumer's acknowledgement was a single write, so a read of the change
// feed ended with "acknowledge change feed position …: database is
// locked" when other processes kept the lock for its busy timeout. Here a
// third connection holds the write lock for several busy timeouts, three
// times: while a new consumer registers and reads, while it reads again
// after new changes, and while it is deleted. Each write waits the lock
// out, as the engine's own writes do, and succeeds.
func TestChangeConsumerWaitsOutALockedDatabase(t *testing.T) {
	skipOnPostgres(t, "the busy timeout of SQLite's single write lock")
	t.Parallel()
	ctx := waitCtx(t)
	const busy = 50 * time.Millisecond
	path := dbPath(t)
	e := openSQLiteEngine(t, path, &flow.Config{PollInterval: 10 * time.Millisecond}, &flowsqlite.Options{BusyTimeout: busy})
	wf := flow.Workflow[int, int]{Name: "id", Run: func(wc flow.Context, n int) (int, error) { return n, nil }}
	flow.Register(e, wf)
	start := func(n int) {
		t.Helper()
		if _, err := flow.Start(ctx, e, wf, n, nil); err != nil {
			t.Fatal(err)
		}
	}

	locker := rawDB(t, path)
	// lock takes the write lock on a connection of its own, as another
	// process would, and gives it back after eight busy timeouts.
	lock := func() {
		t.Helper()
		conn, err := locker.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(8*busy, func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
		})
	}
	// read reads the feed to its end as consumer "audit" and returns the
	// last position it saw.
	read := func(what string) int64 {
		t.Helper()
		var last int64
		for c, err := range e.Changes(ctx, &flow.ChangesOptions{Consumer: "audit"}) {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			last = c.Position
		}
		return last
	}
	acked := func() int64 {
		t.Helper()
		cs, err := e.ChangeConsumers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 {
			t.Fatalf("consumers %+v, want audit alone", cs)
		}
		return cs[0].Position
	}

	start(1)
	start(2)
	lock()
	first := read("a new consumer's read under a lock")
	if first == 0 {
		t.Fatal("the read delivered nothing")
	}
	if got := acked(); got != first {
		t.Errorf("audit acknowledged %d, want %d", got, first)
	}

	start(3)
	lock()
	if second := read("a consumer's read under a lock"); second <= first {
		t.Errorf("the second read ended at %d, want past %d", second, first)
	} else if got := acked(); got != second {
		t.Errorf("audit acknowledged %d, want %d", got, second)
	}

	lock()
	if deleted, err := e.DeleteChangeConsumer(ctx, "audit"); err != nil || !deleted {
		t.Fatalf("delete a consumer under a lock: %v, %v", deleted, err)
	}
}
