package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// A --db that starts with postgres:// or postgresql:// names a PostgreSQL
// database: the CLI opens its engine through flow/flowpg, on the schema
// --schema names. The checks below read the schema through database/sql
// with the driver flowpg registers, so the CLI still imports no driver.

// isPostgresURL reports whether db is a PostgreSQL URL rather than a path.
func isPostgresURL(db string) bool {
	l := strings.ToLower(db)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// redactURL returns dsn with its password, if any, replaced by xxxxx.
func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// dbName returns --db or $FLOWLITE_DB, unchecked.
func (a *app) dbName() string {
	if a.dbPath != "" {
		return a.dbPath
	}
	return a.getenv(envDB)
}

// postgres reports whether --db or $FLOWLITE_DB names a PostgreSQL database.
func (a *app) postgres() bool { return isPostgresURL(a.dbName()) }

// notOnPostgres is the error of a command that operates on a SQLite file.
func (a *app) notOnPostgres(command, why string) error {
	return fmt.Errorf("%s: %w on PostgreSQL (%s): %s", command, flow.ErrNotSupported, redactURL(a.dbName()), why)
}

var pgIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// pgSchemaName checks --schema as flowpg would.
func (a *app) pgSchemaName() (string, error) {
	s := a.schema
	if s == "" {
		s = flowpg.DefaultSchema
	}
	if !pgIdent.MatchString(s) || strings.HasPrefix(s, "pg_") || len(s) > 63 {
		return "", usageErrorf("invalid --schema %q: want a lowercase identifier of letters, digits and underscores, not starting with a digit or pg_", s)
	}
	return s, nil
}

// pgStatus is what a PostgreSQL schema holds.
type pgStatus struct {
	Exists   bool  // the schema exists
	Flowlite bool  // it has flowlite's migration table
	Current  int64 // version applied
	Latest   int64 // highest version this binary knows
}

// latestPostgresVersion is the highest migration this binary embeds.
func latestPostgresVersion() (int64, error) {
	entries, err := fs.ReadDir(migrations.Postgres(), ".")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err == nil {
			latest = max(latest, v)
		}
	}
	return latest, nil
}

// inspectPostgres reads the version of schema in dsn without changing it.
func (a *app) inspectPostgres(ctx context.Context, dsn, schema string) (pgStatus, error) {
	var st pgStatus
	latest, err := latestPostgresVersion()
	if err != nil {
		return st, err
	}
	st.Latest = latest
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", redactURL(dsn), err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, max(a.busyTimeout, 10*time.Second))
	defer cancel()
	err = db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&st.Exists)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", redactURL(dsn), err)
	}
	if !st.Exists {
		return st, nil
	}
	err = db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".goose_db_version").Scan(&st.Flowlite)
	if err != nil || !st.Flowlite {
		return st, err
	}
	// schema matched pgIdent: safe unquoted.
	err = db.QueryRowContext(ctx, "SELECT COALESCE(max(version_id), 0) FROM "+schema+".goose_db_version WHERE is_applied").Scan(&st.Current)
	if err != nil {
		return st, fmt.Errorf("read schema version of %s: %w", schema, err)
	}
	return st, nil
}

// requirePostgresFlowlite refuses a schema that is missing, is not
// flowlite's, or whose version differs from this binary's (when current).
func (a *app) requirePostgresFlowlite(ctx context.Context, dsn, schema string, current bool) (pgStatus, error) {
	st, err := a.inspectPostgres(ctx, dsn, schema)
	if err != nil {
		return st, err
	}
	name := redactURL(dsn)
	switch {
	case !st.Exists:
		return st, fmt.Errorf("open %s: schema %s does not exist (flowlite does not create databases; an engine opened with flowpg creates it, or pass --schema)", name, schema)
	case !st.Flowlite:
		return st, fmt.Errorf("open %s: %w: schema %s has no flowlite migration table; flowlite leaves it alone", name, errNotFlowlite, schema)
	case st.Current > st.Latest:
		return st, fmt.Errorf("open %s: %w: schema %s is at version %d, this flowlite knows up to %d; upgrade flowlite",
			name, flow.ErrSchemaTooNew, schema, st.Current, st.Latest)
	case current && st.Current < st.Latest:
		return st, fmt.Errorf("open %s: schema %s is at version %d, this flowlite needs %d: run 'flowlite migrate up' (the engines using it must be this version or newer)",
			name, schema, st.Current, st.Latest)
	}
	return st, nil
}

// withPostgres opens an engine on the PostgreSQL database dsn through
// flowpg, without starting it, after checking that the schema is a
// flowlite schema at this binary's version (flowpg.Open would create or
// migrate it), calls fn and closes the engine.
func (a *app) withPostgres(ctx context.Context, dsn string, fn func(*flow.Engine) error) (err error) {
	schema, err := a.pgSchemaName()
	if err != nil {
		return err
	}
	if _, err := a.requirePostgresFlowlite(ctx, dsn, schema, true); err != nil {
		return err
	}
	return a.openPostgres(ctx, dsn, schema, fn)
}

// openPostgres opens an engine through flowpg.Open, which migrates the
// schema, calls fn and closes the engine.
func (a *app) openPostgres(ctx context.Context, dsn, schema string, fn func(*flow.Engine) error) (err error) {
	cfg := &flow.Config{Logger: a.logger, Retention: a.retention}
	e, err := flowpg.Open(ctx, dsn, cfg, &flowpg.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", redactURL(dsn), cerr)
		}
	}()
	return fn(e)
}

// isNotSupported reports whether err is a file operation refused by a
// backend that keeps no database file.
func isNotSupported(err error) bool { return errors.Is(err, flow.ErrNotSupported) }
