package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/migrate"
)

// SchemaInfo describes a PostgreSQL schema, as Inspect reads it.
type SchemaInfo struct {
	Exists   bool // the schema exists
	Flowlite bool // it has flowlite's version table (VersionTable)
	// Status is, when Flowlite, the applied and known versions; else only
	// Latest is set.
	Status migrate.Status
	// Replica says whether the server is a standby, and how far behind.
	Replica ReplicaInfo
}

// Inspect reads the state of schema in the database dsn without changing
// anything and without taking a lock, for tools (the CLI) that must not
// create or migrate a schema, as Open would. It opens a connection of its
// own through pgx's database/sql driver and closes it. Its errors are the
// driver's, as the tool's user would see them from any client: unlike a
// store's, they are not turned into store's sentinels, and a statement is
// not sent again on a session the server ended, which a tool reports.
// Behind a transaction pooler (pooler), its statements run unnamed.
func Inspect(ctx context.Context, dsn, schema string, pooler Pooler) (SchemaInfo, error) {
	info, err := inspect(ctx, dsn, schema, pooler)
	return info, poolerHint(tellAttemptsOnce(err), pooler)
}

func inspect(ctx context.Context, dsn, schema string, pooler Pooler) (SchemaInfo, error) {
	var info SchemaInfo
	if err := validSchema(schema); err != nil {
		return info, err
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return info, parseError(dsn, err)
	}
	if pooler == TransactionPooler {
		// Nothing else of configureForPooler: Inspect sets nothing on its
		// session, whatever the pooler.
		configureForPooler(cfg, pooler, 0)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	db.SetMaxOpenConns(1)
	d, err := dialect(db, schema, newQualifier(schema))
	if err != nil {
		return info, err
	}
	d.Retry = nil
	// The latest version needs no query: a schema that is missing, or not
	// flowlite's, still says which version this binary would create.
	if info.Status, err = migrate.Known(db, d); err != nil {
		return info, err
	}
	row, err := pgdb.New(db).ReplicaStatus(ctx)
	if err != nil {
		return info, err
	}
	info.Replica = replicaInfo(row)
	if info.Exists, err = pgdb.New(db).SchemaExists(ctx, schema); err != nil || !info.Exists {
		return info, err
	}
	table, err := d.Find(ctx, db)
	if err != nil || table == "" {
		return info, err
	}
	st, err := migrate.StatusOf(ctx, db, d)
	if err != nil {
		return info, fmt.Errorf("schema %s: %w", schema, err)
	}
	info.Flowlite, info.Status = true, st
	return info, nil
}
