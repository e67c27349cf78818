package pgstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// concurrentOpens is how many processes the tests below open one schema
// at once, as the workers of a deployment do when they start together.
const concurrentOpens = 8

// openAtOnce opens concurrentOpens stores on schema at once, each bounded
// by limit, closes them, and returns how long each Open took.
func openAtOnce(t *testing.T, schema string, limit time.Duration) []time.Duration {
	t.Helper()
	took := make([]time.Duration, concurrentOpens)
	var g errgroup.Group
	for i := range concurrentOpens {
		g.Go(func() error {
			ctx, cancel := context.WithTimeout(t.Context(), limit)
			defer cancel()
			start := time.Now()
			s, err := pgstore.Open(ctx, needPG(t), pgstore.Options{Schema: schema, MaxConns: 2})
			took[i] = time.Since(start)
			if err != nil {
				return fmt.Errorf("open %d of %d after %v: %w", i+1, concurrentOpens, took[i], err)
			}
			return s.Close()
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return took
}

// adminConn returns a session of its own on the test database, outside
// any store, closed when the test ends.
func adminConn(t *testing.T) *sql.Conn {
	t.Helper()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestCurrentSchemaOpensWithoutALock: opening a schema that needs no
// migration takes neither the lock of its creation nor that of its
// migrations, so concurrent opens wait for no one. Another session holds
// both locks throughout the first round of opens: an Open that took
// either would wait until its deadline. (goose's GetDBVersion took the
// migration lock for every open, and a process that found it taken tried
// again 5 seconds later.) The second round, with no lock held, bounds how
// long each of the concurrent opens takes.
func TestCurrentSchemaOpensWithoutALock(t *testing.T) {
	t.Parallel()
	schema := openStore(t, pgstore.Options{MaxConns: 2}).Schema()
	admin := adminConn(t)
	ctx := t.Context()
	for _, purpose := range []string{"create", "migrate"} {
		if _, err := admin.ExecContext(ctx, "SELECT pg_advisory_lock($1)", pgstore.SchemaLockID(schema, purpose)); err != nil {
			t.Fatal(err)
		}
	}
	took := openAtOnce(t, schema, 3*time.Second)
	t.Logf("opens with both locks held by another session: %v", took)
	if _, err := admin.ExecContext(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}
	took = openAtOnce(t, schema, 10*time.Second)
	t.Logf("opens: %v", took)
	for i, d := range took {
		if d > 2*time.Second {
			t.Errorf("open %d of a current schema took %v, want well under 2s", i+1, d)
		}
	}
}

// TestConcurrentOpensOfAFreshSchema: of several processes opening a
// schema that does not exist yet, one creates and migrates it, and the
// others wait only as long as that takes: they wait on the migration lock
// with pg_advisory_lock, which the server grants the moment it is
// released, not by trying it every 5 seconds, as goose's locker does. The
// migrations are applied once each.
func TestConcurrentOpensOfAFreshSchema(t *testing.T) {
	t.Parallel()
	alone := time.Now()
	openStore(t, pgstore.Options{MaxConns: 2})
	t.Logf("one open of a fresh schema: %v", time.Since(alone))

	schema := freshSchema()
	took := openAtOnce(t, schema, 30*time.Second)
	t.Logf("concurrent opens of a fresh schema: %v", took)
	for i, d := range took {
		if d > 4*time.Second {
			t.Errorf("open %d of a fresh schema took %v, want about as long as its migration", i+1, d)
		}
	}
	checkAppliedOnce(t, schema)
}

// checkAppliedOnce fails the test unless goose's version table of schema
// records each version once.
func checkAppliedOnce(t *testing.T, schema string) {
	t.Helper()
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t))))
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), "SELECT version_id, count(*) FROM "+schema+"."+pgstore.VersionTable+" GROUP BY version_id ORDER BY version_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int64
	for rows.Next() {
		var v, n int64
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("version %d recorded %d times, want once", v, n)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(versions) < 2 || versions[0] != 0 {
		t.Errorf("versions recorded: %v, want 0 and the migrations", versions)
	}
}

// sessions watches the sessions of one application_name from a session of
// its own.
type sessions struct {
	t     *testing.T
	admin *sql.Conn
	app   string
}

// await waits until one of the sessions matches cond, a condition on
// pg_stat_activity's columns, and returns its pid. It fails the test when
// opened reports first: the Open that should have been seen waiting
// returned.
func (s sessions) await(opened <-chan error, what, cond string) int {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var pid int
		err := s.admin.QueryRowContext(s.t.Context(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND "+cond+" LIMIT 1", s.app).Scan(&pid)
		if err == nil {
			return pid
		}
		if err != sql.ErrNoRows {
			s.t.Fatal(err)
		}
		select {
		case err := <-opened:
			s.t.Fatalf("Open returned before it was seen %s: %v", what, err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no session seen %s", what)
		}
	}
}

// holdsMigrationLock reports whether the session pid holds the migration
// lock of schema.
func (s sessions) holdsMigrationLock(pid int, schema string) bool {
	s.t.Helper()
	var held bool
	key := pgstore.SchemaLockID(schema, "migrate")
	err := s.admin.QueryRowContext(s.t.Context(), `
		SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = $1
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND ((classid::bigint << 32) | objid::bigint) = $2::bigint AND objsubid = 1)`, pid, key).Scan(&held)
	if err != nil {
		s.t.Fatal(err)
	}
	return held
}

// terminate ends every session of the application and waits until they
// are gone (the Open under test may have made new ones by then).
func (s sessions) terminate() {
	s.t.Helper()
	ctx := s.t.Context()
	// The sessions are picked first, and ended one by one: in one
	// statement, the planner may call pg_terminate_backend before it
	// tests the application_name.
	rows, err := s.admin.QueryContext(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", s.app)
	if err != nil {
		s.t.Fatal(err)
	}
	var pids []int64
	for rows.Next() {
		var pid int64
		if err := rows.Scan(&pid); err != nil {
			s.t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil || len(pids) == 0 {
		s.t.Fatalf("sessions to end: %v, %v; want some", pids, err)
	}
	for _, pid := range pids {
		if _, err := s.admin.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			s.t.Fatal(err)
		}
	}
	for {
		var n int
		if err := s.admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", pids).Scan(&n); err != nil {
			s.t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openInBackground opens a store on schema with the application_name app
// and reports Open's error once it returns; the store is closed when the
// test ends.
func openInBackground(t *testing.T, schema, app string, limit time.Duration) <-chan error {
	t.Helper()
	opened := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(wg.Wait)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		s, err := pgstore.Open(ctx, needPG(t), pgstore.Options{Schema: schema, MaxConns: 2, ApplicationName: app})
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	return opened
}

// TestOpenRetriesASessionEndedWhileItWaitsForTheMigrationLock: an Open
// waiting for another process's migration whose session the server ends
// (an operator's pg_terminate_backend, a restart) waits again on a new
// session, and opens the schema once the lock is free, rather than
// failing.
func TestOpenRetriesASessionEndedWhileItWaitsForTheMigrationLock(t *testing.T) {
	t.Parallel()
	schema := freshSchema()
	admin := adminConn(t)
	ctx := t.Context()
	if _, err := admin.ExecContext(ctx, "SELECT pg_advisory_lock($1)", pgstore.SchemaLockID(schema, "migrate")); err != nil {
		t.Fatal(err)
	}
	ss := sessions{t: t, admin: admin, app: "flowlite_lockwait_" + schema}
	opened := openInBackground(t, schema, ss.app, 30*time.Second)
	// goose's locker sends pg_try_advisory_lock; MigrationLock,
	// pg_advisory_lock. Neither is the transaction-level lock of the
	// schema's creation.
	waiting := "query LIKE '%advisory_lock(%' AND query NOT LIKE '%xact%'"
	ss.await(opened, "waiting for the migration lock", waiting)
	ss.terminate()
	ss.await(opened, "waiting for the migration lock again", waiting)
	if _, err := admin.ExecContext(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open whose session was ended while it waited for the migration lock: %v", err)
	}
	checkAppliedOnce(t, schema)
}

// TestOpenRetriesASessionEndedWhileItMigrates: an Open whose session the
// server ends in the middle of a migration, holding the migration lock,
// migrates again on a new session and succeeds; the interrupted
// migration was rolled back, and each is recorded once. Another session
// holds goose's version table in EXCLUSIVE mode, so that the migration
// stops at its first version row, inside its transaction and under the
// lock, until that session lets go.
func TestOpenRetriesASessionEndedWhileItMigrates(t *testing.T) {
	t.Parallel()
	schema := freshSchema()
	admin := adminConn(t)
	ctx := t.Context()
	// The schema with goose's version table and nothing applied yet, as
	// goose creates them.
	for _, stmt := range []string{
		"CREATE SCHEMA " + schema,
		`CREATE TABLE ` + schema + `.` + pgstore.VersionTable + ` (
			id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
			version_id bigint NOT NULL,
			is_applied boolean NOT NULL,
			tstamp timestamp NOT NULL DEFAULT now())`,
		"INSERT INTO " + schema + "." + pgstore.VersionTable + " (version_id, is_applied) VALUES (0, true)",
	} {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "LOCK TABLE "+schema+"."+pgstore.VersionTable+" IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	watch := adminConn(t)
	ss := sessions{t: t, admin: watch, app: "flowlite_midmigration_" + schema}
	opened := openInBackground(t, schema, ss.app, 30*time.Second)
	blocked := "wait_event_type = 'Lock' AND query LIKE 'INSERT INTO%'"
	pid := ss.await(opened, "blocked in its migration", blocked)
	if !ss.holdsMigrationLock(pid, schema) {
		t.Fatalf("session %d is migrating without the migration lock", pid)
	}
	ss.terminate()
	pid = ss.await(opened, "blocked in its migration again", blocked)
	if !ss.holdsMigrationLock(pid, schema) {
		t.Fatalf("session %d is migrating again without the migration lock", pid)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open whose session was ended while it migrated: %v", err)
	}
	checkAppliedOnce(t, schema)
}

// TestOpenDBOnEndedSessions: OpenDB on a pool whose every connection the
// server ended a moment ago (a restart, pg_terminate_backend) reads the
// session's isolation, the schema and its version on fresh connections,
// instead of failing on the first dead one, as "read schema version: …
// FATAL: terminating connection" once ended a worker that was starting.
func TestOpenDBOnEndedSessions(t *testing.T) {
	t.Parallel()
	const conns = 8
	schema := openStore(t, pgstore.Options{MaxConns: 2}).Schema()
	app := "flowlite_openended_" + schema
	db := sql.OpenDB(stdlib.GetConnector(mustParse(t, needPG(t)+" application_name="+app)))
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	ss := sessions{t: t, admin: adminConn(t), app: app}
	// Every connection of the pool open at once, then back in the pool;
	// twice, so that each was reused (pgx's driver pings a connection on
	// its first reuse).
	for range 2 {
		held := make([]*sql.Conn, conns)
		for i := range held {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			held[i] = c
		}
		for _, c := range held {
			c.Close()
		}
	}
	// Quickly: pgx's driver pings a connection idle for over a second
	// before reusing it, which would find the dead ones by itself.
	ss.terminate()
	s, err := pgstore.OpenDB(ctx, db, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("OpenDB on a pool of ended sessions: %v", err)
	}
	defer s.Close()
	insertRuns(t, s, "q", "r1")
	if _, err := s.Reader().RunGet(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.OpenConnections > conns {
		t.Errorf("%d open connections, want at most %d", st.OpenConnections, conns)
	}
}
