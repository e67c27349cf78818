package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sys/unix"

	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// TestNetworkTimeouts checks the settings Open gives its connections for a
// network that fails silently (network.go): the server ends a session idle
// in a transaction after NetworkTimeout, and the client's sockets drop
// data left unacknowledged that long and send keepalives; the DSN's own
// values win. What they are for, a worker cut off from the server, is
// exercised over real links in internal/netfault.
func TestNetworkTimeouts(t *testing.T) {
	t.Parallel()
	dsn := needPG(t)
	for _, tc := range []struct {
		name, dsn             string
		opts                  pgstore.Options
		wantIdle              string
		wantUserTimeoutMillis int
	}{
		{"default", dsn, pgstore.Options{}, "30s", 30000},
		{"NetworkTimeout", dsn, pgstore.Options{NetworkTimeout: 2 * time.Second}, "2s", 2000},
		{"DSN", dsn + " idle_in_transaction_session_timeout=5000 tcp_user_timeout=7000",
			pgstore.Options{NetworkTimeout: 2 * time.Second}, "5s", 7000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Schema = freshSchema()
			s, err := pgstore.Open(t.Context(), tc.dsn, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			conn, err := pgstore.DB(s).Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var idle string
			if err := conn.QueryRowContext(t.Context(), "SHOW idle_in_transaction_session_timeout").Scan(&idle); err != nil {
				t.Fatal(err)
			}
			if idle != tc.wantIdle {
				t.Errorf("idle_in_transaction_session_timeout %s, want %s", idle, tc.wantIdle)
			}
			userTimeout, keepalive := socketOptions(t, conn)
			if userTimeout != tc.wantUserTimeoutMillis || keepalive != 1 {
				t.Errorf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d; want %d ms, 1", userTimeout, keepalive, tc.wantUserTimeoutMillis)
			}
		})
	}
	if _, err := pgstore.Open(t.Context(), dsn+" tcp_user_timeout=soon", pgstore.Options{Schema: freshSchema()}); err == nil {
		t.Error("tcp_user_timeout=soon accepted")
	}
}

// TestIdleTransactionEnded: a transaction left idle longer than
// NetworkTimeout, as by a client that vanished, is ended by the server, and
// the row lock it held is released.
func TestIdleTransactionEnded(t *testing.T) {
	t.Parallel()
	s := openStore(t, pgstore.Options{NetworkTimeout: time.Second})
	db := pgstore.DB(s)
	ctx := t.Context()
	table := s.Schema() + ".idle_probe"
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT id FROM "+table+" WHERE id = 1 FOR NO KEY UPDATE"); err != nil {
		t.Fatal(err)
	}
	// Another session waits for the row; the first one goes quiet.
	began := time.Now()
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(waitCtx, "UPDATE "+table+" SET id = id WHERE id = 1"); err != nil {
		t.Fatalf("update of the row an idle transaction locked: %v", err)
	}
	if waited := time.Since(began); waited < 900*time.Millisecond || waited > 5*time.Second {
		t.Errorf("the lock was released after %s, want about 1s", waited)
	}
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err == nil || errors.Is(err, sql.ErrTxDone) {
		t.Errorf("statement in the ended transaction: %v, want the server's error", err)
	}
}

// socketOptions returns TCP_USER_TIMEOUT and SO_KEEPALIVE of conn's socket.
func socketOptions(t *testing.T, conn *sql.Conn) (userTimeout, keepalive int) {
	t.Helper()
	err := conn.Raw(func(dc any) error {
		nc, ok := dc.(*stdlib.Conn).Conn().PgConn().Conn().(*net.TCPConn)
		if !ok {
			return errors.New("not a TCP connection: run the test against a server on TCP")
		}
		rc, err := nc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		err = rc.Control(func(fd uintptr) {
			userTimeout, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
			if serr == nil {
				keepalive, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
			}
		})
		return errors.Join(err, serr)
	})
	if err != nil {
		t.Fatal(err)
	}
	return userTimeout, keepalive
}
