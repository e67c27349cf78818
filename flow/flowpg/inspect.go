package flowpg

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// SchemaInfo describes a PostgreSQL schema, as Inspect reads it.
type SchemaInfo struct {
	Exists   bool  // the schema exists
	Flowlite bool  // it holds flowlite's migration table
	Current  int64 // when Flowlite, the highest version applied
	Latest   int64 // the highest version this flowlite knows
	// Standby says the server is a standby in recovery, a read replica:
	// an engine opened there only reads (Open). CaughtUp says it replayed
	// all the WAL it received; ReplayAge is how long ago the last
	// transaction it replayed committed on the primary, its lag while it
	// is not CaughtUp (and, once caught up, how long the primary has been
	// idle).
	Standby   bool
	CaughtUp  bool
	ReplayAge time.Duration
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
	return SchemaInfo{
		Exists: s.Exists, Flowlite: s.Flowlite, Current: s.Status.Current, Latest: s.Status.Latest,
		Standby: s.Replica.Standby, CaughtUp: s.Replica.CaughtUp, ReplayAge: s.Replica.ReplayAge,
	}, err
}
