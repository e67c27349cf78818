package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/flow/flowtype"
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
// as old as the standby's lag (ReplicaInfo, which Inspect reports).

// ReplicaInfo is what Inspect reports of the server's replication.
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

// replicaInfo is the ReplicaStatus row as ReplicaInfo.
func replicaInfo(row pgdb.ReplicaStatusRow) ReplicaInfo {
	return ReplicaInfo{Standby: row.InRecovery, CaughtUp: row.CaughtUp, ReplayAge: time.Duration(row.ReplayAgeMs) * time.Millisecond}
}

// StandbyStatus reads, now, whether the server is a standby and how far
// its replay stands (store.StandbyReporter): the dashboard and /metrics
// ask at each page and scrape, since a standby's lag changes by the
// second, while ReadOnly was decided once, at Open.
func (s *Store) StandbyStatus(ctx context.Context) (flowtype.StandbyStatus, error) {
	row, err := pgdb.New(s.db).ReplicaStatus(ctx)
	if err != nil {
		return flowtype.StandbyStatus{}, fmt.Errorf("read the standby status: %w", err)
	}
	r := replicaInfo(row)
	if !r.Standby {
		// A primary replays nothing: its caught_up (true by COALESCE)
		// would read as a standby's.
		return flowtype.StandbyStatus{}, nil
	}
	return flowtype.StandbyStatus{Standby: true, CaughtUp: r.CaughtUp, ReplayAge: r.ReplayAge}, nil
}

var _ store.StandbyReporter = (*Store)(nil)

// ReadOnly says why the store only reads ("" when it writes).
func (s *Store) ReadOnly() string { return s.readOnly }

func (s *Store) errReadOnly() error {
	return fmt.Errorf("write: %w: %s", flowtype.ErrReadOnly, s.readOnly)
}

// checkReplicaSchema refuses a standby's schema that is missing or not at
// this binary's version: the standby cannot be migrated, its primary is.
func checkReplicaSchema(ctx context.Context, db *sql.DB, schema string, names *qualifier) error {
	return requireCurrentSchema(ctx, db, schema, names,
		"open an engine on the primary, which creates it",
		"migrate the primary (an engine or `flowlite migrate up` there)", nil)
}
