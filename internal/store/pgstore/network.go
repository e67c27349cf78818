package pgstore

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// A network between the store and its server can fail silently: a cut
// cable, a crashed switch, a peer machine that vanished. Nothing then tells
// either end; TCP's defaults notice only after minutes (a connection
// retransmits for about 15 minutes) or hours (keepalive after two hours of
// silence). Open's connections are set up so that both ends give up after
// about Options.NetworkTimeout instead:
//
//   - the client: a dial times out (connect_timeout, default
//     NetworkTimeout up to defaultConnectTimeout); a connection whose sent data the server has
//     not acknowledged for NetworkTimeout is dropped by the kernel
//     (TCP_USER_TIMEOUT, Linux), so a statement, a commit or a heartbeat
//     on a dead link fails instead of hanging, the pool discards the
//     connection and dials a new one once the link is back, and an engine
//     stops when asked to; idle connections, the listener's among them,
//     are probed by TCP keepalive, so their death is noticed too;
//   - the server: a session idle in a transaction for NetworkTimeout is
//     ended (idle_in_transaction_session_timeout), rolling its transaction
//     back. A worker that vanished in the middle of a transaction holds
//     the row lock its lease check took; the claim and the rescuer skip
//     locked rows, so without this its runs would stay out of reach of
//     every other worker until the server's TCP keepalive ended the
//     session, hours later, or until the worker came back.
//
// A DSN that sets connect_timeout, tcp_user_timeout (milliseconds, as
// libpq reads it) or idle_in_transaction_session_timeout (there or in
// options) keeps its own value.

// DefaultNetworkTimeout is Options.NetworkTimeout's default.
const DefaultNetworkTimeout = 30 * time.Second

// defaultConnectTimeout bounds a dial when the DSN sets no connect_timeout
// and NetworkTimeout is longer.
const defaultConnectTimeout = 10 * time.Second

// Names of the DSN settings that network.go reads.
const (
	paramUserTimeout = "tcp_user_timeout"
	paramIdleInTx    = "idle_in_transaction_session_timeout"
)

// networkSettings sets up cfg's dialer for a network that may fail
// silently, and returns the idle-in-transaction timeout each connection
// should set on the server once connected (zero when the DSN sets one).
func networkSettings(cfg *pgx.ConnConfig, timeout time.Duration) (idleInTx time.Duration, err error) {
	if timeout <= 0 {
		timeout = DefaultNetworkTimeout
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = min(timeout, defaultConnectTimeout)
	}
	userTimeout := timeout
	if v, ok := cfg.RuntimeParams[paramUserTimeout]; ok {
		// The server reads it too, for its end of the connection.
		ms, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return 0, fmt.Errorf("%s %q: want milliseconds", paramUserTimeout, v)
		}
		userTimeout = time.Duration(ms) * time.Millisecond
	}
	// Keepalive probes start after half the timeout of silence; with
	// TCP_USER_TIMEOUT set, Linux drops the connection once probes went
	// unanswered for that long.
	keepIdle := max(userTimeout/2, time.Second)
	dialer := &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: keepIdle, Interval: max(keepIdle/2, time.Second), Count: 3},
		Control: func(network, _ string, c syscall.RawConn) error {
			if !strings.HasPrefix(network, "tcp") || userTimeout == 0 {
				return nil
			}
			return setUserTimeout(c, userTimeout)
		},
	}
	cfg.DialFunc = dialer.DialContext
	if _, ok := cfg.RuntimeParams[paramIdleInTx]; ok || strings.Contains(cfg.RuntimeParams["options"], paramIdleInTx) {
		return 0, nil
	}
	return timeout, nil
}
