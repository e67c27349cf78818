package pgstore_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestDeadPooledConnectionsAreSkipped: after the server ended every
// session of the store (as a restart or pg_terminate_backend does), each
// pooled connection is dead until used once. Writes and reads sent right
// then must succeed on fresh connections instead of failing once per dead
// connection.
func TestDeadPooledConnectionsAreSkipped(t *testing.T) {
	t.Parallel()
	const conns = 4
	app := "flowlite_deadconn_" + freshSchema()
	s := openStore(t, pgstore.Options{MaxConns: conns, ApplicationName: app})
	ctx := t.Context()
	insertRuns(t, s, "q", "r1")
	admin := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })

	// fill opens every connection of the pool: conns writes at once, each
	// holding its connection until all hold one.
	fill := func() {
		t.Helper()
		var held sync.WaitGroup
		held.Add(conns)
		release := make(chan struct{})
		var g errgroup.Group
		for range conns {
			g.Go(func() error {
				return s.Write(ctx, func(store.Tx) error { held.Done(); <-release; return nil })
			})
		}
		held.Wait()
		close(release)
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	// kill ends the store's sessions and waits until they are gone. It
	// must be quick: pgx's driver pings a connection idle for over a second
	// before reusing it, which would find the dead ones without the store.
	kill := func() {
		t.Helper()
		var n int
		err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		if err != nil || n < conns {
			t.Fatalf("terminated %d sessions, %v; want the pool's %d", n, err, conns)
		}
		for {
			err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	fill()
	kill()
	var g errgroup.Group
	for range conns {
		g.Go(func() error {
			return s.Write(ctx, func(tx store.Tx) error {
				_, err := tx.RunGet(ctx, "r1")
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("write after the sessions ended: %v", err)
	}

	fill()
	kill()
	for i := range conns {
		if _, err := s.Reader().RunGet(ctx, "r1"); err != nil {
			t.Fatalf("read %d after the sessions ended: %v", i, err)
		}
		if _, err := s.Reader().RunCountByStatus(ctx); err != nil {
			t.Fatalf("list read %d after the sessions ended: %v", i, err)
		}
	}
}

// TestEndedSessionIsUnavailable: a statement whose session the server
// ended fails with flowtype.ErrUnavailable, which tells the engine (and
// Run.Result) that the database is away for a moment, not that the call
// was wrong.
func TestEndedSessionIsUnavailable(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{MaxConns: 2})
	ctx := t.Context()
	insertRuns(t, s, "q", "r1")
	admin := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	admin.SetMaxOpenConns(1)
	t.Cleanup(func() { admin.Close() })
	err := s.Write(ctx, func(tx store.Tx) error {
		var pid int
		if err := tx.SQL().QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return err
		}
		if _, err := admin.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		_, err := tx.RunGet(ctx, "r1")
		return err
	})
	if !errors.Is(err, flowtype.ErrUnavailable) {
		t.Fatalf("statement on an ended session = %v, want store.ErrUnavailable", err)
	}
	if _, err := s.Reader().RunGet(ctx, "r1"); err != nil {
		t.Fatalf("read after the session ended: %v", err)
	}
}

// TestUnavailableErrors: the errors of a session the server ended, of a
// broken connection and of a server that cannot be reached map onto
// flowtype.ErrUnavailable; the server's other refusals do not.
func TestUnavailableErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"starting up", fmt.Errorf("connect: %w", &pgconn.PgError{Code: "57P03"}), true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"conn closed", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), true},
		{"EOF", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"reset", fmt.Errorf("receive message: %w", reset), true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"too many clients", &pgconn.PgError{Code: "53300"}, false},
		{"bad password", &pgconn.PgError{Code: "28P01"}, false},
		{"no rows", sql.ErrNoRows, false},
		{"other", errors.New("something else"), false},
	} {
		if got := errors.Is(pgstore.InterpretError(ctx, c.err), flowtype.ErrUnavailable); got != c.want {
			t.Errorf("%s: ErrUnavailable %v, want %v", c.name, got, c.want)
		}
	}
}
