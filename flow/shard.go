package flow

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Shards: one SQLite file has one writer, so an engine on one file commits
// with about one core. A sharded engine (NewSharded, flowsqlite.OpenShards)
// spreads runs over several files, each with its own store, writer,
// claimers, rescuer and cleaner (one inner engine per file). route.go
// routes every call of this API to the file that holds the run, or merges
// the answers of all files; this file builds and checks the set, and says
// where a run lives. See docs/shards.md for what a sharded engine does
// differently.
//
// Placement: a run lives in the shard PlaceRun names, from a hash of its
// unique key when it has one (so a unique key holds across shards), else of
// its run ID up to the first '/'. Children (ID "<parent>/<step>#<n>") and
// requeued dead letters ("<id>/requeue-<n>") share that prefix, so they stay
// in their parent's file, where starting a child and waking its parent are
// one transaction; a child with a custom ID is started in its parent's file
// as well, whatever its ID hashes to. By-ID calls therefore try the ID's
// home shard first, then the others.

// maxShardIDTries bounds the random IDs a shard view draws to find one its
// own shard holds (StartTx on Shard(i) without an ID): each try hits with
// probability 1/n, so 64 n tries fail with odds below e^-64.
const maxShardIDTries = 64

// shardPlace is the place of one shard's engine in its set.
type shardPlace struct {
	index, count int
}

// NewSharded returns an engine over several databases, one per backend,
// each with its own inner engine: the shards of a set, in the set's order.
// Most programs call flowsqlite.OpenShards, which calls it. A single
// backend makes a plain engine, exactly as New does; shards are a SQLite
// matter (a PostgreSQL engine scales with more worker processes instead),
// and a backend that cannot record its place in a set is refused.
//
// Each file records the set it belongs to and its place in it the first
// time the set opens (the files must then hold no runs). Later, files that
// do not form that set — one missing or added, out of order, or from
// another set — are refused with an error matching ErrShardSet naming the
// file, and nothing is changed.
//
// cfg applies to every shard: Config.Queues concurrency is per shard, so N
// shards run up to N times as many runs of a queue at once.
func NewSharded(ctx context.Context, backends []Backend, cfg *Config) (*Engine, error) {
	switch len(backends) {
	case 0:
		return nil, errors.New("new sharded engine: no backends")
	case 1:
		return New(ctx, backends[0], cfg)
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if err := engine.CheckConfig(engineConfig(cfg, 0)); err != nil {
		return nil, fmt.Errorf("new sharded engine: %w", err)
	}
	if cfg.WorkerID == "" {
		// One worker ID for every shard, as engine.Config's default would
		// draw it once: the shards' leases are in different files, and
		// their reports merge into this process's one (Reports).
		c := *cfg
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
		cfg = &c
	}
	opened := make([]store.Opened, 0, len(backends))
	closeAll := func() {
		for _, o := range opened {
			o.Store.Close()
		}
	}
	for i, b := range backends {
		o, err := b.OpenStore(ctx)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("open shard %d: %w", i, err)
		}
		opened = append(opened, o)
	}
	if err := checkShardSet(ctx, opened, time.Now().UnixMilli()); err != nil {
		closeAll()
		return nil, err
	}
	shards := make([]*Engine, len(opened))
	for i, o := range opened {
		s, err := newEngine(o, cfg)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		shards[i] = s
	}
	return newSet(shards), nil
}

// checkShardSet checks that the stores form one shard set in this order,
// or records a new set in stores that belong to none and hold no runs.
// Shard 0 is recorded last: a set whose shard 0 holds a record is complete,
// and one whose creation was interrupted is created again.
func checkShardSet(ctx context.Context, opened []store.Opened, now int64) error {
	n := len(opened)
	recs := make([]store.ShardRecord, n)
	has := make([]bool, n)
	sharders := make([]store.Sharder, n)
	for i, o := range opened {
		sh, ok := o.Store.(store.Sharder)
		if !ok {
			return fmt.Errorf("shard %d: %w: its backend cannot be a shard (shards are SQLite files)", i, ErrShardSet)
		}
		sharders[i] = sh
		var err error
		if recs[i], has[i], err = sh.ShardGet(ctx); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	if has[0] {
		set := recs[0]
		for i, r := range recs {
			switch {
			case !has[i]:
				return fmt.Errorf("%w: shard 0 belongs to a set of %d files, but file %d of the %d given belongs to no set",
					ErrShardSet, set.Count, i, n)
			case r.SetID != set.SetID:
				return fmt.Errorf("%w: file %d belongs to another set (%s) than shard 0 (%s)", ErrShardSet, i, r.SetID, set.SetID)
			case r.Count != n:
				return fmt.Errorf("%w: the files belong to a set of %d shards, but %d were given", ErrShardSet, r.Count, n)
			case r.Index != i:
				return fmt.Errorf("%w: file %d of those given is shard %d of its set: give the files in the set's order", ErrShardSet, i, r.Index)
			}
		}
		return nil
	}
	for i, o := range opened {
		if has[i] && (recs[i].Count != n || recs[i].Index != i) {
			return fmt.Errorf("%w: file %d is shard %d of a set of %d, but shard 0 belongs to no set", ErrShardSet, i, recs[i].Index, recs[i].Count)
		}
		if o.ReadOnly != "" {
			return fmt.Errorf("%w: %s belongs to no shard set yet, and a set opened only to read cannot be created", ErrShardSet, o.ReadOnly)
		}
		counts, err := o.Store.Reader().RunCountByStatus(ctx)
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
		var runs int64
		for _, c := range counts {
			runs += c
		}
		if runs > 0 {
			return fmt.Errorf("%w: file %d holds %d runs but belongs to no shard set: a set starts from new files, since its runs would not be where the set looks for them",
				ErrShardSet, i, runs)
		}
	}
	setID := engine.NewRunID()
	for i := n - 1; i >= 0; i-- {
		if err := sharders[i].ShardPut(ctx, store.ShardRecord{SetID: setID, Index: i, Count: n, CreatedAt: now}); err != nil {
			return fmt.Errorf("create shard set: %w", err)
		}
	}
	// Two backends on one file (the same path twice, a link) would share
	// one record: the later write wins, and the set is refused, now and on
	// every later open.
	for i, sh := range sharders {
		rec, _, err := sh.ShardGet(ctx)
		if err != nil {
			return fmt.Errorf("create shard set: %w", err)
		}
		if rec.Index != i {
			return fmt.Errorf("%w: file %d and file %d are one database", ErrShardSet, i, rec.Index)
		}
	}
	return nil
}

// checkNotShard refuses to open one file of a shard set as a plain engine,
// which would start runs where the set does not look for them. Reading one
// shard's file alone is fine.
func checkNotShard(ctx context.Context, o store.Opened) error {
	sh, ok := o.Store.(store.Sharder)
	if !ok || o.ReadOnly != "" {
		return nil
	}
	rec, has, err := sh.ShardGet(ctx)
	if err != nil {
		return err
	}
	if has {
		return fmt.Errorf("%w: the database is shard %d of a set of %d files: open the whole set (flowsqlite.OpenShards, flowlite --db a,b,...)",
			ErrShardSet, rec.Index, rec.Count)
	}
	return nil
}

// placeKey hashes the placement key of a run (FNV-1a) onto n shards.
func placeKey(runID, uniqueKey string, n int) int {
	if n <= 1 {
		return 0
	}
	key := uniqueKey
	if key == "" {
		key, _, _ = strings.Cut(runID, "/")
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}
