package flow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Shards: one SQLite file has one writer, so an engine on one file commits
// with about one core. A sharded engine (NewSharded, flowsqlite.OpenShards)
// spreads runs over several files, each with its own store, writer,
// claimers, rescuer and cleaner (one inner engine per file), and routes
// every call of this API to the file that holds the run, or merges the
// answers of all files. See docs/shards.md for what a sharded engine
// does differently.
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
	e := &Engine{shards: make([]*Engine, len(opened))}
	for i, o := range opened {
		s, err := newEngine(o, cfg)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		s.place = &shardPlace{index: i, count: len(opened)}
		e.shards[i] = s
	}
	first := e.shards[0]
	e.core, e.store, e.readOnly = first.core, first.store, first.readOnly
	return e, nil
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

// Shards returns the number of shards: 1 for a plain engine.
func (e *Engine) Shards() int { return max(1, len(e.shards)) }

// Shard returns the engine of shard i alone, for what belongs to one file:
// its change feed (Changes), its backup and file health, and starts in a
// transaction on that file (StartTx, EnqueueTx, StartManyTx,
// EnqueueManyTx), which refuse a run PlaceRun puts in another shard. On a
// plain engine, Shard(0) is the engine itself. It panics when i is out of
// range. Register workflows on the sharded engine, not on a shard.
func (e *Engine) Shard(i int) *Engine {
	if e.shards == nil {
		if i != 0 {
			panic(fmt.Sprintf("flow: Shard(%d) of an engine with 1 shard", i))
		}
		return e
	}
	if i < 0 || i >= len(e.shards) {
		panic(fmt.Sprintf("flow: Shard(%d) of an engine with %d shards", i, len(e.shards)))
	}
	return e.shards[i]
}

// PlaceRun returns the shard a run with this ID and unique key (empty:
// none) is started in: by the unique key when there is one, else by the ID
// up to its first '/'. Use it to open a transaction on the right file for
// StartTx (see Shard). A child run lives in its parent's shard instead.
func (e *Engine) PlaceRun(runID, uniqueKey string) int {
	n := e.Shards()
	if p := e.place; p != nil {
		n = p.count
	}
	return placeKey(runID, uniqueKey, n)
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

// homeOf is the shard a by-ID call tries first.
func (e *Engine) homeOf(runID string) int { return placeKey(runID, "", len(e.shards)) }

// all returns the engines of every shard: e itself when it is plain.
func (e *Engine) all() []*Engine {
	if e.shards == nil {
		return []*Engine{e}
	}
	return e.shards
}

// placeStart returns the shard engine that records the start p, drawing
// its ID first when p has none, so that the ID names where the run is.
//
// A start with both an ID and a unique key is placed by the key, so a run
// of that ID placed by another key may live in another shard: the ID is
// looked for there first, and a run found is the start's (as on one file,
// where the ID is an idempotency key). Two such starts at once, with one
// ID and different keys, can still make two runs.
func (e *Engine) placeStart(ctx context.Context, p *engine.StartParams) (*Engine, error) {
	if e.shards != nil {
		if p.ID == "" {
			p.ID = engine.NewRunID()
			return e.shards[placeKey(p.ID, p.UniqueKey, len(e.shards))], nil
		}
		target := placeKey(p.ID, p.UniqueKey, len(e.shards))
		if p.UniqueKey == "" || p.ParentID != "" {
			return e.shards[target], nil
		}
		for i, s := range e.shards {
			if i == target {
				continue
			}
			_, err := s.store.Reader().RunGet(ctx, p.ID)
			if err == nil {
				return s, nil
			}
			if !errors.Is(err, ErrRunNotFound) {
				return nil, fmt.Errorf("start run %s: look for it in shard %d: %w", p.ID, i, err)
			}
		}
		return e.shards[target], nil
	}
	if e.place == nil {
		return e, nil
	}
	return e, e.checkPlace(p)
}

// checkPlace refuses a start on one shard's engine that belongs in another
// shard; a start without ID or unique key gets an ID of this shard.
func (e *Engine) checkPlace(p *engine.StartParams) error {
	sp := e.place
	if p.ID == "" && p.UniqueKey == "" {
		for range maxShardIDTries * sp.count {
			if id := engine.NewRunID(); placeKey(id, "", sp.count) == sp.index {
				p.ID = id
				return nil
			}
		}
		return fmt.Errorf("start %s: no run ID of shard %d found", p.Workflow, sp.index)
	}
	if i := placeKey(p.ID, p.UniqueKey, sp.count); i != sp.index {
		what := "run " + p.ID
		if p.UniqueKey != "" {
			what = "unique key " + p.UniqueKey
		}
		return fmt.Errorf("start %s on shard %d: %w: %s belongs to shard %d (Engine.PlaceRun)", p.Workflow, sp.index, ErrShardSet, what, i)
	}
	return nil
}

// byID calls fn on the shard that holds runID: its home shard first, then
// the others while fn reports ErrRunNotFound. The error of the home shard
// is returned when no shard holds the run.
func byID[T any](e *Engine, runID string, fn func(s *Engine) (T, error)) (T, error) {
	if e.shards == nil {
		return fn(e)
	}
	home := e.homeOf(runID)
	v, err := fn(e.shards[home])
	if !errors.Is(err, ErrRunNotFound) {
		return v, err
	}
	for i, s := range e.shards {
		if i == home {
			continue
		}
		if v2, err2 := fn(s); !errors.Is(err2, ErrRunNotFound) {
			return v2, err2
		}
	}
	return v, err
}

// byIDErr is byID for calls that return only an error.
func byIDErr(e *Engine, runID string, fn func(s *Engine) error) error {
	_, err := byID(e, runID, func(s *Engine) (struct{}, error) { return struct{}{}, fn(s) })
	return err
}

// locate returns the shard engine holding runID.
func (e *Engine) locate(ctx context.Context, runID string) (*Engine, error) {
	return byID(e, runID, func(s *Engine) (*Engine, error) {
		if _, err := s.store.Reader().RunGet(ctx, runID); err != nil {
			return nil, err
		}
		return s, nil
	})
}

// eachShard calls fn on every shard at once and returns their results in
// shard order, or the first error, naming its shard.
func eachShard[T any](ctx context.Context, e *Engine, fn func(ctx context.Context, s *Engine) (T, error)) ([]T, error) {
	shards := e.all()
	out := make([]T, len(shards))
	if len(shards) == 1 {
		v, err := fn(ctx, shards[0])
		out[0] = v
		return out, err
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range shards {
		g.Go(func() error {
			v, err := fn(gctx, s)
			if err != nil {
				return fmt.Errorf("shard %d: %w", i, err)
			}
			out[i] = v
			return nil
		})
	}
	return out, g.Wait()
}

// sumShards adds the counts fn returns for every shard, in shard order;
// on an error, the count so far comes back with it.
func sumShards(e *Engine, fn func(s *Engine) (int, error)) (int, error) {
	total := 0
	for i, s := range e.all() {
		n, err := fn(s)
		total += n
		if err != nil {
			if e.shards != nil {
				err = fmt.Errorf("shard %d: %w", i, err)
			}
			return total, err
		}
	}
	return total, nil
}

// errSharded is the error of a call that belongs to one file, on a
// sharded engine.
func (e *Engine) errSharded(what string) error {
	return fmt.Errorf("%s: %w: the engine has %d shards, each a file of its own: call it on Engine.Shard(i)", what, ErrSharded, len(e.shards))
}

// mergeSorted concatenates lists and sorts them by cmpFn, stably, keeping
// at most limit (0: all).
func mergeSorted[T any](lists [][]T, limit int, cmpFn func(a, b T) int) []T {
	var out []T
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortStableFunc(out, cmpFn)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// newestFirst orders runs as RunList does: newest first, then by ID.
func newestFirst(a, b store.Run) int {
	return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), strings.Compare(a.ID, b.ID))
}

// listLimit is the number of runs a list call returns for limit, as the
// store applies it.
func listLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return limit
}

// mergeUnrunnable adds up the shards' counts of runs waiting for a
// workflow version, ordered by workflow and version as each shard's are.
func mergeUnrunnable(lists [][]store.UnrunnableCount) []store.UnrunnableCount {
	sum := map[flowtype.WorkflowKey]int64{}
	var out []store.UnrunnableCount
	for _, l := range lists {
		for _, c := range l {
			if _, ok := sum[c.Workflow]; !ok {
				out = append(out, store.UnrunnableCount{Workflow: c.Workflow})
			}
			sum[c.Workflow] += c.Runs
		}
	}
	for i := range out {
		out[i].Runs = sum[out[i].Workflow]
	}
	slices.SortFunc(out, func(a, b store.UnrunnableCount) int {
		return cmp.Or(strings.Compare(a.Workflow.Name, b.Workflow.Name), cmp.Compare(a.Workflow.Version, b.Workflow.Version))
	})
	return out
}

// mergeQueueStats adds up the shards' statistics of each queue, by name.
// The duration samples are the union of each shard's (up to
// engine.DurationSample per shard), sorted again.
func mergeQueueStats(lists [][]engine.QueueStats) []engine.QueueStats {
	byName := map[string]int{} // index in out
	var out []engine.QueueStats
	for _, l := range lists {
		for _, q := range l {
			i, ok := byName[q.Queue]
			if !ok {
				byName[q.Queue] = len(out)
				q.Counts = maps.Clone(q.Counts)
				q.Durations = slices.Clone(q.Durations)
				out = append(out, q)
				continue
			}
			m := &out[i]
			m.Paused = m.Paused || q.Paused
			if m.Counts == nil {
				m.Counts = map[flowtype.RunStatus]int64{}
			}
			for st, n := range q.Counts {
				m.Counts[st] += n
			}
			m.Ready += q.Ready
			if q.OldestReadyAt != 0 && (m.OldestReadyAt == 0 || q.OldestReadyAt < m.OldestReadyAt) {
				m.OldestReadyAt = q.OldestReadyAt
			}
			m.Dead += q.Dead
			m.FinishedLastMinute += q.FinishedLastMinute
			m.FinishedLastHour += q.FinishedLastHour
			m.Durations = append(m.Durations, q.Durations...)
		}
	}
	for i := range out {
		slices.Sort(out[i].Durations)
	}
	slices.SortFunc(out, func(a, b engine.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out
}

// mergeReports merges the reports the shards' engines of one process
// wrote, one per file under one worker ID, into one report per worker:
// metrics summed, queues joined, started at the earliest, reported at the
// latest, and live only while every shard's report is (the earliest
// LiveUntil, the latest StoppedAt). Ordered as Reports orders them.
func mergeReports(lists [][]Report) []Report {
	byOwner := map[string]int{} // index in out
	var out []Report
	for _, l := range lists {
		for _, r := range l {
			i, ok := byOwner[r.Owner]
			if !ok {
				byOwner[r.Owner] = len(out)
				r.Queues = slices.Clone(r.Queues)
				out = append(out, r)
				continue
			}
			m := &out[i]
			m.Metrics = SumMetrics(m.Metrics, r.Metrics)
			for _, q := range r.Queues {
				if !slices.Contains(m.Queues, q) {
					m.Queues = append(m.Queues, q)
				}
			}
			if r.StartedAt.Before(m.StartedAt) {
				m.StartedAt = r.StartedAt
			}
			if r.ReportedAt.After(m.ReportedAt) {
				m.ReportedAt = r.ReportedAt
			}
			if r.LiveUntil.Before(m.LiveUntil) {
				m.LiveUntil = r.LiveUntil
			}
			if r.StoppedAt.After(m.StoppedAt) {
				m.StoppedAt = r.StoppedAt
			}
		}
	}
	for i := range out {
		slices.Sort(out[i].Queues)
	}
	slices.SortStableFunc(out, func(a, b Report) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), strings.Compare(a.Owner, b.Owner))
	})
	return out
}
