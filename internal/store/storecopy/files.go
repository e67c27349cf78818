package storecopy

import (
	"context"
	"time"

	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// Files names the two ends of a copy for a tool that holds no store: the
// SQLite file and the PostgreSQL schema.
type Files struct {
	Path        string        // the SQLite file, opened read-only
	BusyTimeout time.Duration // its busy timeout; zero: the default
	DSN         string        // the PostgreSQL database
	Schema      string        // the schema copied into, created and migrated when missing; "": pgstore.DefaultSchema
}

// CopyFiles opens both ends of f, copies as Copy does, closes both, and
// returns the counts and the schema copied into.
func CopyFiles(ctx context.Context, f Files, opts Options) (store.CopyCounts, string, error) {
	src, err := sqlitestore.OpenReadOnly(ctx, f.Path, sqlitestore.Options{BusyTimeout: f.BusyTimeout})
	if err != nil {
		return store.CopyCounts{}, "", err
	}
	defer func() { _ = src.Close() }()
	dst, err := pgstore.Open(ctx, f.DSN, pgstore.Options{Schema: f.Schema, NoWakes: true})
	if err != nil {
		return store.CopyCounts{}, "", err
	}
	defer func() { _ = dst.Close() }()
	counts, err := Copy(ctx, src, dst, opts)
	return counts, dst.Schema(), err
}
