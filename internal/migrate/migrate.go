// Package migrate applies a dialect's embedded goose migrations to a
// database and refuses databases whose schema is newer than this binary
// knows. It is the one entry point to goose for every dialect, and knows
// none itself: each adapter describes its own with a Dialect
// (sqlitestore.Dialect, pgstore's), beside the SQL it speaks.
//
// Up reads a database's version without writing and without a lock, so
// that the common case, a database that needs no migration, waits for no
// one; only when migrations are pending does it take the dialect's
// migration lock, if it has one, and read the version again under it.
//
// It imports internal/store and goose.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/flowlite/flowlite/internal/store"
)

// Status describes the schema of a database.
type Status struct {
	Current int64 // highest version applied to the database
	Latest  int64 // highest version this binary knows
	// Behind counts the migrations above Current: versions may skip
	// numbers, so it is not Latest-Current.
	Behind int
}

// Pending reports whether migrations remain to be applied.
func (s Status) Pending() bool { return s.Current < s.Latest }

// Dialect is what migrate needs to know about one database system. The
// adapter of the system defines it, beside the SQL it speaks.
type Dialect struct {
	// Goose is goose's name for the system.
	Goose goose.Dialect
	// FS holds the migrations, rooted at their folder (db/migrations).
	FS fs.FS
	// Table is the table goose records the applied versions in, in
	// flowlite's namespace (schema-qualified where the system has schemas).
	Table string
	// Name is how errors name the schema: "schema flowlite"; empty means
	// "database".
	Name string
	// Find returns the version table of db's flowlite schema: Table, the
	// table of an older layout that Adopt moves into the current one, or ""
	// when db holds no flowlite schema (yet). It must not write. Its errors
	// are returned as they are: they should say what was read.
	Find func(ctx context.Context, db *sql.DB) (string, error)
	// Adopt moves a database in an older layout (Find returned a table
	// other than Table) into the current one, in one transaction; nil when
	// the dialect never had another layout.
	Adopt func(ctx context.Context, db *sql.DB) error
	// Locker, when set, serialises the migrations of processes that
	// migrate one database at once: Up takes it only to apply migrations.
	// nil when the system serialises them itself (SQLite's one writer).
	Locker lock.SessionLocker
	// Retry, when set, runs one step of Up or StatusOf (each makes its own
	// goose provider, so a step sent again starts afresh) and sends it
	// again when the dialect knows the failure to be passing, e.g. a
	// PostgreSQL session the server ended under it. It returns the step's
	// last error, in the dialect's terms. nil runs each step once.
	Retry func(ctx context.Context, step func() error) error
}

func (d Dialect) name() string {
	if d.Name == "" {
		return "database"
	}
	return d.Name
}

func (d Dialect) retry(ctx context.Context, step func() error) error {
	if d.Retry == nil {
		return step()
	}
	return d.Retry(ctx, step)
}

// TooNew returns store.ErrSchemaTooNew when st is of a schema migrated by
// a newer flowlite.
func (d Dialect) TooNew(st Status) error {
	if st.Current <= st.Latest {
		return nil
	}
	return fmt.Errorf("%w: %s is at version %d, this binary knows up to %d; upgrade flowlite",
		store.ErrSchemaTooNew, d.name(), st.Current, st.Latest)
}

// provider returns a goose provider over db keeping its versions in table.
// Never call its Close: it closes db, which belongs to the caller (the
// store keeps using it).
func provider(db *sql.DB, d Dialect, table string, opts ...goose.ProviderOption) (*goose.Provider, error) {
	p, err := goose.NewProvider(d.Goose, db, d.FS, append([]goose.ProviderOption{
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(table),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// latest returns the highest version of p's migrations and how many are
// above current.
func latest(p *goose.Provider, current int64) (latest int64, behind int) {
	for _, s := range p.ListSources() {
		latest = max(latest, s.Version)
		if s.Version > current {
			behind++
		}
	}
	return latest, behind
}

// read returns the status of the schema whose versions table holds,
// without writing and without a lock. A schema without the table (""),
// which goose would create on its first read, is all pending.
func read(ctx context.Context, db *sql.DB, d Dialect, table string) (Status, error) {
	if table == "" {
		return Known(db, d)
	}
	p, err := provider(db, d, table)
	if err != nil {
		return Status{}, err
	}
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("read schema version: %w", err)
	}
	st := Status{Current: current}
	st.Latest, st.Behind = latest(p, current)
	if current > st.Latest {
		return st, nil // too new: Up refuses it, StatusOf reports it
	}
	// The highest version alone would hide a lower migration the database
	// lacks; goose compares the whole list and refuses such a gap.
	if _, err := p.HasPending(ctx); err != nil {
		return st, fmt.Errorf("%s at version %d lacks a lower migration; restore a backup or re-create the %s: %w", d.name(), current, d.name(), err)
	}
	return st, nil
}

// Known returns the status of a database that holds no flowlite schema
// yet: Latest, and every migration Behind. It sends nothing to db.
func Known(db *sql.DB, d Dialect) (Status, error) {
	p, err := provider(db, d, d.Table)
	if err != nil {
		return Status{}, err
	}
	var st Status
	st.Latest, st.Behind = latest(p, 0)
	return st, nil
}

// StatusOf returns the schema status of a database without writing to it
// and without a lock: a database without flowlite's schema is reported
// with store.ErrNotDatabase.
func StatusOf(ctx context.Context, db *sql.DB, d Dialect) (Status, error) {
	var st Status
	err := d.retry(ctx, func() error {
		t, err := d.Find(ctx, db)
		if err != nil {
			return err
		}
		if t == "" {
			return fmt.Errorf("%w: it holds no flowlite schema (no %s table)", store.ErrNotDatabase, d.Table)
		}
		st, err = read(ctx, db, d, t)
		return err
	})
	return st, err
}

// Up migrates a database to the latest schema, creating it in a database
// without one, and moving one in an older layout into the current one
// first. A database whose schema is newer than this binary is refused with
// store.ErrSchemaTooNew and left untouched.
//
// It reads the version first, without a lock, and is done when nothing is
// pending. Otherwise it applies the migrations under the dialect's Locker:
// it reads the version again under the lock, which creates goose's table in
// a fresh schema and sees what a process that held the lock before
// applied (perhaps a newer flowlite), then lets goose apply what is still
// missing, often nothing.
func Up(ctx context.Context, db *sql.DB, d Dialect) (Status, error) {
	var table string
	var st Status
	if err := d.retry(ctx, func() (err error) {
		if table, err = d.Find(ctx, db); err != nil {
			return err
		}
		st, err = read(ctx, db, d, table)
		return err
	}); err != nil {
		return st, err
	}
	if err := d.TooNew(st); err != nil {
		return st, err
	}
	if !st.Pending() {
		return st, nil
	}
	if table != "" && table != d.Table {
		if d.Adopt == nil {
			return st, errors.New("apply migrations: the schema is in an older layout, and the dialect cannot move it")
		}
		if err := d.Adopt(ctx, db); err != nil {
			return st, err
		}
	}
	if err := d.retry(ctx, func() error { return apply(ctx, db, d) }); err != nil {
		return st, err
	}
	st.Current, st.Behind = st.Latest, 0
	return st, nil
}

// apply applies the pending migrations under the dialect's lock.
func apply(ctx context.Context, db *sql.DB, d Dialect) error {
	var opts []goose.ProviderOption
	if d.Locker != nil {
		opts = append(opts, goose.WithSessionLocker(d.Locker))
	}
	p, err := provider(db, d, d.Table, opts...)
	if err != nil {
		return err
	}
	what := "apply migrations"
	if d.Name != "" {
		what += " to " + d.Name
	}
	st := Status{}
	if st.Current, err = p.GetDBVersion(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	st.Latest, st.Behind = latest(p, st.Current)
	// A newer flowlite may have migrated the schema in the meantime.
	if err := d.TooNew(st); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
