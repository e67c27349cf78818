package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/migrate"
	"github.com/flowlite/flowlite/internal/store"
)

// Read replicas. A store opened on a standby in recovery (a streaming
// replica) only reads: the dashboard, the CLI's reads and a reporting
// service's Inspect and ListRuns can be served there, off the primary.
// Open finds out by itself (pg_is_in_recovery), so the same DSN-taking
// code works on either: on a standby it does not migrate (it cannot
// write; the primary's migrations arrive by replication) but refuses a
// schema that is missing or not at this binary's version, its writes fail
// with flowtype.ErrReadOnly, the engine refuses to start, and waits and
// the change feed poll, since a standby cannot LISTEN. What it reads is
// as old as the standby's lag (Replica).

// ReplicaInfo is what Replica reports of the server.
type ReplicaInfo struct {
	// Standby says the server is a standby in recovery.
	Standby bool
	// CaughtUp says the standby replayed all the WAL it received.
	CaughtUp bool
	// ReplayAge is how long ago the last transaction the standby replayed
	// committed on the primary: its lag while it is behind (not CaughtUp),
	// and while caught up, how long the primary has committed nothing.
	ReplayAge time.Duration
}

// Replica reports whether the store's server is a standby, and how far
// behind its primary.
func (r reader) Replica(ctx context.Context) (ReplicaInfo, error) {
	row, err := r.q.ReplicaStatus(ctx)
	if err != nil {
		return ReplicaInfo{}, fmt.Errorf("read replication status: %w", interpretError(ctx, err))
	}
	return replicaInfo(row), nil
}

func replicaInfo(row pgdb.ReplicaStatusRow) ReplicaInfo {
	return ReplicaInfo{Standby: row.InRecovery, CaughtUp: row.CaughtUp, ReplayAge: time.Duration(row.ReplayAgeMs) * time.Millisecond}
}

// Replica is Reader().Replica.
func (s *Store) Replica(ctx context.Context) (ReplicaInfo, error) {
	return reader{q: pgdb.New(s.conn(s.db)), s: s}.Replica(ctx)
}

// ReadOnly says why the store only reads ("" when it writes).
func (s *Store) ReadOnly() string { return s.readOnly }

func (s *Store) errReadOnly() error {
	return fmt.Errorf("write: %w: %s", flowtype.ErrReadOnly, s.readOnly)
}

// checkReplicaSchema refuses a standby's schema that is missing or not at
// this binary's version: the standby cannot be migrated, its primary is.
func checkReplicaSchema(ctx context.Context, db *sql.DB, schema string, names *qualifier) error {
	d, err := dialect(db, schema, names)
	if err != nil {
		return err
	}
	st, err := migrate.StatusOf(ctx, db, d)
	switch {
	case errors.Is(err, store.ErrNotDatabase):
		return fmt.Errorf("schema %s does not exist on this standby: open an engine on the primary, which creates it", schema)
	case err != nil:
		return err
	case d.TooNew(st) != nil:
		return d.TooNew(st)
	case st.Pending():
		return fmt.Errorf("schema %s is at version %d on this standby, this flowlite needs %d: migrate the primary (an engine or `flowlite migrate up` there)", schema, st.Current, st.Latest)
	}
	return nil
}
