package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// listener runs Listen on s until the test ends and collects its wakes.
type listener struct {
	wakes chan store.Wake
	done  chan error
}

func listen(t *testing.T, s *pgstore.Store) *listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{wakes: make(chan store.Wake, 1000), done: make(chan error, 1)}
	go func() { l.done <- s.Listen(ctx, func(w store.Wake) { l.wakes <- w }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-l.done:
			if err != nil {
				t.Errorf("Listen: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Listen did not return 10s after its context ended")
		}
	})
	// The first wake, a WakeAll, says the listener listens.
	if w := l.next(t, 10*time.Second); w.Kind != store.WakeAll {
		t.Fatalf("first wake = %+v, want a WakeAll once listening", w)
	}
	return l
}

// next returns the next wake, failing the test when none comes within d.
func (l *listener) next(t *testing.T, d time.Duration) store.Wake {
	t.Helper()
	select {
	case w := <-l.wakes:
		return w
	case err := <-l.done:
		t.Fatalf("Listen returned %v before the next wake", err)
	case <-time.After(d):
		t.Fatalf("no wake within %s", d)
	}
	return store.Wake{}
}

func insertRun(ctx context.Context, tx store.Tx, id, queue string, runAt int64) error {
	_, err := tx.RunInsert(ctx, store.RunInsertParams{
		ID: id, Workflow: flowtype.WorkflowKey{Name: "order", Version: 1}, Queue: queue,
		Input: []byte(`{}`), RunAt: runAt, Now: base,
	})
	return err
}

var errRollback = errors.New("roll back")

// A wake is sent by the transaction that makes work appear, so it arrives
// when that transaction commits and never when it rolls back.
func TestWakeOnCommitNotOnRollback(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{MaxConns: 2})
	l := listen(t, s)
	ctx := t.Context()

	err := s.Write(ctx, func(tx store.Tx) error {
		if err := insertRun(ctx, tx, "committed", "emails", base+5); err != nil {
			return err
		}
		select {
		case w := <-l.wakes:
			t.Errorf("wake %+v delivered before the commit", w)
		case <-time.After(200 * time.Millisecond):
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := store.Wake{Kind: store.WakeReady, Queue: "emails", RunID: "committed", DueAt: base + 5}
	if w := l.next(t, 5*time.Second); w != want {
		t.Fatalf("wake after commit = %+v, want %+v", w, want)
	}

	err = s.Write(ctx, func(tx store.Tx) error {
		if err := insertRun(ctx, tx, "rolled-back", "emails", base); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Write = %v, want the rollback", err)
	}
	// Then a commit: notifications arrive in commit order, so the next wake
	// is this one's if the rollback sent none.
	err = s.Write(ctx, func(tx store.Tx) error {
		if _, err := tx.RunRequestCancel(ctx, "committed", base+1); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want = store.Wake{Kind: store.WakeCancel, Queue: "emails", RunID: "committed", DueAt: base + 1}
	if w := l.next(t, 5*time.Second); w != want {
		t.Fatalf("wake after rollback and cancel = %+v, want %+v (none for the rollback)", w, want)
	}

	// A write that changes nothing (a duplicate ID) sends nothing.
	err = s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "committed", "emails", base) })
	if err != nil {
		t.Fatal(err)
	}
	err = s.Write(ctx, func(tx store.Tx) error { _, err := tx.QueueSetPaused(ctx, "emails", true, base); return err })
	if err != nil {
		t.Fatal(err)
	}
	err = s.Write(ctx, func(tx store.Tx) error { _, err := tx.QueueSetPaused(ctx, "emails", false, base); return err })
	if err != nil {
		t.Fatal(err)
	}
	want = store.Wake{Kind: store.WakeReady, Queue: "emails"}
	if w := l.next(t, 5*time.Second); w != want {
		t.Fatalf("wake after a duplicate insert and a resumed queue = %+v, want %+v", w, want)
	}
}

// Stores in different schemas use different channels.
func TestWakeChannelPerSchema(t *testing.T) {
	t.Parallel()
	s1 := openStore(t, pgstore.Options{MaxConns: 2})
	s2 := openStore(t, pgstore.Options{MaxConns: 2})
	l1 := listen(t, s1)
	ctx := t.Context()
	for _, s := range []*pgstore.Store{s2, s1} {
		if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, s.Schema(), "q", base) }); err != nil {
			t.Fatal(err)
		}
	}
	if w := l1.next(t, 5*time.Second); w.RunID != s1.Schema() {
		t.Fatalf("wake = %+v, want only the run of schema %s", w, s1.Schema())
	}
}

// The listener survives the loss of its connection: it reconnects, says
// that wakes may have been lost (a WakeAll carrying the error), and
// delivers again.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{MaxConns: 2})
	l := listen(t, s)
	ctx := t.Context()

	admin := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	for round := range 2 {
		// The listener's session is the one whose last statement was the
		// LISTEN on this schema's channel.
		var killed int
		err := admin.QueryRowContext(ctx, `
			SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN "' || $1 || '_wake"'`, s.Schema()).Scan(&killed)
		if err != nil {
			t.Fatal(err)
		}
		if killed != 1 {
			t.Fatalf("round %d: terminated %d listener sessions, want 1", round, killed)
		}
		w := l.next(t, 10*time.Second)
		if w.Kind != store.WakeAll || w.Err == nil {
			t.Fatalf("round %d: wake after the connection was terminated = %+v, want a WakeAll with the error", round, w)
		}
		id := "after-reconnect-" + string(rune('a'+round))
		if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, id, "q", base) }); err != nil {
			t.Fatal(err)
		}
		if w := l.next(t, 5*time.Second); w.Kind != store.WakeReady || w.RunID != id {
			t.Fatalf("round %d: wake after reconnecting = %+v, want ready %s", round, w, id)
		}
	}
}

// Listen returns when its context ends, also while it waits to reconnect.
func TestListenStopsWithContext(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{MaxConns: 2})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		defer wg.Done()
		if err := s.Listen(ctx, func(store.Wake) { once.Do(func() { close(started) }) }); err != nil {
			t.Errorf("Listen: %v", err)
		}
	}()
	<-started
	cancel()
	wg.Wait()
}

// A listener quiet for its idle time pings its connection and goes on
// listening on it.
func TestListenIdlePing(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{MaxConns: 2})
	pgstore.SetListenIdle(s, 50*time.Millisecond)
	l := listen(t, s)
	time.Sleep(300 * time.Millisecond) // several idle waits and pings
	ctx := t.Context()
	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "after-pings", "q", base) }); err != nil {
		t.Fatal(err)
	}
	if w := l.next(t, 5*time.Second); w.Kind != store.WakeReady || w.RunID != "after-pings" {
		t.Fatalf("wake after idle pings = %+v, want ready after-pings (and no reconnection)", w)
	}
}

// A store opened with NoWakes sends none and does not listen.
func TestNoWakes(t *testing.T) {
	t.Parallel()
	quiet := openStore(t, pgstore.Options{MaxConns: 2, NoWakes: true})
	err := quiet.Listen(t.Context(), func(store.Wake) {})
	if !errors.Is(err, flowtype.ErrNotSupported) {
		t.Fatalf("Listen with NoWakes = %v, want store.ErrNotSupported", err)
	}
	// A second store on the same schema listens: it hears nothing from
	// the quiet one's writes.
	loud, err := pgstore.Open(t.Context(), needPG(t), pgstore.Options{Schema: quiet.Schema(), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loud.Close() })
	l := listen(t, loud)
	ctx := t.Context()
	for _, s := range []*pgstore.Store{quiet, loud} {
		id := "from-" + map[bool]string{true: "quiet", false: "loud"}[s == quiet]
		if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, id, "q", base) }); err != nil {
			t.Fatal(err)
		}
	}
	if w := l.next(t, 5*time.Second); w.RunID != "from-loud" {
		t.Fatalf("first wake = %+v, want the loud store's (none from the quiet one)", w)
	}
}

// A store over the caller's pool listens with the settings of that pool's
// connections.
func TestListenOpenDB(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	s, err := pgstore.OpenDB(t.Context(), db, pgstore.Options{Schema: freshSchema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	l := listen(t, s)
	ctx := t.Context()
	if err := s.Write(ctx, func(tx store.Tx) error { return insertRun(ctx, tx, "pooled", "q", base) }); err != nil {
		t.Fatal(err)
	}
	if w := l.next(t, 5*time.Second); w.RunID != "pooled" {
		t.Fatalf("wake = %+v, want ready pooled", w)
	}
}

// In the caller's transaction (WriteInTx) the wake is sent inside it, so
// it arrives when the caller commits, and never when the caller rolls
// back.
func TestWakeInCallersTransaction(t *testing.T) {
	t.Parallel()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	s, err := pgstore.OpenDB(t.Context(), db, pgstore.Options{Schema: freshSchema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	l := listen(t, s)
	ctx := t.Context()
	for _, id := range []string{"rolled-back", "committed"} {
		sqlTx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WriteInTx(ctx, sqlTx, func(tx store.Tx) error { return insertRun(ctx, tx, id, "q", base) }); err != nil {
			t.Fatal(err)
		}
		select {
		case w := <-l.wakes:
			t.Fatalf("wake %+v before the caller's transaction ended", w)
		case <-time.After(100 * time.Millisecond):
		}
		if id == "committed" {
			err = sqlTx.Commit()
		} else {
			err = sqlTx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if w := l.next(t, 5*time.Second); w.RunID != "committed" {
		t.Fatalf("wake = %+v, want ready committed only", w)
	}
}

// Closing the store ends its listeners, whose connections are not the
// pool's.
func TestListenEndsWithClose(t *testing.T) {
	t.Parallel()
	s, err := pgstore.Open(t.Context(), needPG(t), pgstore.Options{Schema: freshSchema(), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	listening := make(chan struct{})
	done := make(chan error, 1)
	var once sync.Once
	go func() {
		done <- s.Listen(context.Background(), func(store.Wake) { once.Do(func() { close(listening) }) })
	}()
	<-listening
	s.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Listen = %v after Close, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Listen still runs 5s after Close")
	}
	if err := s.Listen(t.Context(), func(store.Wake) {}); !errors.Is(err, flowtype.ErrClosed) {
		t.Fatalf("Listen on a closed store = %v, want store.ErrClosed", err)
	}
}
