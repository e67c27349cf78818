package flowtest

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// BackendEnv is the environment variable that chooses the database an Env
// runs on: unset (or anything else), a SQLite file in t.TempDir(); set to
// "postgres", a schema of its own on the PostgreSQL database that
// FLOWLITE_PG_DSN names (default postgres://postgres@127.0.0.1:5432/postgres),
// dropped when the test ends. It lets one test suite check that workflows
// behave the same on both backends without changing a line of it.
const BackendEnv = pgtest.BackendEnv

// openEngine opens the Env's engine on the backend BackendEnv chooses.
func openEngine(ctx context.Context, t TB, cfg *flow.Config) (*flow.Engine, error) {
	t.Helper()
	if pgtest.Postgres() {
		// Registered before the engine's own cleanup, so it runs after the
		// engine is closed.
		dsn, schema := pgtest.Schema(t)
		opts := pgtest.Options(schema)
		opts.MaxConns = 4
		e, err := flowpg.Open(ctx, dsn, cfg, opts)
		if err != nil {
			return nil, fmt.Errorf("on PostgreSQL (%s=postgres): %w", BackendEnv, err)
		}
		return e, nil
	}
	// synchronous=NORMAL: a test has no power loss to survive.
	return flowsqlite.Open(ctx, filepath.Join(t.TempDir(), "flowtest.db"), cfg,
		&flowsqlite.Options{Synchronous: flowsqlite.SynchronousNormal})
}
