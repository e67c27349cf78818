// Package migrate applies a dialect's embedded goose migrations to a
// database and refuses databases whose schema is newer than this binary
// knows. It knows no dialect itself: each adapter describes its own with a
// Dialect (sqlitestore.Dialect), and this package is the one entry point
// for all of them.
// It imports internal/store and goose.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"

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
	// flowlite's namespace.
	Table string
	// Find returns the version table of db's flowlite schema: Table, the
	// table of an older layout that Adopt moves into the current one, or ""
	// when db holds no flowlite schema. It must not write.
	Find func(ctx context.Context, db *sql.DB) (string, error)
	// Adopt moves a database in an older layout (Find returned a table
	// other than Table) into the current one, in one transaction; nil when
	// the dialect never had another layout.
	Adopt func(ctx context.Context, db *sql.DB) error
}

// provider returns a goose provider over db keeping its versions in table.
// Never call its Close: it closes db, which belongs to the caller (the
// store keeps using it).
func provider(db *sql.DB, d Dialect, table string) (*goose.Provider, error) {
	p, err := goose.NewProvider(d.Goose, db, d.FS,
		goose.WithDisableGlobalRegistry(true), goose.WithTableName(table))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

func status(ctx context.Context, p *goose.Provider) (Status, error) {
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("read schema version: %w", err)
	}
	var latest int64
	var behind int
	for _, s := range p.ListSources() {
		latest = max(latest, s.Version)
		if s.Version > current {
			behind++
		}
	}
	st := Status{Current: current, Latest: latest, Behind: behind}
	if current > latest {
		return st, nil // too new: Up refuses it, Status reports it
	}
	// The highest version alone would hide a lower migration the database
	// lacks; goose compares the whole list and refuses such a gap.
	if _, err := p.HasPending(ctx); err != nil {
		return st, fmt.Errorf("database at version %d lacks a lower migration; restore a backup or re-create the database: %w", current, err)
	}
	return st, nil
}

// StatusOf returns the schema status of a database without writing to it: a
// database without flowlite's schema is reported with store.ErrNotDatabase.
func StatusOf(ctx context.Context, db *sql.DB, d Dialect) (Status, error) {
	t, err := d.Find(ctx, db)
	if err != nil {
		return Status{}, err
	}
	if t == "" {
		return Status{}, fmt.Errorf("%w: it holds no flowlite schema (no %s table)", store.ErrNotDatabase, d.Table)
	}
	p, err := provider(db, d, t)
	if err != nil {
		return Status{}, err
	}
	return status(ctx, p)
}

// Up migrates a database to the latest schema, creating it in a database
// without one, and moving one in an older layout into the current one
// first. A database whose schema is newer than this binary is refused with
// store.ErrSchemaTooNew and left untouched.
func Up(ctx context.Context, db *sql.DB, d Dialect) (Status, error) {
	t, err := d.Find(ctx, db)
	if err != nil {
		return Status{}, err
	}
	if t == "" {
		t = d.Table // a fresh schema: goose creates its table
	}
	p, err := provider(db, d, t)
	if err != nil {
		return Status{}, err
	}
	st, err := status(ctx, p)
	if err != nil {
		return Status{}, err
	}
	if st.Current > st.Latest {
		return st, fmt.Errorf("%w: database is at version %d, this binary knows up to %d; upgrade flowlite",
			store.ErrSchemaTooNew, st.Current, st.Latest)
	}
	if !st.Pending() {
		return st, nil
	}
	if t != d.Table {
		if d.Adopt == nil {
			return st, errors.New("apply migrations: the schema is in an older layout, and the dialect cannot move it")
		}
		if err := d.Adopt(ctx, db); err != nil {
			return st, err
		}
		if p, err = provider(db, d, d.Table); err != nil {
			return st, err
		}
	}
	if _, err := p.Up(ctx); err != nil {
		return st, fmt.Errorf("apply migrations: %w", err)
	}
	st.Current = st.Latest
	return st, nil
}
