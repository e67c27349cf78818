package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// shardPaths returns the paths of n new shard files in a temporary
// directory.
func shardPaths(t *testing.T, n int) []string {
	dir := t.TempDir()
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("shard%d.db", i))
		sqlitePaths.Store(paths[i], struct{}{})
	}
	return paths
}

// openShards opens a sharded engine on paths, closing it when the test
// ends.
func openShards(t *testing.T, paths []string, cfg *flow.Config) *flow.Engine {
	t.Helper()
	if cfg == nil {
		cfg = testConfig()
	}
	e, err := flowsqlite.OpenShards(context.Background(), paths, cfg, nil)
	if err != nil {
		t.Fatalf("open shards: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// idIn returns a run ID with prefix whose home is shard i of e.
func idIn(t *testing.T, e *flow.Engine, i int, prefix string) string {
	t.Helper()
	for n := range 1000 {
		if id := fmt.Sprintf("%s-%d", prefix, n); e.PlaceRun(id, "") == i {
			return id
		}
	}
	t.Fatalf("no ID with prefix %s in shard %d", prefix, i)
	return ""
}

var shardDouble = flow.Workflow[int, int]{Name: "double", Run: func(wc flow.Context, n int) (int, error) {
	return flow.Do(wc, flow.Step[int, int]{Name: "x2", Run: func(_ context.Context, n int) (int, error) { return 2 * n, nil }}, n)
}}

// Placement depends on the ID's routing part (or the unique key) only, is
// the same every time, and spreads IDs evenly.
func TestShardPlacementIsStableAndSpread(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3, 4} {
		e := openShards(t, shardPaths(t, n), nil)
		if got := e.Shards(); got != n {
			t.Fatalf("Shards() = %d, want %d", got, n)
		}
		counts := make([]int, n)
		const ids = 4000
		for i := range ids {
			id := fmt.Sprintf("order-%d", i)
			s := e.PlaceRun(id, "")
			counts[s]++
			if again := e.PlaceRun(id, ""); again != s {
				t.Fatalf("%s placed in %d, then %d", id, s, again)
			}
			if child := e.PlaceRun(id+"/pay#1", ""); child != s {
				t.Fatalf("child of %s placed in %d, parent in %d", id, child, s)
			}
			if keyed := e.PlaceRun(id, "k"); keyed != e.PlaceRun("other", "k") {
				t.Fatalf("the unique key does not decide the placement of %s", id)
			}
		}
		for s, c := range counts {
			if want := ids / n; c < want*8/10 || c > want*12/10 {
				t.Errorf("%d shards: shard %d holds %d of %d IDs, want about %d", n, s, c, ids, want)
			}
		}
	}
	plain := openEngine(t, sqlitePath(t), nil)
	if plain.Shards() != 1 || plain.PlaceRun("x", "") != 0 || plain.Shard(0) != plain {
		t.Fatal("a plain engine is not its own single shard")
	}
}

// Runs started through a sharded engine live in their placement shard,
// run there, and the engine lists and counts them all.
func TestShardedRunsSpreadAndComplete(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openShards(t, shardPaths(t, 2), nil)
	flow.Register(e, shardDouble)
	startEngine(t, e)
	var runs []*flow.Run[int]
	for i := range 40 {
		r, err := flow.Start(ctx, e, shardDouble, i, nil) // generated IDs
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	items := make([]flow.StartItem[int], 20)
	for i := range items {
		items[i] = flow.StartItem[int]{In: 100 + i, Opts: &flow.StartOptions{RunID: fmt.Sprintf("bulk-%d", i)}}
	}
	bulk, err := flow.StartMany(ctx, e, shardDouble, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range bulk {
		if r.ID() != fmt.Sprintf("bulk-%d", i) {
			t.Fatalf("handle %d is of %s", i, r.ID())
		}
	}
	runs = append(runs, bulk...)
	for i, r := range runs {
		out, err := r.Result(ctx)
		want := 2 * i
		if i >= 40 {
			want = 2 * (100 + i - 40)
		}
		if err != nil || out != want {
			t.Fatalf("run %s: %d, %v; want %d", r.ID(), out, err, want)
		}
	}
	perShard := make([]int, 2)
	for _, r := range runs {
		home := e.PlaceRun(r.ID(), "")
		if _, err := e.Shard(home).Inspect(ctx, r.ID()); err != nil {
			t.Fatalf("run %s is not in its shard %d: %v", r.ID(), home, err)
		}
		if _, err := e.Shard(1-home).Inspect(ctx, r.ID()); !errors.Is(err, flow.ErrRunNotFound) {
			t.Fatalf("run %s is in shard %d too: %v", r.ID(), 1-home, err)
		}
		perShard[home]++
	}
	if perShard[0] == 0 || perShard[1] == 0 {
		t.Fatalf("runs per shard %v: one shard got none", perShard)
	}
	list, err := e.ListRuns(ctx, flow.RunFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(runs) {
		t.Fatalf("ListRuns: %d runs, want %d", len(list), len(runs))
	}
	if !slices.IsSortedFunc(list, func(a, b flow.RunInfo) int { return b.CreatedAt.Compare(a.CreatedAt) }) {
		t.Fatal("ListRuns is not newest first across shards")
	}
	if few, _ := e.ListRuns(ctx, flow.RunFilter{Limit: 5}); len(few) != 5 || few[0].ID != list[0].ID {
		t.Fatalf("ListRuns with limit 5: %d runs", len(few))
	}
	counts, err := e.CountRuns(ctx)
	if err != nil || counts[flow.StatusCompleted] != int64(len(runs)) {
		t.Fatalf("CountRuns = %v, %v; want %d completed", counts, err, len(runs))
	}
	stats, err := e.QueueStats(ctx)
	if err != nil || len(stats) != 1 || stats[0].Counts[flow.StatusCompleted] != int64(len(runs)) {
		t.Fatalf("QueueStats = %+v, %v", stats, err)
	}
	if m := e.Metrics(); m.RunsStarted != int64(len(runs)) {
		t.Fatalf("Metrics().RunsStarted = %d, want %d", m.RunsStarted, len(runs))
	}
	// One process, one report: the shards' reports merge.
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	reports, err := e.Reports(ctx)
	if err != nil || len(reports) != 1 {
		t.Fatalf("Reports = %+v, %v; want one", reports, err)
	}
	if r := reports[0]; r.Metrics.RunsStarted != int64(len(runs)) || r.StoppedAt.IsZero() {
		t.Fatalf("report: %d runs started (want %d), stopped at %v", r.Metrics.RunsStarted, len(runs), r.StoppedAt)
	}
	for i := range 2 {
		if rs, _ := e.Shard(i).Reports(ctx); len(rs) != 1 || rs[0].Owner != reports[0].Owner {
			t.Fatalf("shard %d reports %+v, want one by %s", i, rs, reports[0].Owner)
		}
	}
}

// Children land in their parent's shard, a custom child ID included, and
// a signal and a cancel reach runs in shard 1 through the sharded engine.
func TestShardedChildrenSignalsAndCancel(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openShards(t, shardPaths(t, 2), nil)
	waiter := flow.Workflow[string, string]{Name: "waiter", Run: func(wc flow.Context, _ string) (string, error) {
		return flow.Receive[string](wc, "go", time.Hour)
	}}
	parentID := idIn(t, e, 1, "parent")
	customID := idIn(t, e, 0, "custom") // hashes to shard 0, lives in 1
	parent := flow.Workflow[string, string]{Name: "parent", Run: func(wc flow.Context, _ string) (string, error) {
		a, err := flow.StartChild(wc, waiter, "a", nil)
		if err != nil {
			return "", err
		}
		b, err := flow.StartChild(wc, waiter, "b", &flow.ChildOptions{RunID: customID})
		if err != nil {
			return "", err
		}
		ra, err := a.Result(wc)
		if err != nil {
			return "", err
		}
		rb, err := b.Result(wc)
		return ra + rb, err
	}}
	flow.Register(e, waiter)
	flow.Register(e, parent)
	startEngine(t, e)
	r, err := flow.Start(ctx, e, parent, "", &flow.StartOptions{RunID: parentID})
	if err != nil {
		t.Fatal(err)
	}
	var kids []flow.RunInfo
	eventually(t, "two children waiting", func() bool {
		kids = kids[:0]
		list, _ := e.ListRuns(ctx, flow.RunFilter{Workflow: "waiter", Status: flow.StatusWaiting})
		kids = append(kids, list...)
		return len(kids) == 2
	})
	for _, k := range kids {
		if k.ParentID != parentID {
			t.Fatalf("child %s has parent %q", k.ID, k.ParentID)
		}
		if _, err := e.Shard(1).Inspect(ctx, k.ID); err != nil {
			t.Fatalf("child %s is not in its parent's shard 1: %v", k.ID, err)
		}
	}
	for _, k := range kids {
		if _, err := flow.Signal(ctx, e, k.ID, "go", k.ID[:1], nil); err != nil {
			t.Fatalf("signal %s: %v", k.ID, err)
		}
	}
	out, err := r.Result(ctx)
	if err != nil || len(out) != 2 {
		t.Fatalf("parent: %q, %v", out, err)
	}
	if _, err := flow.Signal(ctx, e, "nobody", "go", "", nil); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("signal to an unknown run: %v, want ErrRunNotFound", err)
	}

	// Cancel a waiting run of shard 1, by ID, through the sharded engine.
	lone := idIn(t, e, 1, "lone")
	w, err := flow.Start(ctx, e, waiter, "", &flow.StartOptions{RunID: lone})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lone run waits", func() bool {
		info, err := e.Inspect(ctx, lone)
		return err == nil && info.Status == flow.StatusWaiting
	})
	if err := e.Cancel(ctx, lone); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Result(ctx); !errors.Is(err, flow.ErrCancelled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if err := e.Cancel(ctx, "nobody"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("cancel an unknown run: %v", err)
	}
	if h, err := e.History(ctx, customID); err != nil || len(h) == 0 {
		t.Fatalf("history of the custom child (not in its home shard): %d events, %v", len(h), err)
	}
}

// An operator's Resume and Skip reach a suspended run in shard 1.
func TestShardedSkipSuspendedRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openShards(t, shardPaths(t, 2), nil)
	stuck := flow.Step[int, int]{
		Name:       "stuck",
		Run:        func(_ context.Context, n int) (int, error) { return n, nil },
		Compensate: func(context.Context, int, int) error { return errors.New("cannot undo") },
	}
	wf := flow.Workflow[int, int]{Name: "unwinds", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.Do(wc, stuck, n); err != nil {
			return 0, err
		}
		return 0, flow.Permanent(errors.New("fail"))
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	id := idIn(t, e, 1, "unwind")
	r, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	var suspended *flow.SuspendedError
	if _, err := r.Result(ctx); !errors.As(err, &suspended) {
		t.Fatalf("run: %v, want suspended", err)
	}
	// Resume retries the compensation, which fails again.
	if err := e.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run suspended again", func() bool {
		h, err := e.History(ctx, id)
		resumed := false
		for _, ev := range h {
			resumed = resumed || ev.Kind == flow.EventRunResumed
		}
		info, _ := e.Inspect(ctx, id)
		return err == nil && resumed && info.Status == flow.StatusSuspended
	})
	if err := e.Resume(ctx, "nobody"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("resume an unknown run: %v", err)
	}
	if err := e.Skip(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Result(ctx); !errors.Is(err, flow.ErrRolledBack) {
		t.Fatalf("after Skip: %v, want rolled back", err)
	}
}

var shardJob = flow.Job[string]{Name: "shard-job", Handler: func(context.Context, string) error { return nil }}

// A unique key holds across shards: two starts with the same key and IDs
// of different shards make one run.
func TestShardedUniqueKeyHoldsAcrossShards(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openShards(t, shardPaths(t, 2), nil)
	flow.RegisterJob(e, shardJob)
	a, b := idIn(t, e, 0, "a"), idIn(t, e, 1, "b")
	first, err := flow.Enqueue(ctx, e, shardJob, "x", &flow.EnqueueOptions{RunID: a, UniqueKey: "only-one"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := flow.Enqueue(ctx, e, shardJob, "y", &flow.EnqueueOptions{RunID: b, UniqueKey: "only-one"})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Existing() || second.ID() != first.ID() {
		t.Fatalf("second start: run %s (existing %v), want the first, %s", second.ID(), second.Existing(), first.ID())
	}
	counts, err := e.CountRuns(ctx)
	if err != nil || counts[flow.StatusPending] != 1 {
		t.Fatalf("CountRuns = %v, %v; want one pending run", counts, err)
	}
	// The ID of the first run, with another unique key placed in the
	// other shard, is still the first run: the ID is an idempotency key.
	var other string
	for n := 0; other == ""; n++ {
		if k := fmt.Sprintf("other-%d", n); e.PlaceRun("", k) != e.PlaceRun("", "only-one") {
			other = k
		}
	}
	again, err := flow.Enqueue(ctx, e, shardJob, "z", &flow.EnqueueOptions{RunID: a, UniqueKey: other})
	if err != nil || !again.Existing() || again.ID() != a {
		t.Fatalf("start of ID %s with another key: %v, %v", a, again, err)
	}
	// By-ID calls find a run outside its ID's home shard.
	if info, err := e.Inspect(ctx, first.ID()); err != nil || info.UniqueKey != "only-one" {
		t.Fatalf("inspect %s: %+v, %v", first.ID(), info, err)
	}
}

// A transaction belongs to one file: the sharded engine refuses StartTx,
// a shard refuses a run of another shard, and the right shard records it.
func TestShardedStartTx(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	paths := shardPaths(t, 2)
	// The program's own pools, one per shard file (flowsqlite.NewShards).
	dbs := []*sql.DB{rawDB(t, paths[0]), rawDB(t, paths[1])}
	e, err := flowsqlite.NewShards(ctx, dbs, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	flow.Register(e, shardDouble)
	id := idIn(t, e, 1, "tx")
	tx, err := dbs[e.PlaceRun(id, "")].BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := flow.StartTx(ctx, e, tx, shardDouble, 1, &flow.StartOptions{RunID: id}); !errors.Is(err, flow.ErrSharded) {
		t.Fatalf("StartTx on the sharded engine: %v, want ErrSharded", err)
	}
	if _, err := flow.StartTx(ctx, e.Shard(0), tx, shardDouble, 1, &flow.StartOptions{RunID: id}); !errors.Is(err, flow.ErrShardSet) {
		t.Fatalf("StartTx on the wrong shard: %v, want ErrShardSet", err)
	}
	r, err := flow.StartTx(ctx, e.Shard(1), tx, shardDouble, 1, &flow.StartOptions{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := flow.StartTx(ctx, e.Shard(1), tx, shardDouble, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.PlaceRun(gen.ID(), ""); got != 1 {
		t.Fatalf("generated ID %s of shard 1 is placed in %d", gen.ID(), got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	startEngine(t, e)
	for _, r := range []*flow.Run[int]{r, gen} {
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := flow.StartManyTx(ctx, e, nil, shardDouble, []flow.StartItem[int]{{In: 1}}); !errors.Is(err, flow.ErrSharded) {
		t.Fatalf("StartManyTx on the sharded engine: %v", err)
	}
}

// Files that do not form the set they recorded are refused, and the set
// still opens as it was.
func TestShardSetMismatchIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paths := shardPaths(t, 3)
	e, err := flowsqlite.OpenShards(ctx, paths, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	flow.RegisterJob(e, shardJob)
	ids := []string{idIn(t, e, 0, "r"), idIn(t, e, 1, "r"), idIn(t, e, 2, "r")}
	for _, id := range ids {
		if _, err := flow.Enqueue(ctx, e, shardJob, id, &flow.EnqueueOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()

	extra := filepath.Join(t.TempDir(), "extra.db")
	for name, set := range map[string][]string{
		"two of three":    paths[:2],
		"reordered":       {paths[1], paths[0], paths[2]},
		"a file added":    append(slices.Clone(paths), extra),
		"a file replaced": {paths[0], paths[1], extra},
	} {
		if e, err := flowsqlite.OpenShards(ctx, set, testConfig(), nil); !errors.Is(err, flow.ErrShardSet) {
			if err == nil {
				e.Close()
			}
			t.Errorf("%s: %v, want ErrShardSet", name, err)
		}
	}
	if e, err := flowsqlite.Open(ctx, paths[1], testConfig(), nil); !errors.Is(err, flow.ErrShardSet) {
		if err == nil {
			e.Close()
		}
		t.Errorf("one shard opened alone: %v, want ErrShardSet", err)
	}
	// Reading one shard alone is fine.
	ro, err := flowsqlite.OpenReadOnly(ctx, paths[1], testConfig(), nil)
	if err != nil {
		t.Fatalf("read one shard: %v", err)
	}
	if _, err := ro.Inspect(ctx, ids[1]); err != nil {
		t.Fatalf("read one shard: %v", err)
	}
	ro.Close()

	e = openShards(t, paths, nil)
	for _, id := range ids {
		if _, err := e.Inspect(ctx, id); err != nil {
			t.Fatalf("after the refusals, run %s: %v", id, err)
		}
	}
	rs, err := flowsqlite.OpenShardsReadOnly(ctx, paths, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if list, err := rs.ListRuns(ctx, flow.RunFilter{}); err != nil || len(list) != 3 {
		t.Fatalf("read-only set lists %d runs, %v", len(list), err)
	}
}

// One file named twice is not a set.
func TestShardSetOfOneFileTwiceIsRefused(t *testing.T) {
	t.Parallel()
	path := shardPaths(t, 1)[0]
	for _, set := range [][]string{{path, path}, {path, filepath.Join(filepath.Dir(path), ".", filepath.Base(path))}} {
		if e, err := flowsqlite.OpenShards(context.Background(), set, testConfig(), nil); !errors.Is(err, flow.ErrShardSet) {
			if err == nil {
				e.Close()
			}
			t.Fatalf("one file twice: %v, want ErrShardSet", err)
		}
	}
	// Nothing was written: the file is a plain database.
	openSQLiteEngine(t, path, nil, nil)
}

// A file that holds runs cannot become a shard: its runs would not be
// where the set looks for them.
func TestShardSetStartsFromNewFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	paths := shardPaths(t, 2)
	plain := openSQLiteEngine(t, paths[0], nil, nil)
	flow.RegisterJob(plain, shardJob)
	if _, err := flow.Enqueue(ctx, plain, shardJob, "x", nil); err != nil {
		t.Fatal(err)
	}
	plain.Close()
	if e, err := flowsqlite.OpenShards(ctx, paths, testConfig(), nil); !errors.Is(err, flow.ErrShardSet) {
		if err == nil {
			e.Close()
		}
		t.Fatalf("a file with runs as shard 0: %v, want ErrShardSet", err)
	}
	// Still a plain database.
	openSQLiteEngine(t, paths[0], nil, nil)
}

// Schedules live in the shard their name hashes to; lists merge, and
// queue pauses apply to every shard.
func TestShardedSchedulesAndQueues(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openShards(t, shardPaths(t, 2), nil)
	flow.Register(e, shardDouble)
	names := []string{"a", "b", "c", "d", "e", "f"}
	for _, n := range names {
		if err := flow.Schedule(ctx, e, n, "@every 1h", shardDouble, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	list, err := e.Schedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list {
		got = append(got, s.Name)
	}
	if !slices.Equal(got, names) {
		t.Fatalf("Schedules = %v, want %v", got, names)
	}
	in0, _ := e.Shard(0).Schedules(ctx)
	in1, _ := e.Shard(1).Schedules(ctx)
	if len(in0) == 0 || len(in1) == 0 || len(in0)+len(in1) != len(names) {
		t.Fatalf("schedules per shard: %d and %d", len(in0), len(in1))
	}
	for _, n := range names {
		if err := e.PauseSchedule(ctx, n); err != nil {
			t.Fatal(err)
		}
		if s, err := e.LookupSchedule(ctx, n); err != nil || !s.Paused {
			t.Fatalf("schedule %s: %+v, %v", n, s, err)
		}
	}
	if err := e.PauseQueue(ctx, flow.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		stats, err := e.Shard(i).QueueStats(ctx)
		if err != nil || len(stats) != 1 || !stats[0].Paused {
			t.Fatalf("shard %d queue stats: %+v, %v", i, stats, err)
		}
	}
	// Definitions are stored in every shard.
	d := flow.StoredDefinition{Name: "def", Version: 1, Hash: "h1", Body: []byte(`{"name":"def"}`)}
	if _, err := e.PutDefinition(ctx, d); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if got, err := e.Shard(i).GetDefinition(ctx, "def", 1); err != nil || got.Hash != "h1" {
			t.Fatalf("definition in shard %d: %+v, %v", i, got, err)
		}
	}
	for _, err := range e.Changes(ctx, nil) {
		if !errors.Is(err, flow.ErrSharded) {
			t.Fatalf("Changes on a sharded engine: %v, want ErrSharded", err)
		}
	}
	for _, err := range e.Shard(1).Changes(ctx, nil) {
		if err != nil {
			t.Fatalf("Changes of shard 1: %v", err)
		}
	}
}

// A batch that fails in one shard names the item by its index in the
// caller's slice, not in the shard's part of it.
func TestShardedBatchErrorNamesTheCallersItem(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openShards(t, shardPaths(t, 2), nil)
	flow.Register(e, shardDouble)
	flow.RegisterJob(e, shardJob)
	taken := idIn(t, e, 1, "taken")
	if _, err := flow.Enqueue(ctx, e, shardJob, "x", &flow.EnqueueOptions{RunID: taken}); err != nil {
		t.Fatal(err)
	}
	items := make([]flow.StartItem[int], 10)
	for i := range items {
		items[i] = flow.StartItem[int]{In: i, Opts: &flow.StartOptions{RunID: idIn(t, e, i%2, fmt.Sprintf("item%d", i))}}
	}
	items[7].Opts.RunID = taken // item 7 is in shard 1, the 4th of its part
	_, err := flow.StartMany(ctx, e, shardDouble, items)
	var ie *flow.ItemError
	if !errors.As(err, &ie) || ie.Index != 7 || !errors.Is(err, flow.ErrRunExists) {
		t.Fatalf("StartMany with a taken ID: %v (item %+v), want item 7, ErrRunExists", err, ie)
	}
	if !strings.Contains(err.Error(), "item 7") {
		t.Fatalf("the error does not name item 7: %v", err)
	}
}

// Dead letters of every shard are listed, requeued and purged through the
// sharded engine.
func TestShardedDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openShards(t, shardPaths(t, 2), nil)
	failing := flow.Job[int]{Name: "failing", Retry: &flow.RetryPolicy{MaxAttempts: 1},
		Handler: func(context.Context, int) error { return errors.New("no") }}
	flow.RegisterJob(e, failing)
	startEngine(t, e)
	var ids []string
	for i := range 6 {
		id := idIn(t, e, i%2, fmt.Sprintf("dead%d", i))
		ids = append(ids, id)
		if _, err := flow.Enqueue(ctx, e, failing, i, &flow.EnqueueOptions{RunID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var dead []flow.RunInfo
	eventually(t, "six dead letters", func() bool {
		dead, _ = e.DeadLetters(ctx, flow.DeadLetterFilter{})
		return len(dead) == 6
	})
	if !slices.IsSortedFunc(dead, func(a, b flow.RunInfo) int { return b.FinishedAt.Compare(a.FinishedAt) }) {
		t.Fatal("dead letters are not the most recently failed first")
	}
	if few, err := e.DeadLetters(ctx, flow.DeadLetterFilter{Limit: 2}); err != nil || len(few) != 2 {
		t.Fatalf("DeadLetters limit 2: %d, %v", len(few), err)
	}
	next, err := e.Requeue(ctx, ids[1]) // shard 1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Shard(1).Inspect(ctx, next); err != nil {
		t.Fatalf("requeued run %s is not in its dead letter's shard: %v", next, err)
	}
	if err := e.PurgeDeadRuns(ctx, ids[2], ids[3]); err != nil {
		t.Fatal(err)
	}
	if err := e.PurgeDeadRuns(ctx, ids[4], "nobody"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("purge with an unknown run: %v", err)
	}
	if _, err := e.Inspect(ctx, ids[4]); err != nil {
		t.Fatalf("a refused purge deleted %s: %v", ids[4], err)
	}
	eventually(t, "the requeued run failed again", func() bool {
		info, err := e.Inspect(ctx, next)
		return err == nil && info.Status == flow.StatusFailed
	})
	n, err := e.PurgeDead(ctx, flow.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 { // ids[0], ids[4], ids[5] and the requeued run
		t.Fatalf("PurgeDead deleted %d dead letters, want 4", n)
	}
}
