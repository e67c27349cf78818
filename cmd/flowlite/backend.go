package main

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/store/storecopy"
)

// This file is the one that knows the backends. database opens what --db
// names through its backend package: a file path, or the comma-separated
// paths of a shard set, through flow/flowsqlite; a postgres:// or
// postgresql:// URL through flow/flowpg, on the schema --schema names.
// Every command then speaks to the *flow.Engine the database opens, and
// looks past the engine only through the database interface (db.go), for
// what one kind of database has and the other has not: a schema version to
// check and migrate before an engine may open it, and files.

// defaultSchema is the PostgreSQL schema of flowlite's tables unless
// --schema names another.
const defaultSchema = flowpg.DefaultSchema

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

// database returns the database --db or $FLOWLITE_DB names. It looks at
// nothing yet, neither the files nor the server: each method checks what
// it needs first.
func (a *app) database() (database, error) {
	name := a.dbName()
	if name == "" {
		return nil, usageErrorf("no database: pass --db PATH or set %s (a file path, a comma-separated list of a shard set's files, or a postgres:// URL)", envDB)
	}
	if isPostgresURL(name) {
		return &pgDatabase{a: a, dsn: name}, nil
	}
	files, err := shardFiles(name)
	if err != nil {
		return nil, err
	}
	return &sqliteFiles{a: a, path: name, files: files}, nil
}

// sqliteFiles is a SQLite file, or the files of a shard set in the set's
// order. flowsqlite.Open would create a missing file, migrate an older
// schema, which only "migrate up" may do, and write flowlite's schema into
// any other SQLite database: so each file is checked first, without being
// changed (flowsqlite.Inspect).
type sqliteFiles struct {
	a     *app
	path  string   // --db as given
	files []string // its files
}

func (s *sqliteFiles) label() string { return s.path }

func (s *sqliteFiles) fileOnly(string, string) error { return nil }

func (s *sqliteFiles) options() *flowsqlite.Options {
	return &flowsqlite.Options{BusyTimeout: s.a.busyTimeout}
}

// check checks that every file exists and is not empty.
func (s *sqliteFiles) check() error {
	for _, f := range s.files {
		if err := checkDBFile(f); err != nil {
			return err
		}
	}
	return nil
}

// inspect reads the schema of the file at path, refusing one that is not
// flowlite's.
func (s *sqliteFiles) inspect(ctx context.Context, path string) (flowsqlite.SchemaInfo, error) {
	info, err := flowsqlite.Inspect(ctx, path, s.options())
	if err != nil {
		return info, s.a.dbError(err)
	}
	if !info.Flowlite {
		return info, notFlowliteError(path, info.Tables)
	}
	return info, nil
}

func (s *sqliteFiles) requireCurrent(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	for _, path := range s.files {
		st, err := s.inspect(ctx, path)
		switch {
		case err != nil:
			return err
		case st.Current > st.Latest:
			return fmt.Errorf("open %s: %w: database is at version %d, this flowlite knows up to %d; upgrade flowlite",
				path, flow.ErrSchemaTooNew, st.Current, st.Latest)
		case st.Current < st.Latest:
			return fmt.Errorf("open %s: database schema is at version %d, this flowlite needs %d: back the file up, then run 'flowlite migrate up' (the engines using it must be this version or newer)",
				path, st.Current, st.Latest)
		}
	}
	return nil
}

// version and migrate work on one file: the commands that call them
// refuse a shard set first (app.oneFile).
func (s *sqliteFiles) version(ctx context.Context) (schemaVersion, error) {
	if err := s.check(); err != nil {
		return schemaVersion{}, err
	}
	st, err := s.inspect(ctx, s.path)
	return schemaVersion{Current: st.Current, Latest: st.Latest, Behind: st.Behind}, err
}

func (s *sqliteFiles) migrate(ctx context.Context) (schemaVersion, error) {
	st, err := flowsqlite.Migrate(ctx, s.path, s.options())
	return schemaVersion{Current: st.Current, Latest: st.Latest, Behind: st.Behind}, s.a.dbError(err)
}

func (s *sqliteFiles) open(ctx context.Context, readOnly bool) (*flow.Engine, error) {
	if readOnly {
		return flowsqlite.OpenShardsReadOnly(ctx, s.files, &flow.Config{Logger: s.a.logger}, s.options())
	}
	cfg := &flow.Config{
		Logger: s.a.logger, Retention: s.a.retention,
		// The CLI's engine is never started, so it holds no lease; a long
		// --busy-timeout must not trip the lease-versus-busy check.
		LeaseTimeout: max(30*time.Second, 2*s.a.busyTimeout),
	}
	return flowsqlite.OpenShards(ctx, s.files, cfg, s.options())
}

func (s *sqliteFiles) copyTo(ctx context.Context, to, schema string) ([]copiedTable, string, error) {
	counts, schema, err := storecopy.CopyFiles(ctx, storecopy.Files{Path: s.path, BusyTimeout: s.a.busyTimeout, DSN: to, Schema: schema}, storecopy.Options{})
	if err != nil {
		return nil, "", s.a.dbError(err)
	}
	var tables []copiedTable
	for _, t := range counts.Tables() {
		tables = append(tables, copiedTable{Table: t.Table, Rows: t.Rows})
	}
	return tables, schema, nil
}

// pgDatabase is flowlite's schema in a PostgreSQL database. flowpg.Open
// would create a missing schema and migrate an older one, which only
// "migrate up" may do: so the schema is read first (flowpg.Inspect), which
// changes nothing.
type pgDatabase struct {
	a   *app
	dsn string
}

func (p *pgDatabase) label() string { return redactURL(p.dsn) }

// fileOnly is the error of a command that operates on a SQLite file.
func (p *pgDatabase) fileOnly(command, why string) error {
	return fmt.Errorf("%s: %w on PostgreSQL (%s): %s", command, flow.ErrNotSupported, p.label(), why)
}

var pgIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// schema checks --schema as flowpg would, before anything connects.
func (p *pgDatabase) schema() (string, error) {
	s := p.a.schema
	if s == "" {
		s = defaultSchema
	}
	if !pgIdent.MatchString(s) || strings.HasPrefix(s, "pg_") || len(s) > 63 {
		return "", usageErrorf("invalid --schema %q: want a lowercase identifier of letters, digits and underscores, not starting with a digit or pg_", s)
	}
	return s, nil
}

// options are the flowpg options of schema with --pooler and --direct-db.
func (p *pgDatabase) options(schema string) (*flowpg.Options, error) {
	pooler, err := flowpg.ParsePooler(p.a.pooler)
	if err != nil {
		return nil, usageErrorf("invalid --pooler: %v", err)
	}
	return &flowpg.Options{Schema: schema, Pooler: pooler, DirectDSN: p.a.directDB}, nil
}

// inspect reads the version of schema without changing it.
func (p *pgDatabase) inspect(ctx context.Context, schema string) (flowpg.SchemaInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, max(p.a.busyTimeout, 10*time.Second))
	defer cancel()
	opts, err := p.options(schema)
	if err != nil {
		return flowpg.SchemaInfo{}, err
	}
	st, err := flowpg.Inspect(ctx, p.dsn, opts)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", p.label(), err)
	}
	return st, nil
}

// require refuses a schema that is missing, is not flowlite's, newer than
// this binary (unless newer is allowed: migrate status reports that), or
// older than this binary's (when current).
func (p *pgDatabase) require(ctx context.Context, current, newer bool) (string, flowpg.SchemaInfo, error) {
	schema, err := p.schema()
	if err != nil {
		return "", flowpg.SchemaInfo{}, err
	}
	st, err := p.inspect(ctx, schema)
	if err != nil {
		return schema, st, err
	}
	name := p.label()
	switch {
	case !st.Exists:
		return schema, st, fmt.Errorf("open %s: schema %s does not exist (flowlite does not create databases; an engine opened with flowpg creates it, or pass --schema)", name, schema)
	case !st.Flowlite:
		return schema, st, fmt.Errorf("open %s: %w: schema %s has no flowlite migration table; flowlite leaves it alone", name, errNotFlowlite, schema)
	case st.Current > st.Latest && !newer:
		return schema, st, fmt.Errorf("open %s: %w: schema %s is at version %d, this flowlite knows up to %d; upgrade flowlite",
			name, flow.ErrSchemaTooNew, schema, st.Current, st.Latest)
	case current && st.Current < st.Latest:
		return schema, st, fmt.Errorf("open %s: schema %s is at version %d, this flowlite needs %d: run 'flowlite migrate up' (the engines using it must be this version or newer)",
			name, schema, st.Current, st.Latest)
	}
	return schema, st, nil
}

func (p *pgDatabase) requireCurrent(ctx context.Context) error {
	_, _, err := p.require(ctx, true, false)
	return err
}

func (p *pgDatabase) version(ctx context.Context) (schemaVersion, error) {
	schema, st, err := p.require(ctx, false, true)
	return schemaVersion{Schema: schema, Current: st.Current, Latest: st.Latest, Behind: int(st.Latest - st.Current)}, err
}

// migrate opens an engine, which applies the pending migrations under the
// schema's migration lock, closes it, and reads the version it left.
func (p *pgDatabase) migrate(ctx context.Context) (schemaVersion, error) {
	e, err := p.open(ctx, false)
	if err != nil {
		return schemaVersion{}, err
	}
	if err := e.Close(); err != nil {
		return schemaVersion{}, fmt.Errorf("close %s: %w", p.label(), err)
	}
	schema, err := p.schema()
	if err != nil {
		return schemaVersion{}, err
	}
	st, err := p.inspect(ctx, schema)
	return schemaVersion{Schema: schema, Current: st.Current, Latest: st.Latest, Behind: int(st.Latest - st.Current)}, err
}

func (p *pgDatabase) copyTo(context.Context, string, string) ([]copiedTable, string, error) {
	return nil, "", p.fileOnly("copy", "it copies a SQLite file (--db) into PostgreSQL (--to)")
}

// open opens an engine through flowpg.Open: PostgreSQL has no read-only
// open, and the commands that ask for one only read.
func (p *pgDatabase) open(ctx context.Context, _ bool) (*flow.Engine, error) {
	schema, err := p.schema()
	if err != nil {
		return nil, err
	}
	opts, err := p.options(schema)
	if err != nil {
		return nil, err
	}
	opts.MaxConns = 4
	cfg := &flow.Config{Logger: p.a.logger, Retention: p.a.retention}
	return flowpg.Open(ctx, p.dsn, cfg, opts)
}
