package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/internal/migrate"
	"github.com/flowlite/flowlite/internal/store"
)

// Poolers. Much hosted PostgreSQL is reached through a connection pooler,
// PgBouncer most often, in one of two modes:
//
//   - Session pooling gives a client connection one server session for as
//     long as it is open, so everything works, but the pooler accepts only
//     a few settings in the startup packet (application_name among them):
//     the others are set on each new connection instead (SessionPooler).
//   - Transaction pooling gives a client a server session for one
//     transaction only, the next one may run on another. Nothing of a
//     session survives a transaction there: prepared statements (pgx
//     caches one per statement and connection), settings made with SET,
//     LISTEN, and session advisory locks, which the migrations take. So a
//     store behind one (TransactionPooler) runs every statement unnamed
//     (pgx's QueryExecModeExec: no statement cache), sets nothing on its
//     sessions (the server's or the role's defaults apply, and the
//     pooler's idle_transaction_timeout stands in for
//     idle_in_transaction_session_timeout), listens for wakes and migrates
//     over Options.DirectDSN, a connection to the server itself, and
//     without one, finds other processes' work by polling and refuses to
//     open a schema that needs migrating (ErrMigrateThroughPooler).
//
// Everything else the store does keeps to one transaction or one
// statement: row locks, transaction-level advisory locks (unique keys,
// rate limits, debounce, the schema's creation), set_config(…, true),
// NOTIFY (delivered at commit whichever session sent it) and COPY.

// Pooler says what stands between the store and the server.
type Pooler int

const (
	// NoPooler: the store connects to the server itself.
	NoPooler Pooler = iota
	// SessionPooler: a pooler that gives each client connection a server
	// session for its lifetime (PgBouncer's pool_mode = session).
	SessionPooler
	// TransactionPooler: a pooler that gives a client a server session
	// for one transaction at a time (PgBouncer's pool_mode = transaction).
	TransactionPooler
)

// ErrMigrateThroughPooler is returned by Open and OpenDB behind a
// transaction pooler, without Options.DirectDSN, for a schema that is
// missing or behind: migrations hold a session advisory lock, which such
// a pooler cannot keep. Nothing is written.
var ErrMigrateThroughPooler = errors.New("cannot migrate through a transaction pooler")

// poolerHint adds to an error what to do when a pooler the store was not
// told of is in the way: PgBouncer refuses the startup packet's settings
// but a few ("unsupported startup parameter"), and in transaction mode
// loses pgx's prepared statements between transactions.
func poolerHint(err error, p Pooler) error {
	if err == nil || p == TransactionPooler {
		return err
	}
	msg := err.Error()
	if !strings.Contains(msg, "unsupported startup parameter") && !strings.Contains(msg, `prepared statement "stmtcache_`) {
		return err
	}
	return fmt.Errorf("%w (a connection pooler such as PgBouncer is in the way: give its pool mode, flowpg.Options.Pooler or flowlite --pooler)", err)
}

// isolationSetting is what Open asks of every session it makes: the
// isolation every statement of the engine assumes (store.go), even one
// outside an explicit transaction, as a claim is (claim.go); a server,
// database or role whose default is stronger would fail some with
// serialization errors.
const isolationSetting = "default_transaction_isolation"

// configureForPooler sets up cfg for what stands between it and the
// server, and returns the AfterConnect of the pool's connections (nil:
// none). idleInTx is the idle-in-transaction timeout to set on each
// session (zero: none).
func configureForPooler(cfg *pgx.ConnConfig, p Pooler, idleInTx int64) func(context.Context, *pgx.Conn) error {
	var settings []string // name, value pairs for set_config on connect
	switch p {
	case NoPooler:
		cfg.RuntimeParams[isolationSetting] = "read committed"
	case SessionPooler:
		settings = append(settings, isolationSetting, "read committed")
	case TransactionPooler:
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
		cfg.StatementCacheCapacity = 0
		cfg.DescriptionCacheCapacity = 0
		return nil
	}
	if idleInTx > 0 {
		settings = append(settings, paramIdleInTx, fmt.Sprint(idleInTx))
	}
	if len(settings) == 0 {
		return nil
	}
	return setSessionSettings(settings)
}

// setSessionSettings is the AfterConnect of Open's pool: it makes the
// settings (name, value pairs) on the session once connected. It is
// written here rather than in db/queries because it runs on the pgx
// connection being set up, before database/sql sees it (as LISTEN does in
// notify.go); a setting in the startup packet instead would be refused by
// poolers such as PgBouncer, which accept only a few parameters there.
func setSessionSettings(settings []string) func(ctx context.Context, conn *pgx.Conn) error {
	return func(ctx context.Context, conn *pgx.Conn) error {
		for i := 0; i < len(settings); i += 2 {
			if _, err := conn.Exec(ctx, "SELECT set_config($1, $2, false)", settings[i], settings[i+1]); err != nil {
				return fmt.Errorf("set %s: %w", settings[i], err)
			}
		}
		return nil
	}
}

// directConfig returns the settings of a connection to the server itself
// for LISTEN and migrations: Options.DirectDSN's, with the store's
// application name and network settings; nil when there is no DirectDSN.
func directConfig(opts Options) (*pgx.ConnConfig, error) {
	if opts.DirectDSN == "" {
		return nil, nil
	}
	cfg, err := pgx.ParseConfig(opts.DirectDSN)
	if err != nil {
		return nil, fmt.Errorf("DirectDSN: %w", parseError(opts.DirectDSN, err))
	}
	cfg.RuntimeParams[isolationSetting] = "read committed"
	setApplicationName(cfg, opts.ApplicationName)
	if _, err := networkSettings(cfg, opts.NetworkTimeout); err != nil {
		return nil, fmt.Errorf("DirectDSN: %w", err)
	}
	return cfg, nil
}

// migrateBehindPooler migrates the schema over the direct connection when
// there is one; without, behind a transaction pooler, it only checks that
// nothing is pending, and refuses a schema that is missing or behind.
func migrateBehindPooler(ctx context.Context, pooled *sql.DB, direct *pgx.ConnConfig, schema string, names *qualifier) error {
	if direct != nil {
		db := stdlib.OpenDB(*direct)
		defer db.Close()
		db.SetMaxOpenConns(2)
		if err := migrateSchema(ctx, db, schema, names); err != nil {
			return fmt.Errorf("over DirectDSN: %w", err)
		}
		return nil
	}
	return requireCurrentSchema(ctx, pooled, schema, names,
		"create it over DirectDSN (Options.DirectDSN) or with `flowlite migrate up` against the server itself",
		"migrate over DirectDSN (Options.DirectDSN) or with `flowlite migrate up` against the server itself",
		ErrMigrateThroughPooler)
}

// requireCurrentSchema refuses, without writing, a schema that is
// missing, behind this binary (saying what to do about each, and wrapping
// cause when set) or newer: for a store that cannot migrate it.
func requireCurrentSchema(ctx context.Context, db *sql.DB, schema string, names *qualifier, ifMissing, ifBehind string, cause error) error {
	d, err := dialect(db, schema, names)
	if err != nil {
		return err
	}
	st, err := migrate.StatusOf(ctx, db, d)
	why := func(what, todo string) error {
		if cause != nil {
			return fmt.Errorf("%s: %w; %s", what, cause, todo)
		}
		return fmt.Errorf("%s: %s", what, todo)
	}
	switch {
	case errors.Is(err, store.ErrNotDatabase):
		return why("schema "+schema+" does not exist", ifMissing)
	case err != nil:
		return err
	case d.TooNew(st) != nil:
		return d.TooNew(st)
	case st.Pending():
		return why(fmt.Sprintf("schema %s is at version %d, this flowlite needs %d", schema, st.Current, st.Latest), ifBehind)
	}
	return nil
}
