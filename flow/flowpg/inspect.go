package flowpg

import (
	"cmp"
	"context"
	"fmt"

	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// SchemaInfo describes a PostgreSQL schema, as Inspect reads it.
type SchemaInfo struct {
	Exists   bool  // the schema exists
	Flowlite bool  // it holds flowlite's migration table
	Current  int64 // when Flowlite, the highest version applied
	Latest   int64 // the highest version this flowlite knows
}

// Pending reports whether migrations remain to be applied.
func (s SchemaInfo) Pending() bool { return s.Current < s.Latest }

// Inspect reads the schema opts names (default DefaultSchema) in the
// database dsn without creating, migrating or locking anything, where Open
// would create and migrate it: what an operator's tool needs to refuse a
// schema that is missing, is not flowlite's, or is at another version,
// before it opens an engine. It connects once, on a connection of its own,
// and returns the driver's errors as they are. Of opts, only Schema
// applies.
func Inspect(ctx context.Context, dsn string, opts *Options) (SchemaInfo, error) {
	schema, pooler := DefaultSchema, pgstore.NoPooler
	if opts != nil {
		schema = cmp.Or(opts.Schema, DefaultSchema)
		var err error
		if pooler, err = opts.Pooler.store(); err != nil {
			return SchemaInfo{}, fmt.Errorf("flowpg: Options.Pooler: %w", err)
		}
	}
	s, err := pgstore.Inspect(ctx, dsn, schema, pooler)
	return SchemaInfo{Exists: s.Exists, Flowlite: s.Flowlite, Current: s.Status.Current, Latest: s.Status.Latest}, err
}
