// Package sqlitestore is the SQLite adapter of the store seam, over the
// sqlc-generated queries in dbgen/sqlitedb and modernc.org/sqlite (no cgo).
//
// One writer connection takes every write in a BEGIN IMMEDIATE transaction
// (_txlock=immediate), so a write never fails half-way on a lock upgrade; a
// separate pool of read-only connections serves reads. Every pragma is set in
// the DSN, so it reaches every pooled connection, and verified after open.
//
// It owns everything SQLite in flowlite: the DSN and pragmas, the
// migrations' dialect and the schema of old files (schema.go), the WAL
// watch (walwatch.go, a store.Maintainer), the file operations
// (health.go, a store.FileMaintainer) and the meaning of SQLite's result
// codes (interpretError). Nothing above the store seam speaks SQLite.
//
// It also makes room for Litestream's replication of the file, run in this
// process by Options.Replicate, and leaves checkpoints to Litestream then,
// or when Litestream replicates the file from a process of its own
// (replicate.go). It does not link Litestream.
//
// It imports internal/store, flow/flowtype, internal/migrate,
// internal/broadcast (the change feed's wakes), db/migrations,
// dbgen/sqlitedb, modernc.org/sqlite and goose (for its dialect's name).
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/flowlite/flowlite/dbgen/sqlitedb"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/broadcast"
	"github.com/flowlite/flowlite/internal/migrate"
	"github.com/flowlite/flowlite/internal/store"
)

// Synchronous is the SQLite synchronous setting for WAL mode.
type Synchronous string

const (
	// SynchronousFull syncs the WAL on every commit: a commit survives power
	// loss. It is the default.
	SynchronousFull Synchronous = "FULL"
	// SynchronousNormal syncs at checkpoints only: commits survive a crash of
	// the process, but the last ones may be lost on power loss.
	SynchronousNormal Synchronous = "NORMAL"
)

// BusyTimeoutMillis is the default of how long a connection waits for a
// lock held by another connection before it reports SQLITE_BUSY (ErrBusy).
const BusyTimeoutMillis = 5000

// DefaultBusyTimeout is BusyTimeoutMillis as a duration.
const DefaultBusyTimeout = BusyTimeoutMillis * time.Millisecond

// Options tune how a database file is opened. The zero value is the default.
type Options struct {
	Synchronous Synchronous // default SynchronousFull
	ReadConns   int         // size of the read pool; default 4
	// MaxBatch caps how many callers' write transactions commit together;
	// default 64, and 1 turns group commit off.
	MaxBatch int
	// SkipQuickCheck leaves out the PRAGMA quick_check that Open and OpenDB
	// run before they write anything (see quickCheck for its cost).
	SkipQuickCheck bool
	// BusyTimeout is how long a write waits for the lock another process
	// holds before it fails with flowtype.ErrBusy; default
	// DefaultBusyTimeout. It is set in the DSN (busy_timeout), in whole
	// milliseconds.
	BusyTimeout time.Duration
	// CheckpointInterval is how often the WAL watch (walwatch.go)
	// checkpoints routinely; it looks at the WAL's size more often.
	// Default DefaultCheckpointInterval; negative: no WAL watch.
	CheckpointInterval time.Duration
	// WALLimit is the size in bytes the WAL file should stay under.
	// Default DefaultWALLimit.
	WALLimit int64
	// Checkpoints says who checkpoints the WAL (replicate.go); default
	// CheckpointsAuto.
	Checkpoints CheckpointOwner
	// Replicate, when set, starts the replication of the store's file as
	// it opens (after its migrations), running until Close (replicate.go):
	// the store then leaves checkpoints to the replicator.
	Replicate func(ctx context.Context, f ReplicaFile) (Replica, error)
}

// Store is a store.Store over one SQLite database.
type Store struct {
	writer   *sql.DB // the only handle that writes
	reader   *sql.DB // read-only pool; the same handle as writer for OpenDB
	ownsDBs  bool    // whether Close closes the handles
	maxBatch int

	// path and busyTimeout name the file and the wait in ErrBusy errors.
	path        string
	busyTimeout time.Duration

	setLocks setLocks // the shard set's locks, on shard 0 (setlock_*.go)

	// Statements are prepared once: parsing SQL would otherwise cost more
	// CPU than executing it. Transactions bind writeQ with WithTx, which
	// reuses the statements already prepared on the writer connection.
	writeQ *sqlitedb.Queries
	readQ  *sqlitedb.Queries

	// readOnly is the file of a store opened with OpenReadOnly, whose
	// writes fail with ErrReadOnly naming it; empty otherwise.
	readOnly string

	// The WAL watch's settings (Options) and what it and operators'
	// checkpoints did (walwatch.go).
	checkpointInterval time.Duration
	walLimit           int64
	wal                walState
	// walGrew wakes the WAL watch at once when a commit of the writer
	// left the WAL past half of walLimit (noteWALSize), rather than at its
	// next look, which a starved goroutine takes late.
	walGrew chan struct{}

	// checkpoints and repl say who checkpoints the file (replicate.go):
	// repl is the Litestream replication this store runs, or nil.
	checkpoints CheckpointOwner
	repl        *replication

	// committed wakes the change feed's readers in this process after
	// every commit of the writer (feed.go).
	committed broadcast.Broadcast

	// shm is the store's one descriptor of the -shm file, for WALInUse
	// (walindex.go).
	shm struct {
		once sync.Once
		f    *os.File
	}

	requests   chan *writeRequest
	holds      chan *writeHold // HoldWrites (writer.go)
	closing    chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
}

// newStore prepares the queries of a migrated database and starts the
// writer. Of opts, it reads MaxBatch and the WAL watch's settings.
func newStore(ctx context.Context, writer, reader *sql.DB, owns bool, opts Options, path string, busyTimeout time.Duration) (*Store, error) {
	maxBatch := opts.MaxBatch
	if maxBatch <= 0 {
		maxBatch = 64
	}
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.WALLimit <= 0 {
		opts.WALLimit = DefaultWALLimit
	}
	writeQ, err := sqlitedb.Prepare(ctx, writer)
	if err != nil {
		return nil, fmt.Errorf("prepare queries: %w", interpretError(err))
	}
	readQ, err := sqlitedb.Prepare(ctx, reader)
	if err != nil {
		writeQ.Close()
		return nil, fmt.Errorf("prepare queries: %w", interpretError(err))
	}
	s := &Store{
		writer: writer, reader: reader, ownsDBs: owns, maxBatch: maxBatch, writeQ: writeQ, readQ: readQ,
		path: path, busyTimeout: busyTimeout,
		checkpointInterval: opts.CheckpointInterval, walLimit: opts.WALLimit, checkpoints: opts.Checkpoints,
		requests: make(chan *writeRequest), holds: make(chan *writeHold), closing: make(chan struct{}), writerDone: make(chan struct{}),
		walGrew: make(chan struct{}, 1),
	}
	go s.runWriter()
	return s, nil
}

var _ store.Store = (*Store)(nil)

// DSN returns the modernc.org/sqlite data source name flowlite opens path
// with, with the default busy timeout. Users who open their own *sql.DB for
// OpenDB should use it, or DSNBusy for another busy timeout.
func DSN(path string, sync Synchronous) string {
	return DSNBusy(path, sync, DefaultBusyTimeout)
}

// DSNBusy is DSN with busy_timeout set to busy (rounded up to a whole
// millisecond; zero or less means DefaultBusyTimeout).
func DSNBusy(path string, sync Synchronous, busy time.Duration) string {
	if sync == "" {
		sync = SynchronousFull
	}
	q := url.Values{}
	// busy_timeout first: setting journal_mode may itself wait for a lock.
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyMillis(busy)))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+string(sync)+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_size_limit(67108864)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating it when missing) the database file at path, verifies
// its settings, checks that its pages are sound (quickCheck) and migrates
// its schema. A file that is not a SQLite database, is corrupt, is
// read-only, or holds a newer schema is refused with an error naming the
// problem, and left untouched.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Synchronous == "" {
		opts.Synchronous = SynchronousFull
	}
	if opts.Synchronous != SynchronousFull && opts.Synchronous != SynchronousNormal {
		return nil, fmt.Errorf("open %s: synchronous must be FULL or NORMAL, not %q", path, opts.Synchronous)
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if opts.BusyTimeout < 0 {
		return nil, fmt.Errorf("open %s: busy timeout must not be negative, got %s", path, opts.BusyTimeout)
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	if err := preflight(path); err != nil {
		return nil, err
	}
	dsn := DSNBusy(path, opts.Synchronous, opts.BusyTimeout)
	if opts.Replicate != nil {
		// Litestream checkpoints alone (replicate.go).
		dsn += "&_pragma=wal_autocheckpoint(0)"
	}
	writer, err := openWriterDB(dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	if err := verify(ctx, writer, opts.Synchronous); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !opts.SkipQuickCheck {
		if err := quickCheck(ctx, writer); err != nil {
			writer.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
	}
	if err := migrateShared(ctx, writer); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open %s: %w", path, interpretError(err))
	}
	reader, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	reader.SetMaxOpenConns(opts.ReadConns)
	reader.SetMaxIdleConns(opts.ReadConns)
	busy := time.Duration(busyMillis(opts.BusyTimeout)) * time.Millisecond
	s, err := newStore(ctx, writer, reader, true, opts, path, busy)
	if err != nil {
		reader.Close()
		writer.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := s.startReplication(ctx, opts); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

// OpenDB wraps a *sql.DB the caller opened (with DSN, or equivalent
// settings) and migrates its schema. The pool is used as it is: it is never
// reconfigured, and Close does not close it. Writes are still serialized
// through one writer inside this process. Of opts, Synchronous, ReadConns
// and BusyTimeout do not apply: they are the pool's.
func OpenDB(ctx context.Context, db *sql.DB, opts Options) (*Store, error) {
	if err := verify(ctx, db, ""); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if !opts.SkipQuickCheck {
		if err := quickCheck(ctx, db); err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
	}
	path, busy, err := fileAndBusyTimeout(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := migrateShared(ctx, db); err != nil {
		return nil, fmt.Errorf("open database: %w", interpretError(err))
	}
	s, err := newStore(ctx, db, db, false, opts, path, busy)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := s.startReplication(ctx, opts); err != nil {
		s.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	return s, nil
}

// preflight refuses paths whose problem SQLite would report late or
// confusingly ("unable to open database file"): a directory, a file that
// cannot be written, or a directory in which the file, or the -wal and -shm
// files WAL mode keeps beside it, cannot be created.
func preflight(path string) error {
	dir := filepath.Dir(path)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if !dirWritable(dir) {
			return fmt.Errorf("open %s: %w: cannot create the database: directory %s is not writable", path, flowtype.ErrReadOnly, dir)
		}
		return nil
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	case info.IsDir():
		return fmt.Errorf("open %s: %w: it is a directory", path, store.ErrNotDatabase)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return fmt.Errorf("open %s: %w: %v (flowsqlite.OpenReadOnly reads it)", path, flowtype.ErrReadOnly, err)
		}
		return fmt.Errorf("open %s: %w", path, err)
	}
	// Closing here is safe: SQLite has not opened the file yet, so no POSIX
	// lock of this process can be dropped.
	if err := f.Close(); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if !dirWritable(dir) {
		return fmt.Errorf("open %s: %w: directory %s is not writable, and a WAL database needs its -wal and -shm files beside it (flowsqlite.OpenReadOnly reads it)", path, flowtype.ErrReadOnly, dir)
	}
	return nil
}

// OpenReadOnly opens the existing database at path for reading only: it
// never creates, migrates or writes the file, every write fails with
// ErrReadOnly naming the file, and it leaves no -wal or -shm file behind
// that was not there before. The schema must be this binary's version.
//
// How it opens depends on what the process may do (see readOnlyDSN): a file
// it could write is read through ordinary connections in query_only mode,
// which take part in SQLite's usual WAL life cycle (the last connection to
// close removes -wal and -shm); a read-only file or directory is opened
// with mode=ro, which reads a WAL that exists through its -shm, or, when
// there is no WAL, with immutable=1, which creates nothing.
func OpenReadOnly(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	dsn, err := readOnlyDSN(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(opts.ReadConns)
	db.SetMaxIdleConns(opts.ReadConns)
	if err := checkSchemaReadOnly(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s read-only: %w", path, readOnlyOpenError(path, err))
	}
	opts.MaxBatch = 1
	s, err := newStore(ctx, db, db, true, opts, path, time.Duration(busyMillis(opts.BusyTimeout))*time.Millisecond)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s read-only: %w", path, readOnlyOpenError(path, err))
	}
	s.readOnly = path
	return s, nil
}

// readOnlyDSN returns the DSN OpenReadOnly opens path with.
//
// SQLite reads a WAL database through its -shm index, which it creates
// beside the file when missing (sqlite.org/wal.html#readonly). A connection
// opened with mode=ro creates -wal and -shm too, but never removes them,
// because only a connection that may checkpoint deletes them on close: so
// mode=ro is used only where the process cannot write, and then only when
// the WAL already exists (an engine has the file open, or crashed); with no
// WAL, everything committed is in the main file, and immutable=1 reads it
// without locks and without creating anything. That is sound because a
// process that may not write the file or its directory cannot start a WAL
// writer there either; a privileged process that writes meanwhile is not
// seen until the store is opened again.
func readOnlyDSN(path string) (string, error) { return readOnlyDSNBusy(path, 0) }

// readOnlyDSNBusy is readOnlyDSN with busy as the busy timeout (zero or
// less: the default).
func readOnlyDSNBusy(path string, busy time.Duration) (string, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("open %s read-only: %w", path, err)
	case err != nil:
		return "", fmt.Errorf("open %s read-only: %w", path, err)
	case info.IsDir():
		return "", fmt.Errorf("open %s read-only: %w: it is a directory", path, store.ErrNotDatabase)
	case info.Size() == 0:
		return "", fmt.Errorf("open %s read-only: %w: the file is empty", path, store.ErrNotDatabase)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyMillis(busy)))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "query_only(1)")
	switch {
	case fileWritable(path) && dirWritable(filepath.Dir(path)):
	case exists(path + "-wal"):
		q.Set("mode", "ro")
	default:
		q.Set("mode", "ro")
		q.Set("immutable", "1")
	}
	return "file:" + path + "?" + q.Encode(), nil
}

// fileWritable reports whether this process may open path for writing.
func fileWritable(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	// Safe: SQLite has not opened the file in this call yet, and the
	// store's own connections are not open either.
	f.Close()
	return true
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// readOnlyOpenError explains SQLite's refusal to read path: a -wal without
// its -shm in a directory that cannot be written is the one case SQLite
// cannot read read-only.
func readOnlyOpenError(path string, err error) error {
	err = interpretError(err)
	if errors.Is(err, flowtype.ErrReadOnly) && exists(path+"-wal") && !exists(path+"-shm") {
		return fmt.Errorf("%w: %s exists without %s-shm, which cannot be created in directory %s; make the directory writable, or checkpoint the database where it is", err, path+"-wal", path, filepath.Dir(path))
	}
	return err
}

// errReadOnly is the error of a write to a store opened with OpenReadOnly.
func (s *Store) errReadOnly() error {
	return fmt.Errorf("write %s: %w: it was opened read-only", s.readOnly, flowtype.ErrReadOnly)
}

// Close stops the writer, failing later writes with flowtype.ErrClosed, and
// closes the database handles the store opened.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.repl != nil {
			// Before the writer goes: its last commits are uploaded.
			err = s.repl.close()
		}
		close(s.closing)
		<-s.writerDone
		s.closeSetLocks()
		err = errors.Join(err, s.writeQ.Close(), s.readQ.Close())
		if s.ownsDBs {
			err = errors.Join(err, s.reader.Close(), s.writer.Close())
			// After the connections: closing it drops their locks (walindex.go).
			s.shm.once.Do(func() {})
			if s.shm.f != nil {
				s.shm.f.Close()
			}
		}
	})
	return err
}

// interpretError maps SQLite result codes to the store's sentinel errors. It
// is the one place where driver errors are translated.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return flowtype.ErrRunNotFound
	}
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		switch serr.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return fmt.Errorf("%w (%v)", store.ErrNotDatabase, err)
		case sqlite3.SQLITE_READONLY:
			return fmt.Errorf("%w (%v)", flowtype.ErrReadOnly, err)
		case sqlite3.SQLITE_FULL:
			return fmt.Errorf("%w (%v)", flowtype.ErrDiskFull, err)
		case sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("%w: %w (%v)", store.ErrNotDatabase, store.ErrCorrupt, err)
		case sqlite3.SQLITE_BUSY:
			return fmt.Errorf("%w (%v)", flowtype.ErrBusy, err)
		}
	}
	msg := err.Error()
	if strings.Contains(msg, "file is not a database") {
		return fmt.Errorf("%w (%v)", store.ErrNotDatabase, err)
	}
	// database/sql's words for a statement or pool used after Close, which
	// it has no sentinel for.
	if strings.HasSuffix(msg, "sql: statement is closed") || strings.HasSuffix(msg, "sql: database is closed") {
		return fmt.Errorf("%w (%v)", flowtype.ErrClosed, err)
	}
	return err
}

// checkSchemaReadOnly refuses a database a read-only store cannot serve: no
// flowlite schema, an older one (it cannot be migrated without writing) or
// a newer one.
func checkSchemaReadOnly(ctx context.Context, db *sql.DB) error {
	st, err := migrate.StatusOf(ctx, db, Dialect())
	switch {
	case err != nil:
		return err
	case st.Current > st.Latest:
		return fmt.Errorf("%w: database is at version %d, this binary knows up to %d; upgrade flowlite",
			store.ErrSchemaTooNew, st.Current, st.Latest)
	case st.Current < st.Latest:
		return fmt.Errorf("database schema is at version %d, this flowlite needs %d, and a database opened read-only cannot be migrated", st.Current, st.Latest)
	}
	return nil
}

// busyMillis is d in whole milliseconds for busy_timeout, rounded up so
// that a positive timeout never becomes 0 (no wait at all).
func busyMillis(d time.Duration) int64 {
	if d <= 0 {
		return BusyTimeoutMillis
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// BusyTimeout returns how long a write of this store waits for a lock
// another connection holds.
func (s *Store) BusyTimeout() time.Duration { return s.busyTimeout }

// busyError explains an ErrBusy of a write: which file, and how long the
// write waited. Other errors pass unchanged.
func (s *Store) busyError(err error, waited time.Duration) error {
	if !errors.Is(err, flowtype.ErrBusy) {
		return err
	}
	return fmt.Errorf("%w: %s: another connection held the write lock past the busy timeout of %s (waited %s)",
		flowtype.ErrBusy, s.path, s.busyTimeout, waited.Round(time.Millisecond))
}

// migrateShared migrates db's schema, tolerating other processes that
// migrate the same fresh file at the same moment: both read version 0, one
// applies a migration first, and the other's copy of it fails (e.g. "table
// runs already exists") and rolls back. Each migration is its own
// transaction, so a retry reads the new version and applies only what is
// still missing; a failure that persists is reported.
func migrateShared(ctx context.Context, db *sql.DB) error {
	var err error
	for attempt := range 5 {
		if _, err = migrate.Up(ctx, db, Dialect()); err == nil || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(time.Duration(20<<attempt) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}
