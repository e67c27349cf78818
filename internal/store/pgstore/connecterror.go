package pgstore

import (
	"errors"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// attemptsError is a connection error whose message tells each failed
// attempt once. pgx lists one line per attempt, and with sslmode=prefer
// (the default) it tries each address twice, with TLS and without, so an
// unreachable server read "dial error: … connection refused" twice, in
// identical lines. It unwraps to pgx's error, so errors.As still finds the
// *pgconn.ConnectError (and the engine still sees the server unreachable).
type attemptsError struct {
	err error
	msg string
}

func (e *attemptsError) Error() string { return e.msg }
func (e *attemptsError) Unwrap() error { return e.err }

// tellAttemptsOnce returns err with the repeated attempt lines of a
// *pgconn.ConnectError's message dropped, and the one attempt left on the
// first line when only one is; any other error as it is.
func tellAttemptsOnce(err error) error {
	var ce *pgconn.ConnectError
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	lines := strings.Split(err.Error(), "\n")
	kept := lines[:1]
	for _, l := range lines[1:] {
		if !slices.Contains(kept[1:], l) {
			kept = append(kept, l)
		}
	}
	if len(kept) == len(lines) {
		return err
	}
	msg := strings.Join(kept, "\n")
	if len(kept) == 2 && strings.HasSuffix(kept[0], ":") {
		msg = kept[0] + " " + strings.TrimSpace(kept[1])
	}
	return &attemptsError{err: err, msg: msg}
}
