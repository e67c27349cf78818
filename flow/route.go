package flow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/engine"
	"github.com/flowlite/flowlite/internal/store"
)

// Routing: every call of an Engine is served by one or all of its inner
// engines, one per database. A plain engine is a set of one, whose inner
// engine is itself, so the rest of the package never asks whether an
// engine is sharded: it asks this file which inner engine holds a run
// (byRun, onRun, onRuns), which one records a new run or a schedule
// (forNewRun, forTx, forSchedule), which ones answer a call (all, onAll,
// each, gather, sumAll) and how their answers merge (merge and the merge
// functions below). A set of one is served as if there were no sets: its
// one answer is returned as it is, its errors name no shard, and a new
// run's ID is left to its core to draw, unless placement needs it first.
//
// Where a run lives is shard.go's matter (placeKey): this file only asks.

// router decides which of an Engine's inner engines serves a call.
type router struct {
	// engines are the inner engines, in the set's order: a sharded
	// engine's shards, or a plain engine alone.
	engines []*Engine
	// place is the place in its set of one shard's engine (Engine.Shard),
	// which records only the runs its shard holds; nil for a plain or a
	// sharded engine.
	place *shardPlace
}

// newSet returns the engine of a shard set over its shards' engines, in
// the set's order. Its own core and store are shard 0's, which serve what
// is not routed (workflow lookups, the clock, definitions read back).
func newSet(shards []*Engine) *Engine {
	for i, s := range shards {
		s.route.place = &shardPlace{index: i, count: len(shards)}
	}
	shareLimits(shards)
	first := shards[0]
	return &Engine{core: first.core, store: first.store, readOnly: first.readOnly, limits: first.limits, route: router{engines: shards}}
}

// alone routes every call of e to e itself: a plain engine is a set of
// one.
func alone(e *Engine) router { return router{engines: []*Engine{e}} }

// Shards returns the number of shards: 1 for a plain engine.
func (e *Engine) Shards() int { return len(e.route.engines) }

// Shard returns the engine of shard i alone, for what belongs to one file:
// its change feed (Changes), its backup and file health, and starts in a
// transaction on that file (StartTx, EnqueueTx, StartManyTx,
// EnqueueManyTx), which refuse a run PlaceRun puts in another shard. On a
// plain engine, Shard(0) is the engine itself. It panics when i is out of
// range. Register workflows on the sharded engine, not on a shard.
func (e *Engine) Shard(i int) *Engine {
	n := len(e.route.engines)
	if i < 0 || i >= n {
		count := fmt.Sprintf("%d shards", n)
		if n == 1 {
			count = "1 shard"
		}
		panic(fmt.Sprintf("flow: Shard(%d) of an engine with %s", i, count))
	}
	return e.route.engines[i]
}

// PlaceRun returns the shard a run with this ID and unique key (empty:
// none) is started in: by the unique key when there is one, else by the ID
// up to its first '/'. Use it to open a transaction on the right file for
// StartTx (see Shard). A child run lives in its parent's shard instead.
func (e *Engine) PlaceRun(runID, uniqueKey string) int {
	return placeKey(runID, uniqueKey, e.route.setSize())
}

// setSize is the number of shards in the set the engine routes over, or
// belongs to when it is one shard's engine.
func (r *router) setSize() int {
	if r.place != nil {
		return r.place.count
	}
	return len(r.engines)
}

// all returns the inner engines, in the set's order.
func (r *router) all() []*Engine { return r.engines }

// one returns the inner engine of a call that belongs to one database (a
// transaction, a change feed, a file's upkeep): the engine itself, unless
// it is a set of several files, which refuses with ErrSharded naming what.
func (r *router) one(what string) (*Engine, error) {
	if n := len(r.engines); n > 1 {
		return nil, fmt.Errorf("%s: %w: the engine has %d shards, each a file of its own: call it on Engine.Shard(i)", what, ErrSharded, n)
	}
	return r.engines[0], nil
}

// shardErr returns the error of inner engine i: as it is on a plain
// engine, and, on a set of several, formatted by format (with %d for i
// and %w for err) to name the shard it came from.
func (r *router) shardErr(i int, err error, format string) error {
	if len(r.engines) == 1 {
		return err
	}
	return fmt.Errorf(format, i, err)
}

// where is " in shard i" on a set of several, and "" on a plain engine,
// for messages of inner engine i that say where they happened.
func (r *router) where(i int) string {
	if len(r.engines) == 1 {
		return ""
	}
	return fmt.Sprintf(" in shard %d", i)
}

// byRun calls fn on the inner engine that holds runID: the ID's home shard
// first, then the others while fn reports ErrRunNotFound. The error of the
// home shard is returned when no shard holds the run.
func byRun[T any](e *Engine, runID string, fn func(inner *Engine) (T, error)) (T, error) {
	engines := e.route.engines
	if len(engines) == 1 {
		return fn(engines[0])
	}
	home := placeKey(runID, "", len(engines))
	v, err := fn(engines[home])
	if !errors.Is(err, ErrRunNotFound) {
		return v, err
	}
	for i, inner := range engines {
		if i == home {
			continue
		}
		if v2, err2 := fn(inner); !errors.Is(err2, ErrRunNotFound) {
			return v2, err2
		}
	}
	return v, err
}

// onRun calls fn on the core of the inner engine that holds runID, as
// byRun does, for calls that return only an error.
func (e *Engine) onRun(runID string, fn func(c *engine.Engine) error) error {
	_, err := byRun(e, runID, func(inner *Engine) (struct{}, error) { return struct{}{}, fn(inner.core) })
	return err
}

// locate returns the inner engine holding runID.
func (e *Engine) locate(ctx context.Context, runID string) (*Engine, error) {
	return byRun(e, runID, func(inner *Engine) (*Engine, error) {
		if _, err := inner.store.Reader().RunGet(ctx, runID); err != nil {
			return nil, err
		}
		return inner, nil
	})
}

// onRuns calls fn once per inner engine with the runIDs it holds, one
// engine after the other, for calls on many runs by ID that are one
// transaction per database. A plain engine gets runIDs as they are; on a
// set, every run is located first (an unknown one fails the call, as
// "what runID: err", before fn is called at all), and an error of fn names
// its shard and leaves the calls made before it done.
func (e *Engine) onRuns(ctx context.Context, what string, runIDs []string, fn func(inner *Engine, ids []string) error) error {
	if len(e.route.engines) == 1 {
		return fn(e.route.engines[0], runIDs)
	}
	parts := make(map[*Engine][]string)
	for _, id := range runIDs {
		inner, err := e.locate(ctx, id)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, id, err)
		}
		parts[inner] = append(parts[inner], id)
	}
	for i, inner := range e.route.engines {
		if ids := parts[inner]; len(ids) > 0 {
			if err := fn(inner, ids); err != nil {
				return e.route.shardErr(i, err, "shard %d: %w")
			}
		}
	}
	return nil
}

// forSchedule returns the inner engine that holds the schedule name, by a
// hash of its name: the schedule's runs start in that shard (the engine
// of each shard fires the schedules its file holds), whatever their IDs
// hash to.
func (r *router) forSchedule(name string) *Engine {
	return r.engines[placeKey("", "schedule:"+name, len(r.engines))]
}

// each calls fn on every inner engine at once and returns their answers in
// the set's order, or the first error, naming its shard. A plain engine's
// fn runs in the caller's goroutine and its error is returned as it is.
func each[T any](ctx context.Context, e *Engine, fn func(ctx context.Context, inner *Engine) (T, error)) ([]T, error) {
	engines := e.route.engines
	out := make([]T, len(engines))
	if len(engines) == 1 {
		v, err := fn(ctx, engines[0])
		out[0] = v
		return out, err
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, inner := range engines {
		g.Go(func() error {
			v, err := fn(gctx, inner)
			if err != nil {
				return fmt.Errorf("shard %d: %w", i, err)
			}
			out[i] = v
			return nil
		})
	}
	return out, g.Wait()
}

// gather calls fn on every inner engine at once, as each does, and merges
// their answers with mergeFn. On an error, shard 0's answer comes back
// with it.
func gather[T any](ctx context.Context, e *Engine, fn func(ctx context.Context, inner *Engine) (T, error), mergeFn func([]T) T) (T, error) {
	answers, err := each(ctx, e, fn)
	if err != nil {
		return answers[0], err
	}
	return merge(answers, mergeFn), nil
}

// mapAll returns what fn says of every inner engine, in the set's order.
func mapAll[T any](e *Engine, fn func(inner *Engine) T) []T {
	out := make([]T, len(e.route.engines))
	for i, inner := range e.route.engines {
		out[i] = fn(inner)
	}
	return out
}

// merge returns the one answer of a plain engine as it is, and merges the
// answers of a set's shards with mergeFn.
func merge[T any](answers []T, mergeFn func([]T) T) T {
	if len(answers) == 1 {
		return answers[0]
	}
	return mergeFn(answers)
}

// sumAll adds the counts fn returns for every inner engine, one after the
// other; on an error, the count so far comes back with it.
func sumAll(e *Engine, fn func(inner *Engine) (int, error)) (int, error) {
	total := 0
	for i, inner := range e.route.engines {
		n, err := fn(inner)
		total += n
		if err != nil {
			return total, e.route.shardErr(i, err, "shard %d: %w")
		}
	}
	return total, nil
}

// onAll calls fn on every inner engine, one after the other, until one
// fails; its error names its shard.
func (e *Engine) onAll(fn func(inner *Engine) error) error {
	_, err := sumAll(e, func(inner *Engine) (int, error) { return 0, fn(inner) })
	return err
}

// startAll starts every inner engine, in the set's order, or none: when
// one fails, those started before it are stopped at once.
func (r *router) startAll(ctx context.Context) error {
	for i, inner := range r.engines {
		if err := inner.core.Start(ctx); err != nil {
			stopped, cancel := context.WithCancel(context.Background())
			cancel()
			for _, started := range r.engines[:i] {
				_ = started.core.Stop(stopped)
			}
			return r.shardErr(i, err, "start shard %d: %w")
		}
	}
	return nil
}

// forNewRun returns the inner engine that records the start p, drawing
// its ID first when placement depends on it, so that the ID names where
// the run is.
//
// A start with both an ID and a unique key is placed by the key, so a run
// of that ID placed by another key may live in another shard: the ID is
// looked for there first, and a run found is the start's (as on one file,
// where the ID is an idempotency key). Two such starts at once, with one
// ID and different keys, can still make two runs.
func (r *router) forNewRun(ctx context.Context, p *engine.StartParams) (*Engine, error) {
	n := len(r.engines)
	if n == 1 {
		return r.engines[0], r.admit(p)
	}
	if p.ID == "" {
		p.ID, _ = newRunID(nil)
		return r.engines[placeKey(p.ID, placement(p), n)], nil
	}
	target := placeKey(p.ID, placement(p), n)
	if p.UniqueKey == "" || p.ParentID != "" {
		return r.engines[target], nil
	}
	for i, inner := range r.engines {
		if i == target {
			continue
		}
		_, err := inner.store.Reader().RunGet(ctx, p.ID)
		if err == nil {
			return inner, nil
		}
		if !errors.Is(err, ErrRunNotFound) {
			return nil, fmt.Errorf("start run %s: look for it in shard %d: %w", p.ID, i, err)
		}
	}
	return r.engines[target], nil
}

// placement is the key a start is placed by in a set of files: its unique
// key, which one file must hold to enforce it, or else its debounce key
// (likewise), or else its concurrency key, so that a key's runs are in one
// file and its per-key limits hold there exactly; without any, the run's
// ID (placeKey).
func placement(p *engine.StartParams) string {
	switch {
	case p.UniqueKey != "":
		return p.UniqueKey
	case p.Debounce != nil:
		// Before the concurrency key: every start of a debounce key must
		// reach the one file that holds its pending run.
		return "debounce:" + p.Workflow.Name + "\x00" + p.Debounce.Key
	case p.ConcurrencyKey != "":
		return "concurrency:" + p.ConcurrencyKey
	}
	return ""
}

// forTx returns the engine that records the start p in the caller's
// transaction, which belongs to one database: the engine itself, which
// refuses with ErrSharded naming what when it is a set of several files.
func (r *router) forTx(what string, p *engine.StartParams) (*Engine, error) {
	inner, err := r.one(what)
	if err != nil {
		return nil, err
	}
	return inner, r.admit(p)
}

// forTxBatch is forTx for a batch, whose refused item an *ItemError names.
func (r *router) forTxBatch(ps []engine.StartParams) (*Engine, error) {
	inner, err := r.one("a transaction belongs to one file")
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if err := r.admit(&ps[i]); err != nil {
			return nil, &ItemError{Index: i, RunID: ps[i].ID, Err: err}
		}
	}
	return inner, nil
}

// splitStarts places every start of a batch, as forNewRun places one, and
// returns the engine of each item and the item indexes of each engine's
// part, in the items' order. A start that cannot be placed fails the
// batch with an *ItemError naming it.
func (r *router) splitStarts(ctx context.Context, ps []engine.StartParams) (at []*Engine, parts map[*Engine][]int, err error) {
	at = make([]*Engine, len(ps))
	parts = make(map[*Engine][]int)
	for i := range ps {
		inner, err := r.forNewRun(ctx, &ps[i])
		if err != nil {
			return nil, nil, &ItemError{Index: i, RunID: ps[i].ID, Err: err}
		}
		at[i] = inner
		parts[inner] = append(parts[inner], i)
	}
	return at, parts, nil
}

// admit refuses a start on one shard's engine that belongs in another
// shard, and gives a start without ID or unique key an ID of this shard.
// Other engines admit every start, and leave drawing a missing ID to
// their core.
func (r *router) admit(p *engine.StartParams) error {
	sp := r.place
	if sp == nil {
		return nil
	}
	if p.ID == "" && p.UniqueKey == "" {
		id, ok := newRunID(sp)
		if !ok {
			return fmt.Errorf("start %s: no run ID of shard %d found", p.Workflow, sp.index)
		}
		p.ID = id
		return nil
	}
	if i := placeKey(p.ID, placement(p), sp.count); i != sp.index {
		what := "run " + p.ID
		if p.UniqueKey != "" {
			what = "unique key " + p.UniqueKey
		}
		return fmt.Errorf("start %s on shard %d: %w: %s belongs to shard %d (Engine.PlaceRun)", p.Workflow, sp.index, ErrShardSet, what, i)
	}
	return nil
}

// newRunID draws the ID of a run started without one, where placement
// needs it before the core would draw it. With in set, the ID must place
// the run in that shard: IDs are drawn until one does, up to
// maxShardIDTries per shard of the set, and false reports none did.
func newRunID(in *shardPlace) (string, bool) {
	if in == nil {
		return engine.NewRunID(), true
	}
	for range maxShardIDTries * in.count {
		if id := engine.NewRunID(); placeKey(id, "", in.count) == in.index {
			return id, true
		}
	}
	return "", false
}

// The merge functions below join the answers of a set's shards into the
// answer one database would give, for merge and gather.

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

// newestRuns merges lists of runs as RunList orders them (newest first,
// then by ID), keeping as many as a list call with limit returns: each
// shard returned up to the limit, so the newest of them all are the
// newest overall.
func newestRuns(limit int) func([][]store.Run) []store.Run {
	return func(lists [][]store.Run) []store.Run {
		return mergeSorted(lists, listLimit(limit), func(a, b store.Run) int {
			return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), strings.Compare(a.ID, b.ID))
		})
	}
}

// lastFailedRuns merges lists of dead letters as DeadLetters orders them
// (the most recently failed first, then by ID), keeping as many as a call
// with limit returns.
func lastFailedRuns(limit int) func([][]store.Run) []store.Run {
	return func(lists [][]store.Run) []store.Run {
		return mergeSorted(lists, listLimit(limit), func(a, b store.Run) int {
			return cmp.Or(cmp.Compare(b.FinishedAt, a.FinishedAt), strings.Compare(a.ID, b.ID))
		})
	}
}

// listLimit is the number of runs a list call returns for limit, as the
// store applies it.
func listLimit(limit int) int {
	if limit <= 0 {
		return 100
	}
	return limit
}

// mergeCounts adds up the shards' counts of runs by state.
func mergeCounts(counts []map[RunStatus]int64) map[RunStatus]int64 {
	out := make(map[RunStatus]int64)
	for _, c := range counts {
		for st, n := range c {
			out[st] += n
		}
	}
	return out
}

// mergeProblems joins the shards' lists of problems, each naming its
// shard.
func mergeProblems(lists [][]string) []string {
	var out []string
	for i, ps := range lists {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("shard %d: %s", i, p))
		}
	}
	return out
}

// sumMetrics adds up the shards' in-process metrics.
func sumMetrics(ms []EngineMetrics) EngineMetrics { return SumMetrics(ms...) }

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

// mergeUnworked adds up, by queue name, the pending runs of each queue no
// engine works in one shard, and keeps the oldest of their starts.
func mergeUnworked(lists [][]engine.UnworkedQueue) []engine.UnworkedQueue {
	byName := map[string]int{} // index in out
	var out []engine.UnworkedQueue
	for _, l := range lists {
		for _, q := range l {
			i, ok := byName[q.Queue]
			if !ok {
				byName[q.Queue] = len(out)
				out = append(out, q)
				continue
			}
			out[i].Pending += q.Pending
			if q.OldestCreatedAt.Before(out[i].OldestCreatedAt) {
				out[i].OldestCreatedAt = q.OldestCreatedAt
			}
		}
	}
	slices.SortFunc(out, func(a, b engine.UnworkedQueue) int { return strings.Compare(a.Queue, b.Queue) })
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
