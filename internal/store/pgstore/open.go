// Package pgstore is the PostgreSQL adapter of the store seam, over the
// sqlc-generated queries in dbgen/pgdb and pgx v5 through its database/sql
// driver (pgx/v5/stdlib), so that store.Tx.SQL and Store.WriteInTx hand
// users the same *sql.Tx as on SQLite.
//
// Every write is one READ COMMITTED transaction of its own (see Write;
// a claim and a start the engine does not claim at once are one statement
// each, see alone).
// SQLite gives the engine most of its guarantees through its single
// writer; here each one has its own row lock, constraint or advisory lock,
// written next to the query that takes it (db/queries/postgres) and listed
// in the store package doc:
//
//   - claims lock their candidates FOR UPDATE SKIP LOCKED (RunClaim);
//   - a lease check locks the run's row until the commit (RunLeaseCheck,
//     FOR NO KEY UPDATE), and every fenced write is a compare-and-set on
//     (lease_owner, fence);
//   - unique keys rest on the unique index runs_unique, the primary key of
//     unique_holds, and a transaction-scoped advisory lock per key
//     (UniqueKeyLock) around the test of current holds;
//   - a debounce key has one pending run: a transaction-scoped advisory
//     lock per key (DebounceLock) before its row of debounces is read;
//   - a cron slot is started by the one transaction whose ScheduleAdvance,
//     a single guarded UPDATE, changed the schedule's row;
//   - cleaners pick the finished runs they delete FOR UPDATE SKIP LOCKED
//     (RunDeleteFinished), so that several delete separate batches.
//
// flowlite's tables live in their own schema (Options.Schema, default
// "flowlite"), named in every statement rather than found through
// search_path: sqlc checks the qualified names, the transaction a RunTx
// step gets keeps the application's own search_path, and an application
// table called runs or events is never mistaken for flowlite's. A store in
// another schema rewrites the qualifier in the migrations and queries.
//
// It implements store.Notifier with LISTEN/NOTIFY (notify.go): the writes
// that make work appear send pg_notify on the channel <schema>_wake in
// their own transaction, and Listen waits on a connection of its own,
// outside the pool.
//
// The optional interfaces of SQLite files (store.FileMaintainer: WAL
// checkpoints, VACUUM INTO backups, integrity checks) are not implemented:
// PostgreSQL checkpoints and backs up outside the application, and the
// engine falls back to flowtype.ErrNotSupported.
//
// It imports internal/store, flow/flowtype, internal/migrate,
// internal/broadcast (the change feed's wakes), db/migrations, dbgen/pgdb,
// goose, pgx and golang.org/x/sys/unix (TCP_USER_TIMEOUT on Linux, in
// network_linux.go); no other package of the project may import pgx
// (internal/archtest).
package pgstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/broadcast"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/flowlite/flowlite/db/migrations"
	"github.com/flowlite/flowlite/dbgen/pgdb"
	"github.com/flowlite/flowlite/internal/store"
)

// DefaultSchema is the schema flowlite's tables live in unless
// Options.Schema names another.
const DefaultSchema = migrations.PostgresSchema

// Options tune how a store is opened. The zero value is the default.
type Options struct {
	// Schema is the PostgreSQL schema holding flowlite's tables and goose's
	// version table; default DefaultSchema. It must be a lowercase SQL
	// identifier (at most 63 letters, digits and underscores, not starting
	// with a digit or pg_), which is used unquoted. Open creates it when it
	// is missing.
	Schema string
	// MaxConns caps the connections of the pool Open creates: every
	// concurrent Write holds one for its transaction. Default 10. OpenDB
	// uses the caller's pool as it is.
	MaxConns int
	// NoWakes stops the store's writes from sending wakes (pg_notify) and
	// its Listen from listening, leaving engines to find other processes'
	// work by polling. Wakes cost the database a small transaction per
	// batch of committed writes (notify.go), and a write in the caller's
	// transaction one more statement and a commit that waits for the
	// server's notification lock: a store whose writers start many runs at
	// once, with engines that poll often anyway, may be faster without.
	// Every process on one schema should agree, or some engines will not
	// be woken.
	NoWakes bool
	// ApplicationName is the application_name of the connections Open
	// makes (its pool's and the wake listener's), which pg_stat_activity
	// shows: an operator tells flowlite's sessions from the application's
	// by it, to watch them or to end them with pg_terminate_backend.
	// Default: the DSN's application_name (or PGAPPNAME's), else
	// DefaultApplicationName. OpenDB leaves the caller's pool as it is.
	ApplicationName string
	// NetworkTimeout is how long the store waits on a network that went
	// silent before giving up (network.go). Open's connections drop one
	// whose sent data goes unacknowledged that long and probe idle ones
	// with TCP keepalive, and the server ends a session idle in a
	// transaction that long, releasing the row locks of a client that
	// vanished; the DSN's connect_timeout, tcp_user_timeout and
	// idle_in_transaction_session_timeout override these. OpenDB uses the
	// caller's pool as it is. With either, a Write waits at most that long
	// for a connection. Default DefaultNetworkTimeout.
	NetworkTimeout time.Duration
	// Pooler says what stands between the DSN and the server (pooler.go):
	// NoPooler (the default), SessionPooler or TransactionPooler. Behind
	// a transaction pooler, Open's pool runs every statement unnamed and
	// sets nothing on its sessions; OpenDB's pool must then be set up so
	// by the caller (pgx's QueryExecModeExec or simple protocol).
	Pooler Pooler
	// ServerChangeHold is how long, after the store first sees another
	// server answer (a promoted standby, a restart), it neither claims nor
	// rescues the runs created before (server.go): the engines' lease, so
	// that an execution of such a run on the old server has heard that its
	// lease is gone, or gone as long without renewing it as an engine whose
	// runs the others may rescue. Default DefaultServerChangeHold.
	ServerChangeHold time.Duration
	// DirectDSN, when set, reaches the server itself, not through the
	// pooler: the wake listeners (LISTEN) and the migrations (a session
	// advisory lock) use it. Behind a transaction pooler without it,
	// other processes' work is found by polling, and a schema that needs
	// migrating is refused with ErrMigrateThroughPooler.
	DirectDSN string
	// HistoryPartitions, when positive, keeps the history of runs (the
	// events table) in partitions of that span of time, at least a
	// second, so that retention drops a partition whole, with the runs
	// whose history it holds, instead of deleting their events row by row
	// (partitions.go; docs/postgresql-production.md). The first Open with
	// it turns the schema's events table into a partitioned one, keeping
	// every row, under a lock that stops every writer of the schema
	// meanwhile; later Opens with another span change the span of the
	// partitions made from then on. A schema keeps its partitions when
	// opened without the option (0); migrating down past migration 14
	// joins them again. Negative is refused.
	HistoryPartitions time.Duration
}

// DefaultServerChangeHold is the default of Options.ServerChangeHold: the
// engine's default lease.
const DefaultServerChangeHold = 30 * time.Second

// DefaultApplicationName is the application_name of the sessions Open
// makes when neither Options.ApplicationName nor the DSN names one.
const DefaultApplicationName = "flowlite"

// Store is a store.Store over one PostgreSQL schema.
type Store struct {
	db     *sql.DB
	ownsDB bool // whether Close closes db
	schema string
	names  *qualifier
	closed atomic.Bool

	channel    string          // of wakes (notify.go)
	noWakes    bool            // Options.NoWakes
	sender     wakeSender      // of the wakes of committed Writes
	closedCtx  context.Context // ends when Close is called, and with it Listen
	closing    context.CancelFunc
	listenIdle time.Duration   // quiet time after which the listener pings
	connWait   time.Duration   // how long a Write waits for a connection (Options.NetworkTimeout)
	claimGrace time.Duration   // how long a claim goes on after its caller's end (claim.go)
	explicitTx bool            // the pool's sessions default to a stronger isolation than READ COMMITTED (alone, claim.go)
	connConfig *pgx.ConnConfig // of Open's pool, for the listener; nil after OpenDB
	// pooler is what stands between the pool and the server, and
	// directConfig reaches the server itself (Options.DirectDSN; nil:
	// none), for LISTEN and migrations (pooler.go).
	pooler       Pooler
	directConfig *pgx.ConnConfig
	// readOnly, when set, says why the store only reads: it is on a
	// standby (replica.go).
	readOnly string

	// feed is how far the change feed is final, and committed wakes its
	// readers in this process after every Write (feed.go).
	feed        feedHorizon
	committed   broadcast.Broadcast
	feedChannel string         // of feed wakes (notify.go)
	feedListen  sync.Once      // starts the feed's listener (feed.go)
	feedDone    sync.WaitGroup // of the feed's listener, for Close

	// server is the server claims and rescues were last made on, and the
	// hold after a change of it (server.go).
	server serverWatch
}

var _ store.Store = (*Store)(nil)

// Open connects to the PostgreSQL database dsn names (a URL or key=value
// string, as pgx parses it), creates the schema when it is missing,
// migrates it, and returns a store over a pool of at most opts.MaxConns
// connections. A schema migrated by a newer flowlite is refused with
// store.ErrSchemaTooNew and left untouched. Its errors never repeat a
// password: a DSN that cannot be parsed is quoted only when it holds none
// (parseError).
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", parseError(dsn, err))
	}
	where := fmt.Sprintf("postgres %s@%s/%s", cfg.User, hostList(cfg), cfg.Database)
	if opts.MaxConns <= 0 {
		opts.MaxConns = 10
	}
	setApplicationName(cfg, opts.ApplicationName)
	idleInTx, err := networkSettings(cfg, opts.NetworkTimeout)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	var connOpts []stdlib.OptionOpenDB
	if after := configureForPooler(cfg, opts.Pooler, idleInTx.Milliseconds()); after != nil {
		connOpts = append(connOpts, stdlib.OptionAfterConnect(after))
	}
	db := stdlib.OpenDB(*cfg, connOpts...)
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	s, err := newStore(ctx, db, true, opts)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", where, err)
	}
	s.connConfig = cfg
	return s, nil
}

// hostList names the servers cfg tries, in order, as a multi-host DSN
// lists them ("db1:5432,db2:5432"): an error of a DSN naming a primary
// and its standbys names them all, not only the first. pgx adds a
// fallback of the same host and port without TLS under sslmode=prefer,
// which is not another server.
func hostList(cfg *pgx.ConnConfig) string {
	hosts := []string{fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)}
	for _, f := range cfg.Fallbacks {
		if h := fmt.Sprintf("%s:%d", f.Host, f.Port); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return strings.Join(hosts, ",")
}

// setApplicationName sets the application_name of cfg's sessions: name,
// else the DSN's, else DefaultApplicationName.
func setApplicationName(cfg *pgx.ConnConfig, name string) {
	switch {
	case name != "":
		cfg.RuntimeParams["application_name"] = name
	case cfg.RuntimeParams["application_name"] == "":
		cfg.RuntimeParams["application_name"] = DefaultApplicationName
	}
}

// parseError is the error of a DSN pgx cannot parse. pgx's message quotes
// the DSN with the passwords it recognises masked, but only as well as it
// can tell a malformed DSN's parts apart: it shows all or part of a
// password with an unescaped '@' or '&' in a URL, or after "password ="
// or an escaped space in a key=value string. So the error of a DSN that
// may hold a password (mayHoldPassword) gives pgx's reason ("invalid
// port", "failed to configure TLS (sslmode is invalid)") without the DSN;
// when the DSN does not split into its parts at all, without the token
// pgx quotes from it too, which may be part of the password. The error of
// a DSN that holds none is pgx's, which shows the part that is wrong.
func parseError(dsn string, err error) error {
	if !mayHoldPassword(dsn) {
		return err
	}
	// A statement of what the message leaves out, not an instruction.
	const unquoted = "DSN not shown: it holds a password"
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return errors.New("cannot parse DSN (" + unquoted + ")")
	}
	// pce.Error() is "cannot parse `<DSN>`: <reason>", or with an
	// underlying error "… <reason> (<error>)"; the reason is pgx's own text.
	msg := pce.Error()
	inner := pce.Unwrap()
	if inner != nil {
		msg = strings.TrimSuffix(msg, " ("+inner.Error()+")")
	}
	i := strings.LastIndex(msg, "`: ")
	if i < 0 {
		return errors.New("cannot parse DSN (" + unquoted + ")")
	}
	reason := msg[i+len("`: "):]
	// "failed to parse as URL" and "… as keyword/value": the DSN did not
	// split into settings, and inner quotes the piece it choked on.
	if inner != nil && !strings.HasPrefix(reason, "failed to parse as ") {
		reason += " (" + inner.Error() + ")"
	}
	return fmt.Errorf("cannot parse DSN: %s (%s)", reason, unquoted)
}

// mayHoldPassword reports whether dsn may hold a password, erring towards
// yes: it names a password or sslpassword setting (in any case, also
// percent-encoded), or something before its last '@' (past a URL's
// scheme) has a ':', as a URL's user:password does.
func mayHoldPassword(dsn string) bool {
	if strings.Contains(strings.ToLower(percentDecode(dsn)), "password") {
		return true
	}
	rest := dsn
	if _, after, ok := strings.Cut(rest, "://"); ok {
		rest = after
	}
	at := strings.LastIndex(rest, "@")
	return at >= 0 && strings.Contains(rest[:at], ":")
}

// percentDecode decodes the valid %XX escapes of s and leaves the rest.
func percentDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// OpenDB wraps a *sql.DB the caller opened on a PostgreSQL database (with
// pgx's stdlib driver, or any driver that returns *pgconn.PgError for the
// error mapping to apply), creates and migrates the schema, and returns a
// store over it. The pool is used as it is, and Close does not close it.
// Of opts, Schema, NoWakes and NetworkTimeout (the wait of a write for a
// connection) apply.
func OpenDB(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	s, err := newStore(ctx, db, false, opts)
	if err != nil {
		return nil, fmt.Errorf("open postgres database: %w", err)
	}
	return s, nil
}

func newStore(ctx context.Context, db *sql.DB, owns bool, opts Options) (*Store, error) {
	schema := opts.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validSchema(schema); err != nil {
		return nil, err
	}
	// Each statement of the open is sent again when its connection turns
	// out dead (retryDeadSession): the pool of a process that starts while
	// the server restarts, or OpenDB's pool after the server ended its
	// sessions, may hold nothing but dead connections for a moment.
	if err := retryDeadSession(ctx, db, "connect", func() error { return db.PingContext(ctx) }); err != nil {
		return nil, poolerHint(err, opts.Pooler)
	}
	var isolation string
	if err := retryDeadSession(ctx, db, "read default_transaction_isolation", func() (err error) {
		isolation, err = pgdb.New(db).SessionIsolation(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	names := newQualifier(schema)
	var replica pgdb.ReplicaStatusRow
	if err := retryDeadSession(ctx, db, "read whether the server is a standby", func() (err error) {
		replica, err = pgdb.New(db).ReplicaStatus(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	direct, err := directConfig(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case replica.InRecovery:
		err = checkReplicaSchema(ctx, db, schema, names)
	case direct != nil || opts.Pooler == TransactionPooler:
		err = migrateBehindPooler(ctx, db, direct, schema, names)
	default:
		err = migrateSchema(ctx, db, schema, names)
	}
	if err != nil {
		return nil, err
	}
	readOnly := ""
	if replica.InRecovery {
		readOnly = "schema " + schema + " of a standby server (in recovery)"
	}
	closedCtx, closing := context.WithCancel(context.Background())
	s := &Store{
		db: db, ownsDB: owns, schema: schema, names: names,
		channel: wakeChannel(schema), feedChannel: feedChannel(schema), noWakes: opts.NoWakes, listenIdle: listenIdle,
		connWait: cmp.Or(max(opts.NetworkTimeout, 0), DefaultNetworkTimeout), claimGrace: claimGrace,
		explicitTx: isolation != "read committed",
		pooler:     opts.Pooler, directConfig: direct, readOnly: readOnly,
		closedCtx: closedCtx, closing: closing,
		server: serverWatch{hold: cmp.Or(max(opts.ServerChangeHold, 0), DefaultServerChangeHold)},
	}
	if err := s.partitionHistory(ctx, opts.HistoryPartitions); err != nil {
		closing()
		return nil, err
	}
	return s, nil
}

// Schema returns the schema the store's tables live in.
func (s *Store) Schema() string { return s.schema }

// Close fails later writes and reads with flowtype.ErrClosed, ends Listen,
// and closes the pool if Open created it. database/sql lets the statements
// in flight finish.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.closing() // ends the listeners, whose connections are not the pool's
	s.feedDone.Wait()
	if !s.ownsDB {
		return nil
	}
	return s.db.Close()
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// validSchema accepts the schema names that need no quoting: the name goes
// into statement text (CREATE SCHEMA, the qualifier of every table), where
// a bind parameter cannot stand for an identifier. Its error says what is
// wrong with the name, then the rule.
func validSchema(schema string) error {
	if schemaName.MatchString(schema) && !strings.HasPrefix(schema, "pg_") {
		return nil
	}
	var why string
	if i := strings.IndexFunc(schema, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(schema[i:])
		why = fmt.Sprintf("holds %q", r)
	} else {
		switch {
		case schema == "":
			why = "is empty"
		case schema[0] >= '0' && schema[0] <= '9':
			why = "starts with a digit"
		case strings.HasPrefix(schema, "pg_"):
			why = "starts with pg_, which PostgreSQL keeps for its own schemas"
		default:
			why = fmt.Sprintf("is %d bytes long", len(schema))
		}
	}
	return fmt.Errorf("schema %q %s: want a lowercase identifier of at most 63 letters, digits and underscores, not starting with a digit or pg_", schema, why)
}

// qualifier rewrites the schema named by the migrations and the generated
// queries ("flowlite.runs") into the store's schema. For the default
// schema it changes nothing; otherwise each distinct statement is
// rewritten once and cached, so the cost is one map lookup per statement.
type qualifier struct {
	schema string
	cache  sync.Map // statement text → rewritten text
}

// qualified matches the qualifier of a name in the flowlite schema. The
// name "flowlite" followed by anything but a dot is left alone: in a
// statement it is a word of a comment or a string.
var qualified = regexp.MustCompile(`\b` + DefaultSchema + `\.`)

func newQualifier(schema string) *qualifier { return &qualifier{schema: schema} }

func (q *qualifier) rewrite(query string) string {
	if q.schema == DefaultSchema {
		return query
	}
	if r, ok := q.cache.Load(query); ok {
		return r.(string)
	}
	r := qualified.ReplaceAllLiteralString(query, q.schema+".")
	q.cache.Store(query, r)
	return r
}

// conn binds the generated queries to a pool or transaction, rewriting their
// schema and failing them with flowtype.ErrClosed once the store is closed.
// In a transaction of the store (tx set), it first inserts the events the
// transaction appended when the statement could see them (events.go).
type conn struct {
	db pgdb.DBTX
	s  *Store
	tx *tx
}

func (s *Store) conn(db pgdb.DBTX) conn { return conn{db: db, s: s} }

// closedDB is a pool that was never connected and is closed: a statement on
// it fails with database/sql's "database is closed", which interpretError
// maps onto flowtype.ErrClosed. A closed store sends its statements there,
// also when the caller's pool it was opened on is still open.
var closedDB = func() *sql.DB {
	db := sql.OpenDB(stdlib.GetConnector(pgx.ConnConfig{}))
	db.Close()
	return db
}()

func (c conn) target() pgdb.DBTX {
	if c.s.closed.Load() {
		return closedDB
	}
	return c.db
}

func (c conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := c.before(ctx, query); err != nil {
		return nil, err
	}
	return c.target().ExecContext(ctx, c.s.names.rewrite(query), args...)
}

// before inserts the events the transaction appended, if query could see
// them.
func (c conn) before(ctx context.Context, query string) error {
	if c.tx == nil || len(c.tx.events) == 0 || !seesEvents(query) {
		return nil
	}
	return c.tx.flushEvents(ctx)
}

func (c conn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return c.target().PrepareContext(ctx, c.s.names.rewrite(query))
}

// A read on the pool (Reader) is sent again when the connection it took
// turns out dead (deadconn.go); one in a transaction is not.

func (c conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := c.before(ctx, query); err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		rows, err := c.target().QueryContext(ctx, c.s.names.rewrite(query), args...)
		if pool, ok := c.db.(*sql.DB); !ok || !retryDeadConn(ctx, pool, err, try) {
			return rows, err
		}
	}
}

func (c conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := c.before(ctx, query); err != nil && c.tx.flushErr == nil {
		// A *sql.Row cannot carry it; the statement fails in the aborted
		// transaction, and Write returns this error.
		c.tx.flushErr = err
	}
	for try := 0; ; try++ {
		row := c.target().QueryRowContext(ctx, c.s.names.rewrite(query), args...)
		if pool, ok := c.db.(*sql.DB); !ok || !retryDeadConn(ctx, pool, row.Err(), try) {
			return row
		}
	}
}

// interpretError maps PostgreSQL's errors onto the store's sentinel
// errors. It is the one place where driver errors are translated.
//
// An error of a statement whose context has ended is that context's error
// (with the driver's words beside it): pgx reports a deadline that passes
// while it dials as a dial timeout, which wraps net's i/o timeout and not
// context.DeadlineExceeded, and callers tell "my context ended" from "the
// database failed" with errors.Is (Run.Result polls in slices that way).
func interpretError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w (%v)", ctxErr, err)
	}
	// pgx sets no deadline of its own on a connection (its connect_timeout
	// is a context derived from ctx, whose error it wraps), so a network
	// timeout under a context with a deadline is that deadline. The
	// dialer's timer may fire a little before the context's: then
	// ctx.Err() is still nil when pgx looks, and a moment later here too.
	if _, ok := ctx.Deadline(); ok && pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return flowtype.ErrRunNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "25006": // read_only_sql_transaction: a standby, or default_transaction_read_only
			return fmt.Errorf("%w (%v)", flowtype.ErrReadOnly, err)
		case "53100": // disk_full
			return fmt.Errorf("%w (%v)", flowtype.ErrDiskFull, err)
		case "XX001", "XX002": // data_corrupted, index_corrupted
			return fmt.Errorf("%w: %w (%v)", store.ErrNotDatabase, store.ErrCorrupt, err)
		case "3D000": // invalid_catalog_name: the database does not exist
			return fmt.Errorf("%w (%v)", store.ErrNotDatabase, err)
		}
		if connLost(pgErr) { // the server ended the session, or is starting or stopping
			return fmt.Errorf("%w (%v)", flowtype.ErrUnavailable, err)
		}
		return err
	}
	if unreachable(err) {
		return fmt.Errorf("%w (%v)", flowtype.ErrUnavailable, tellAttemptsOnce(err))
	}
	// database/sql's words for a pool used after Close, which it has no
	// sentinel for.
	if strings.HasSuffix(err.Error(), "sql: database is closed") {
		return fmt.Errorf("%w (%v)", flowtype.ErrClosed, err)
	}
	return err
}
