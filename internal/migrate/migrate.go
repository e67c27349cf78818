// Package migrate applies the embedded goose migrations to a database and
// refuses databases whose schema is newer than this binary knows.
// It imports db/migrations, internal/store and goose.
package migrate

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"

	"github.com/flowlite/flowlite/db/migrations"
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

// VersionTable is the table in which goose records the applied migrations.
const VersionTable = "goose_db_version"

// provider returns a goose provider over db. Never call its Close: it closes
// db, which belongs to the caller (the store keeps using it).
func provider(db *sql.DB) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite(),
		goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// SQLiteStatus returns the schema status of a SQLite database. It creates
// goose's version table when it is missing.
func SQLiteStatus(ctx context.Context, db *sql.DB) (Status, error) {
	p, err := provider(db)
	if err != nil {
		return Status{}, err
	}
	return status(ctx, p)
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
		return st, nil // too new: SQLite refuses it, status reports it
	}
	// The highest version alone would hide a lower migration the database
	// lacks; goose compares the whole list and refuses such a gap.
	if _, err := p.HasPending(ctx); err != nil {
		return st, fmt.Errorf("database at version %d lacks a lower migration; restore a backup or re-create the database: %w", current, err)
	}
	return st, nil
}

// SQLiteStatusReadOnly returns the schema status of a SQLite database
// without writing to it: a database without goose's version table is not
// flowlite's, and is reported with store.ErrNotDatabase instead of getting
// the table created.
func SQLiteStatusReadOnly(ctx context.Context, db *sql.DB) (Status, error) {
	ok, err := HasVersionTable(ctx, db)
	if err != nil {
		return Status{}, err
	}
	if !ok {
		return Status{}, fmt.Errorf("%w: it holds no flowlite schema (no %s table)", store.ErrNotDatabase, VersionTable)
	}
	return SQLiteStatus(ctx, db)
}

// HasVersionTable reports whether db holds flowlite's schema version table.
// sqlc does not compile reads of sqlite_master: this is the package's one
// SQL statement.
func HasVersionTable(ctx context.Context, db *sql.DB) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", VersionTable).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read schema: %w", err)
	}
	return n > 0, nil
}

// SQLite migrates a SQLite database to the latest schema. A database whose
// schema is newer than this binary is refused with store.ErrSchemaTooNew and
// left untouched.
func SQLite(ctx context.Context, db *sql.DB) (Status, error) {
	p, err := provider(db)
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
	if _, err := p.Up(ctx); err != nil {
		return st, fmt.Errorf("apply migrations: %w", err)
	}
	st.Current = st.Latest
	return st, nil
}
