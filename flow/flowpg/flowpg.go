package flowpg

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	// The database/sql driver New expects its pool to be opened with,
	// registered under the name "pgx".
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
)

// DriverName is the database/sql driver name under which this package
// registers pgx: open the pool for New with sql.Open(flowpg.DriverName, dsn).
const DriverName = "pgx"

// DefaultSchema is the schema flowlite's tables live in unless
// Options.Schema names another.
const DefaultSchema = pgstore.DefaultSchema

// Options configures the PostgreSQL side of an engine. A nil *Options, and
// every zero field, means the default.
type Options struct {
	// Schema is the PostgreSQL schema that holds flowlite's tables and its
	// migration version table; default DefaultSchema ("flowlite"). Open and
	// New create it when it is missing. It must be a lowercase identifier of
	// at most 63 letters, digits and underscores, not starting with a digit
	// or pg_: it goes unquoted into every statement. Engines that should
	// work the same runs use the same schema; separate schemas are
	// separate, unrelated engines (tests use one per test).
	Schema string
	// MaxConns caps the connections of the pool Open creates. Every
	// write transaction holds one while it runs, so it bounds how many
	// claims, heartbeats and step checkpoints proceed at once. Default 10.
	// New uses the caller's pool as it is and ignores MaxConns.
	MaxConns int
	// ApplicationName is the application_name of the sessions Open
	// connects (the pool's and the wake listener's), as pg_stat_activity
	// shows it: what tells flowlite's sessions from the application's when
	// an operator watches them or ends them (pg_terminate_backend). Default:
	// the DSN's application_name, else DefaultApplicationName ("flowlite").
	// New uses the caller's pool as it is and ignores ApplicationName.
	ApplicationName string
	// Pooler says what stands between the DSN and the server: NoPooler
	// (the default), SessionPooler or TransactionPooler (PgBouncer's
	// pool_mode). Behind a transaction pooler, Open's pool runs every
	// statement unnamed (no prepared statements) and sets nothing on its
	// sessions; New's pool must be set up so by the caller (pgx's
	// QueryExecModeExec). docs/postgres.md has the matrix of what works
	// behind each.
	Pooler Pooler
	// DirectDSN, when set, reaches the server itself rather than through
	// the pooler: the wake listeners (LISTEN) and the migrations (which
	// hold a session advisory lock) use it. Behind a transaction pooler
	// without it, engines find other processes' work by polling, and a
	// schema that needs migrating is refused with ErrMigrateThroughPooler
	// (migrate it with `flowlite migrate up` against the server).
	DirectDSN string
	// HistoryPartitions, when positive, keeps the history of runs (the
	// events table, most of the rows a run writes) in partitions of that
	// span of time, at least a second: the cleaner then drops a partition
	// whole, with the runs whose history it holds, where it would delete
	// their events row by row, which leaves dead rows for vacuum
	// (docs/postgresql-production.md, "Partitioned history"). A day suits
	// retentions of days. The first Open with it turns the schema's events
	// table into a partitioned one, keeping every row, under a lock that
	// holds every writer of the schema back meanwhile; a later Open with
	// another span changes the span of the partitions made from then on,
	// and one without it (0) keeps the partitions as they are. A run is
	// kept for its retention, and up to two spans more while a run still
	// kept has history in its partition. Negative is refused.
	HistoryPartitions time.Duration
}

// Pooler says what stands between a DSN and the server: PgBouncer and the
// like, in one of their pool modes (docs/postgres.md, "Connection
// poolers").
type Pooler int

// The poolers Options.Pooler takes.
const (
	// NoPooler: the DSN reaches the server itself.
	NoPooler Pooler = iota
	// SessionPooler: a pooler that gives each client connection a server
	// session for its lifetime (PgBouncer's pool_mode = session). Every
	// feature works; settings are made on each new connection rather than
	// in the startup packet, which such poolers refuse.
	SessionPooler
	// TransactionPooler: a pooler that gives a client a server session for
	// one transaction at a time (pool_mode = transaction). Statements run
	// unnamed, nothing is set on sessions, and LISTEN and migrations need
	// Options.DirectDSN.
	TransactionPooler
)

// String returns the pooler's name as ParsePooler reads it.
func (p Pooler) String() string {
	switch p {
	case NoPooler:
		return "none"
	case SessionPooler:
		return "session"
	case TransactionPooler:
		return "transaction"
	}
	return fmt.Sprintf("Pooler(%d)", int(p))
}

// ParsePooler returns the Pooler named "none" (or ""), "session" or
// "transaction".
func ParsePooler(s string) (Pooler, error) {
	for _, p := range []Pooler{NoPooler, SessionPooler, TransactionPooler} {
		if s == p.String() {
			return p, nil
		}
	}
	if s == "" {
		return NoPooler, nil
	}
	return NoPooler, fmt.Errorf("unknown pooler %q: want none, session or transaction", s)
}

// store is p in the adapter's terms.
func (p Pooler) store() (pgstore.Pooler, error) {
	switch p {
	case NoPooler:
		return pgstore.NoPooler, nil
	case SessionPooler:
		return pgstore.SessionPooler, nil
	case TransactionPooler:
		return pgstore.TransactionPooler, nil
	}
	return pgstore.NoPooler, fmt.Errorf("unknown pooler %d: want NoPooler, SessionPooler or TransactionPooler", int(p))
}

// ErrMigrateThroughPooler is returned by Open and New behind a transaction
// pooler without Options.DirectDSN when the schema is missing or behind:
// nothing is written.
var ErrMigrateThroughPooler = pgstore.ErrMigrateThroughPooler

// DefaultApplicationName is the application_name of the sessions Open
// connects when neither Options.ApplicationName nor the DSN names one.
const DefaultApplicationName = pgstore.DefaultApplicationName

func (o *Options) storeOptions() (pgstore.Options, error) {
	if o == nil {
		return pgstore.Options{}, nil
	}
	pooler, err := o.Pooler.store()
	if err != nil {
		return pgstore.Options{}, fmt.Errorf("flowpg: Options.Pooler: %w", err)
	}
	return pgstore.Options{
		Schema: o.Schema, MaxConns: o.MaxConns, ApplicationName: o.ApplicationName,
		Pooler: pooler, DirectDSN: o.DirectDSN, HistoryPartitions: o.HistoryPartitions,
	}, nil
}

// backend is the flow.Backend of a PostgreSQL schema: open opens its store.
type backend struct {
	open func(ctx context.Context) (*pgstore.Store, error)
}

func (b *backend) OpenStore(ctx context.Context) (store.Opened, error) {
	s, err := b.open(ctx)
	if err != nil {
		return store.Opened{}, err
	}
	// BusyTimeout stays zero: PostgreSQL has no database-wide write lock
	// for a heartbeat to wait out, only row locks held for the length of
	// one short transaction.
	return store.Opened{Store: s, ReadOnly: s.ReadOnly()}, nil
}

// Open opens an engine on the PostgreSQL database dsn names, a URL
// ("postgres://user:pass@host:5432/db?sslmode=disable") or key=value
// string ("host=… dbname=…") as pgx parses it, with a pool of its own
// that Close closes. It creates the schema when it is missing and
// migrates it; a schema that needs no migration opens without taking a
// lock, and several processes may open one schema at once (see the
// package doc). A schema migrated by a newer flowlite is refused with
// flow.ErrSchemaTooNew and left untouched; a database that does not exist
// fails with flow.ErrNotDatabase, and a server that cannot be reached
// with flow.ErrUnavailable. Errors name the server and database, never
// the password: a DSN that cannot be parsed is quoted only when it holds
// no password, else the error gives only what is wrong with it ("invalid
// port").
//
// Its connections give up on a network that went silent after about one
// LeaseTimeout (at least a second, at most 30s): a dial, a statement or a
// commit on a dead link fails instead of hanging for the minutes TCP would
// wait, so an engine cut off from the server notices, stops when asked,
// and reconnects by itself once the link is back; and the server ends a
// session left idle in a transaction that long, so the runs whose rows a
// vanished worker's transaction locked are rescued by the others. The
// DSN's connect_timeout (default the same, up to 10s), tcp_user_timeout (milliseconds) and
// idle_in_transaction_session_timeout override these.
func Open(ctx context.Context, dsn string, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	so, err := opts.storeOptions()
	if err != nil {
		return nil, err
	}
	so.NetworkTimeout = networkTimeout(cfg)
	so.ServerChangeHold = serverChangeHold(cfg)
	return flow.New(ctx, &backend{open: func(ctx context.Context) (*pgstore.Store, error) {
		s, err := pgstore.Open(ctx, dsn, so)
		if err != nil {
			return nil, fmt.Errorf("flowpg: %w", err)
		}
		return s, nil
	}}, cfg)
}

// networkTimeout is the store's NetworkTimeout for an engine configured
// with cfg: its lease, within [time.Second, pgstore.DefaultNetworkTimeout].
// A worker whose link is silent longer than a lease has lost its runs to
// the others anyway; a shorter wait would drop connections of a live
// network that is merely slow, a longer one (tests lease runs for hours)
// would leave a vanished worker's locks in place.
func networkTimeout(cfg *flow.Config) time.Duration {
	lease := pgstore.DefaultNetworkTimeout
	if cfg != nil && cfg.LeaseTimeout > 0 {
		lease = cfg.LeaseTimeout
	}
	return min(max(lease, time.Second), pgstore.DefaultNetworkTimeout)
}

// serverChangeHold is the store's ServerChangeHold for an engine configured
// with cfg: its lease (see pgstore/server.go).
func serverChangeHold(cfg *flow.Config) time.Duration {
	if cfg != nil && cfg.LeaseTimeout > 0 {
		return cfg.LeaseTimeout
	}
	return pgstore.DefaultServerChangeHold
}

// New returns an engine on a PostgreSQL database the caller opened with
// sql.Open(flowpg.DriverName, dsn), or stdlib.OpenDB of pgx v5, and
// creates and migrates the schema as Open does. The pool is used as it is (size,
// lifetimes, application_name, search_path: flowlite names its schema in
// every statement), and Close does not close it. Of opts, MaxConns and
// ApplicationName do not apply. The network timeouts Open sets up are the
// caller's to choose here: without idle_in_transaction_session_timeout on
// the pool's sessions (in the DSN, at most the lease), a worker that
// vanishes mid-transaction keeps its runs' rows locked, and out of the
// other workers' reach, until the server notices it is gone.
func New(ctx context.Context, db *sql.DB, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	if db == nil {
		return nil, fmt.Errorf("flowpg: new engine: nil *sql.DB")
	}
	so, err := opts.storeOptions()
	if err != nil {
		return nil, err
	}
	so.ServerChangeHold = serverChangeHold(cfg)
	return flow.New(ctx, &backend{open: func(ctx context.Context) (*pgstore.Store, error) {
		s, err := pgstore.OpenDB(ctx, db, so)
		if err != nil {
			return nil, fmt.Errorf("flowpg: %w", err)
		}
		return s, nil
	}}, cfg)
}
