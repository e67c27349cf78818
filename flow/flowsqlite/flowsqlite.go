package flowsqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
)

// Synchronous is the SQLite durability setting (PRAGMA synchronous) of the
// connections Open makes, or DSN describes: how much of a commit survives
// a crash. The database runs in WAL mode, where only FULL and NORMAL make
// sense, so those are the two values; the empty value means
// SynchronousFull.
type Synchronous string

// Durability settings.
const (
	// SynchronousFull syncs the WAL on every commit, so that every commit
	// survives power loss. It is the default: a workflow engine that loses
	// a checkpoint repeats a step's side effect.
	SynchronousFull Synchronous = "FULL"
	// SynchronousNormal syncs at checkpoints only: commits survive a crash
	// of the process but possibly not a power loss, for several times the
	// write throughput.
	SynchronousNormal Synchronous = "NORMAL"
)

// Options configures the SQLite side of an engine. A nil *Options, and
// every zero field, means the default.
type Options struct {
	// Synchronous applies to Open only. Default SynchronousFull.
	Synchronous Synchronous
	// SkipQuickCheck leaves out the check Open and New make before they
	// write to a database: SQLite's PRAGMA quick_check, which reads every
	// page of the file (about 0.3 s for a 63 MiB file of 50,000 finished
	// runs on a 2-core machine, warm cache; linear in the file's size) and
	// refuses a damaged file with flow.ErrCorrupt, so that an engine never
	// writes into a file whose b-trees are broken. Skip it for very large
	// files whose integrity flowlite check (or a backup's) vouches for.
	SkipQuickCheck bool
	// BusyTimeout is how long a write waits for the database lock another
	// process holds (SQLite's busy_timeout) before it fails with
	// flow.ErrBusy. Several processes may share one file: the engine's own
	// writes (starts, claims, heartbeats, checkpoints of steps) wait and
	// retry within this bound, so with each process holding the lock
	// briefly no caller sees ErrBusy. flow.Config.LeaseTimeout must outlast
	// HeartbeatInterval plus BusyTimeout. Default 5s; it is set in the DSN,
	// in whole milliseconds. New takes the busy_timeout of the caller's
	// pool and refuses a different non-zero BusyTimeout.
	BusyTimeout time.Duration
	// CheckpointInterval is how often a started engine checkpoints the WAL
	// routinely (truncated when no run is in flight). Its size is checked
	// several times a second regardless. Default 1s; negative: no automatic
	// checkpoints beyond SQLite's own. With Replication, it is how often
	// the replicator checkpoints a WAL in use, at the engine's pace (an open
	// engine, started or not); negative leaves the pace to the replicator
	// (Litestream's own thresholds, which a busy writer defeats: see
	// docs/backups.md).
	CheckpointInterval time.Duration
	// WALLimit is the size in bytes the WAL file should stay under; past
	// half of it a started engine truncates the WAL, briefly holding writes
	// back until readers move on. Default 64 MiB. With Replication, past
	// half of it the replicator checkpoints at once, and it truncates the
	// WAL only when a checkpoint left it past the limit.
	WALLimit int64
	// Replication, when set, replicates the file (every file of a shard
	// set) while the engine is open, and leaves checkpoints to it: e.g.
	// Litestream in this process with flow/flowlitestream's Replication.
	// Default none. See Replicator and docs/backups.md.
	Replication Replicator
	// Checkpoints says who checkpoints the WAL when Litestream runs as its
	// own process beside the engines: set CheckpointsByLitestream there
	// (CheckpointsAuto, the default, also leaves them to Litestream once
	// its directory is beside the file). It does not apply with
	// Replication, which always leaves them to Litestream.
	Checkpoints Checkpoints
}

// storeOptions returns the adapter's options for o (nil: the defaults).
func (o *Options) storeOptions() sqlitestore.Options {
	if o == nil {
		return sqlitestore.Options{}
	}
	return sqlitestore.Options{
		Synchronous: sqlitestore.Synchronous(o.Synchronous), BusyTimeout: o.BusyTimeout,
		SkipQuickCheck: o.SkipQuickCheck, CheckpointInterval: o.CheckpointInterval, WALLimit: o.WALLimit,
		Checkpoints: sqlitestore.CheckpointOwner(o.Checkpoints),
	}
}

// fileOptions returns the adapter's options for the file at path, shard
// of shards files: storeOptions with the file's replication.
func (o *Options) fileOptions(path string, shard, shards int) (sqlitestore.Options, error) {
	so := o.storeOptions()
	if o == nil {
		return so, nil
	}
	switch o.Checkpoints {
	case CheckpointsAuto, CheckpointsByEngine, CheckpointsByLitestream:
	default:
		return so, fmt.Errorf("open %s: Options.Checkpoints is %q: want \"\", %q or %q", path, o.Checkpoints, CheckpointsByEngine, CheckpointsByLitestream)
	}
	if o.Replication != nil && o.Checkpoints == CheckpointsByEngine {
		return so, fmt.Errorf("open %s: Options.Checkpoints is %q, but with Replication Litestream checkpoints alone", path, o.Checkpoints)
	}
	so.Replicate = storeReplicate(o.Replication, shard, shards)
	return so, nil
}

// backend is the flow.Backend of a SQLite database: open opens its store.
type backend struct {
	open     func(ctx context.Context) (*sqlitestore.Store, error)
	readOnly string // the file, for a backend that only reads it
}

func (b *backend) OpenStore(ctx context.Context) (store.Opened, error) {
	s, err := b.open(ctx)
	if err != nil {
		return store.Opened{}, err
	}
	return store.Opened{Store: s, BusyTimeout: s.BusyTimeout(), ReadOnly: b.readOnly}, nil
}

// Open opens an engine on the SQLite file at path (created when missing)
// with WAL, synchronous=FULL unless opts says NORMAL, and the schema
// migrated. Before writing anything it checks the file's pages (see
// Options.SkipQuickCheck). A file that is not a SQLite database, is
// corrupt, is read-only, or was migrated by a newer flowlite is refused
// with flow.ErrNotDatabase, ErrCorrupt, ErrReadOnly or ErrSchemaTooNew
// naming the file, and left untouched.
func Open(ctx context.Context, path string, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	so, err := opts.fileOptions(path, 0, 1)
	if err != nil {
		return nil, err
	}
	return flow.New(ctx, &backend{open: func(ctx context.Context) (*sqlitestore.Store, error) {
		return sqlitestore.Open(ctx, path, so)
	}}, cfg)
}

// OpenReadOnly opens an engine that only reads the existing SQLite file at
// path: Inspect, ListRuns, History, Check, QueueStats and the other reads
// work, while every write (Start, Cancel, Signal, Checkpoint…) and
// Engine.Start fail with flow.ErrReadOnly naming the file. It never
// creates, migrates or changes the file and leaves no -wal or -shm file
// behind, so it reads a file that is read-only, in a read-only directory
// or on a read-only mount, as well as one engines are working. The schema
// must be this flowlite's version: an older one cannot be migrated without
// writing. Of opts, only BusyTimeout applies.
//
// On a file this process could write, the engine reads through ordinary
// SQLite connections that refuse writes (query_only). On a file it cannot
// write, it opens SQLite read-only (mode=ro), reading the WAL through its
// -shm if engines have the file open; if there is no WAL, SQLite's
// immutable mode reads the main file, which then holds every commit, and
// creates nothing beside it (sqlite.org/wal.html#readonly). Writes by
// another process that start after OpenReadOnly may then go unseen until
// the engine is opened again.
func OpenReadOnly(ctx context.Context, path string, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	var so sqlitestore.Options
	if opts != nil {
		so.BusyTimeout = opts.BusyTimeout
	}
	return flow.New(ctx, &backend{readOnly: path, open: func(ctx context.Context) (*sqlitestore.Store, error) {
		return sqlitestore.OpenReadOnly(ctx, path, so)
	}}, cfg)
}

// New returns an engine on a SQLite database the caller opened (see DSN)
// and migrates its schema. The pool is used as it is; Close does not close
// it. Of opts, Synchronous does not apply (it is the pool's), and a
// non-zero BusyTimeout must be the pool's busy_timeout.
func New(ctx context.Context, db *sql.DB, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	so := opts.storeOptions()
	return flow.New(ctx, &backend{open: func(ctx context.Context) (*sqlitestore.Store, error) {
		so, err := withReplica(ctx, db, opts, so, 0, 1)
		if err != nil {
			return nil, err
		}
		s, err := sqlitestore.OpenDB(ctx, db, so)
		if err != nil {
			return nil, err
		}
		if so.BusyTimeout != 0 && so.BusyTimeout != s.BusyTimeout() {
			s.Close()
			return nil, fmt.Errorf("new engine: Options.BusyTimeout is %s but the pool's busy_timeout is %s: open the pool with DSNBusy(path, sync, %s) or leave BusyTimeout zero",
				so.BusyTimeout, s.BusyTimeout(), so.BusyTimeout)
		}
		return s, nil
	}}, cfg)
}

// DSN returns the data source name to open a database for New with
// sql.Open("sqlite", …) (modernc.org/sqlite, which this package imports):
// WAL, busy timeout, foreign keys and BEGIN IMMEDIATE write transactions.
func DSN(path string, sync Synchronous) string {
	return sqlitestore.DSN(path, sqlitestore.Synchronous(sync))
}

// DSNBusy is DSN with a busy timeout other than the default 5s (see
// Options.BusyTimeout); zero or less means the default.
func DSNBusy(path string, sync Synchronous, busy time.Duration) string {
	return sqlitestore.DSNBusy(path, sqlitestore.Synchronous(sync), busy)
}

// CheckpointMode is how hard a checkpoint of the WAL tries (see
// flow.Engine.Checkpoint): one of SQLite's wal_checkpoint modes below. See
// [flowtype.CheckpointMode].
type CheckpointMode = flowtype.CheckpointMode

// Checkpoint modes, SQLite's wal_checkpoint modes.
const (
	// CheckpointPassive copies what it can without waiting.
	CheckpointPassive = flowtype.CheckpointPassive
	// CheckpointFull waits for writers, then copies the whole WAL.
	CheckpointFull = flowtype.CheckpointFull
	// CheckpointRestart is CheckpointFull, then waits for readers so the
	// WAL starts over.
	CheckpointRestart = flowtype.CheckpointRestart
	// CheckpointTruncate is CheckpointRestart, then truncates the WAL file
	// to zero bytes.
	CheckpointTruncate = flowtype.CheckpointTruncate
)

// CheckpointResult is the outcome of a checkpoint. See
// [flowtype.CheckpointResult] for its fields.
type CheckpointResult = flowtype.CheckpointResult

// OpenShards opens a sharded engine on the SQLite files at paths, one
// shard per file, each opened as Open opens one file (with its own
// writer, so N files commit with up to N cores). The order of paths is
// the set's: the first time, the files, created when missing, must hold no
// runs, and each records its place in the set; later, paths that do not
// name that set in that order (a file missing or added, reordered, or of
// another set) are refused with flow.ErrShardSet, and nothing is changed.
// One path is Open. See flow.NewSharded and docs/shards.md.
func OpenShards(ctx context.Context, paths []string, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	if err := distinctFiles(paths); err != nil {
		return nil, err
	}
	backends := make([]flow.Backend, len(paths))
	for i, path := range paths {
		so, err := opts.fileOptions(path, i, len(paths))
		if err != nil {
			return nil, err
		}
		backends[i] = &backend{open: func(ctx context.Context) (*sqlitestore.Store, error) {
			return sqlitestore.Open(ctx, path, so)
		}}
	}
	e, err := flow.NewSharded(ctx, backends, cfg)
	if err != nil && len(paths) > 1 {
		return nil, fmt.Errorf("open shards %v: %w", paths, err)
	}
	return e, err
}

// NewShards is OpenShards on SQLite pools the caller opened (see DSN), one
// per shard file, in the set's order, as New takes one: the pools are used
// as they are, and Close does not close them. It is what StartTx and
// EnqueueTx on a sharded engine need: a transaction of the pool of shard
// i goes with Engine.Shard(i) (see Engine.PlaceRun).
func NewShards(ctx context.Context, dbs []*sql.DB, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	for i, db := range dbs {
		if j := slices.Index(dbs, db); j != i {
			return nil, fmt.Errorf("new shards: %w: pools %d and %d are one pool", flow.ErrShardSet, j, i)
		}
	}
	so := opts.storeOptions()
	backends := make([]flow.Backend, len(dbs))
	for i, db := range dbs {
		backends[i] = &backend{open: func(ctx context.Context) (*sqlitestore.Store, error) {
			so, err := withReplica(ctx, db, opts, so, i, len(dbs))
			if err != nil {
				return nil, err
			}
			s, err := sqlitestore.OpenDB(ctx, db, so)
			if err != nil {
				return nil, err
			}
			if so.BusyTimeout != 0 && so.BusyTimeout != s.BusyTimeout() {
				s.Close()
				return nil, fmt.Errorf("new engine: Options.BusyTimeout is %s but the busy_timeout of pool %d is %s: open the pools with DSNBusy(path, sync, %s) or leave BusyTimeout zero",
					so.BusyTimeout, i, s.BusyTimeout(), so.BusyTimeout)
			}
			return s, nil
		}}
	}
	return flow.NewSharded(ctx, backends, cfg)
}

// OpenShardsReadOnly opens the shard set at paths, in the set's order,
// only to read, as OpenReadOnly opens one file. The files must already
// form the set.
func OpenShardsReadOnly(ctx context.Context, paths []string, cfg *flow.Config, opts *Options) (*flow.Engine, error) {
	if err := distinctFiles(paths); err != nil {
		return nil, err
	}
	var so sqlitestore.Options
	if opts != nil {
		so.BusyTimeout = opts.BusyTimeout
	}
	backends := make([]flow.Backend, len(paths))
	for i, path := range paths {
		backends[i] = &backend{readOnly: path, open: func(ctx context.Context) (*sqlitestore.Store, error) {
			return sqlitestore.OpenReadOnly(ctx, path, so)
		}}
	}
	e, err := flow.NewSharded(ctx, backends, cfg)
	if err != nil && len(paths) > 1 {
		return nil, fmt.Errorf("open shards %v read-only: %w", paths, err)
	}
	return e, err
}

// distinctFiles refuses a shard set that names one file twice (the same
// path, or two paths of one file), before anything is opened: two shards
// in one file would record one place in the set.
func distinctFiles(paths []string) error {
	type file struct {
		abs  string
		info os.FileInfo // nil for a file that does not exist yet
	}
	files := make([]file, len(paths))
	for i, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("open shards: %w", err)
		}
		files[i].abs = abs
		files[i].info, _ = os.Stat(p)
		for j := range i {
			same := files[j].abs == abs
			if files[j].info != nil && files[i].info != nil {
				same = same || os.SameFile(files[j].info, files[i].info)
			}
			if same {
				return fmt.Errorf("open shards: %w: %s and %s are one file", flow.ErrShardSet, paths[j], p)
			}
		}
	}
	return nil
}

// withReplica is so with the replication of the file of a caller's pool
// db, shard of shards, when opts replicate.
func withReplica(ctx context.Context, db *sql.DB, opts *Options, so sqlitestore.Options, shard, shards int) (sqlitestore.Options, error) {
	if opts == nil || (opts.Replication == nil && opts.Checkpoints == CheckpointsAuto) {
		return so, nil
	}
	path, err := sqlitestore.FileOf(ctx, db)
	if err != nil {
		return so, fmt.Errorf("new engine: %w", err)
	}
	return opts.fileOptions(path, shard, shards)
}
