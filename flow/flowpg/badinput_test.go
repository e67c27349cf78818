package flowpg_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/internal/pgtest"
	"github.com/flowlite/flowlite/internal/store/pgstore"
	"github.com/jackc/pgx/v5/pgconn"
)

// The bad inputs of Open: each is refused, soon, with an error that names
// what is wrong, and leaves what the database holds as it was.

// openFails opens an engine on dsn under a context of limit, fails t when
// Open succeeds or does not return within limit, and returns its error.
func openFails(t *testing.T, limit time.Duration, dsn string, opts *flowpg.Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	begun := time.Now()
	e, err := flowpg.Open(ctx, dsn, nil, opts)
	if took := time.Since(begun); took >= limit {
		t.Errorf("Open took %s, want under %s", took, limit)
	}
	if err == nil {
		e.Close()
		t.Fatalf("Open(%q) succeeded", dsn)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open ran out its %s context instead of failing by itself: %v", limit, err)
	}
	return err
}

// mentions fails t unless err's message holds every one of parts.
func mentions(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not name %q", what, err, p)
		}
	}
}

// randomName returns prefix followed by 8 random hex digits.
func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TestOpenUnreachableServer: a port nothing listens on refuses the
// connection at once; Open says the database is unavailable, at which
// address, in well under its connect timeout (10s). No server is needed.
func TestOpenUnreachableServer(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = openFails(t, 5*time.Second, "postgres://postgres@"+addr+"/postgres?sslmode=disable", nil)
	if !errors.Is(err, flow.ErrUnavailable) {
		t.Errorf("Open of a closed port: %v, want ErrUnavailable", err)
	}
	mentions(t, "closed port", err, addr)
}

// An unreachable server is said to be so once: with sslmode=prefer (the
// default) pgx tries each address with and without TLS and listed both
// failures, in identical lines, as Open's and Inspect's error (and so
// flowlite's). No server is needed.
func TestUnreachableServerIsToldOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dsn := "postgres://postgres@" + addr + "/postgres"
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, inspectErr := flowpg.Inspect(ctx, dsn, nil)
	for what, err := range map[string]error{"Open": openFails(t, 5*time.Second, dsn, nil), "Inspect": inspectErr} {
		if err == nil {
			t.Fatalf("%s of a closed port succeeded", what)
		}
		if n := strings.Count(err.Error(), "connection refused"); n != 1 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q says connection refused %d times, over %d lines; want once, on one line", what, err, n, strings.Count(err.Error(), "\n")+1)
		}
		mentions(t, what, err, addr)
	}
	var ce *pgconn.ConnectError
	if !errors.As(inspectErr, &ce) {
		t.Errorf("Inspect: %v does not unwrap to a *pgconn.ConnectError", inspectErr)
	}
}

// TestOpenMalformedDSN: a DSN pgx cannot parse is refused before any
// connection is tried, with the part that is wrong named, and without the
// password, also when the DSN is too malformed for pgx's own masking (an
// unescaped '@' or '&' in a password, spaces around a key=value '=', an
// encoded key). Being wrong, not away, it does not match ErrUnavailable.
// No server is needed.
func TestOpenMalformedDSN(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dsn    string
		want   []string // in the message
		secret string   // not in the message
	}{
		{dsn: "postgres://127.0.0.1:notaport/x", want: []string{"invalid port", "notaport"}},
		{dsn: "postgres://u%zz@127.0.0.1/x", want: []string{"invalid percent-encoded", "u%zz"}},
		{dsn: "postgres://u:secret@127.0.0.1:badport/x", want: []string{"invalid port"}, secret: "secret"},
		{dsn: "postgres://u:se@cret@127.0.0.1:badport/x", want: []string{"invalid port"}, secret: "cret"},
		{dsn: "postgres://127.0.0.1:badport/x?password=se&cret", want: []string{"failed to parse as URL"}, secret: "cret"},
		{dsn: "postgres://127.0.0.1:badport/x?pass%77ord=secret", want: []string{"invalid port"}, secret: "secret"},
		{dsn: "postgres://u:secret@127.0.0.1/x?sslmode=bogus", want: []string{"sslmode is invalid"}, secret: "secret"},
		{dsn: "host=127.0.0.1 port=badport password = secret", want: []string{"invalid port"}, secret: "secret"},
		{dsn: `host=127.0.0.1 port=badport password=se\ cret`, want: []string{"invalid port"}, secret: "cret"},
	} {
		err := openFails(t, time.Second, c.dsn, nil)
		mentions(t, c.dsn, err, c.want...)
		if c.secret != "" && strings.Contains(err.Error(), c.secret) {
			t.Errorf("%s: error %q repeats the password", c.dsn, err)
		}
		// It says why the DSN is left out, as a statement (it read "the DSN
		// is not quoted: …", like an instruction to quote it).
		if hidden := strings.Contains(err.Error(), "(DSN not shown: it holds a password)"); hidden != (c.secret != "") {
			t.Errorf("%s: error %q; want the DSN said to be hidden exactly when it holds a password", c.dsn, err)
		}
		if errors.Is(err, flow.ErrUnavailable) {
			t.Errorf("%s: error %q matches ErrUnavailable", c.dsn, err)
		}
	}
}

// TestOpenMissingDatabase: a database that does not exist is named, and
// matches ErrNotDatabase.
func TestOpenMissingDatabase(t *testing.T) {
	t.Parallel()
	dsn, _ := schema(t) // for the skip, and the server's address
	db := randomName("flowlite_no_such_db_")
	missing, err := pgtest.WithDatabase(dsn, db)
	if err != nil {
		t.Fatal(err)
	}
	err = openFails(t, 10*time.Second, missing, nil)
	if !errors.Is(err, flow.ErrNotDatabase) {
		t.Errorf("Open of a missing database: %v, want ErrNotDatabase", err)
	}
	mentions(t, "missing database", err, db, "does not exist")
}

// TestOpenSchemaTooNew: a schema migrated by a newer flowlite is refused
// with ErrSchemaTooNew, naming the schema and both versions, and neither
// its runs nor its version table change.
func TestOpenSchemaTooNew(t *testing.T) {
	t.Parallel()
	dsn, s := schema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	e, err := flowpg.Open(ctx, dsn, nil, &flowpg.Options{Schema: s, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	flow.Register(e, twice)
	r, err := flow.Start(ctx, e, twice, 3, &flow.StartOptions{RunID: "before-the-upgrade"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	versions := s + "." + pgstore.VersionTable
	var known int64
	if err := db.QueryRowContext(ctx, "SELECT max(version_id) FROM "+versions).Scan(&known); err != nil {
		t.Fatal(err)
	}
	newer := known + 1000
	if _, err := db.ExecContext(ctx, "INSERT INTO "+versions+" (version_id, is_applied) VALUES ($1, true)", newer); err != nil {
		t.Fatal(err)
	}
	state := func() (runs, versionRows int, status string) {
		t.Helper()
		q := fmt.Sprintf("SELECT (SELECT count(*) FROM %[1]s.runs), (SELECT count(*) FROM %[2]s), (SELECT status FROM %[1]s.runs WHERE id = $1)", s, versions)
		if err := db.QueryRowContext(ctx, q, r.ID()).Scan(&runs, &versionRows, &status); err != nil {
			t.Fatal(err)
		}
		return runs, versionRows, status
	}
	runs, versionRows, status := state()

	err = openFails(t, 10*time.Second, dsn, &flowpg.Options{Schema: s})
	if !errors.Is(err, flow.ErrSchemaTooNew) {
		t.Errorf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	mentions(t, "newer schema", err, "schema "+s)
	// The versions are whole numbers of the message, outside the schema's
	// name (whose hex digits could hold either).
	rest := strings.ReplaceAll(err.Error(), s, "")
	for _, v := range []int64{newer, known} {
		if !regexp.MustCompile(fmt.Sprintf(`(^|[^0-9])%d([^0-9]|$)`, v)).MatchString(rest) {
			t.Errorf("newer schema: error %q does not name version %d", err, v)
		}
	}

	if r2, v2, st2 := state(); r2 != runs || v2 != versionRows || st2 != status || runs != 1 {
		t.Errorf("after the refusal: %d runs, %d version rows, run %s %q; before: %d, %d, %q (want 1 run)",
			r2, v2, r.ID(), st2, runs, versionRows, status)
	}
}

// TestOpenBadSchemaName: a schema name that cannot go unquoted into SQL is
// refused, naming the name and what is wrong with it, and no schema is
// created (under the name, nor under the one PostgreSQL would read it as:
// folded to lowercase and cut to 63 bytes).
func TestOpenBadSchemaName(t *testing.T) {
	t.Parallel()
	dsn, _ := schema(t)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	long := strings.Repeat("a", 64)
	for _, c := range []struct {
		name string
		why  string
	}{
		{"1bad", "starts with a digit"},
		{"a;drop", `holds ';'`},
		{"Bad", `holds 'B'`},
		{"pg_flowlite", "starts with pg_"},
		{long, "64 bytes"},
	} {
		err := openFails(t, 10*time.Second, dsn, &flowpg.Options{Schema: c.name})
		mentions(t, c.name, err, fmt.Sprintf("schema %q", c.name), c.why)
		var n int
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname IN ($1::text, left(lower($1::text), 63))", c.name).Scan(&n); err != nil || n != 0 {
			t.Errorf("schema %q: %d in pg_namespace after the refusal, %v; want 0", c.name, n, err)
		}
	}
}
