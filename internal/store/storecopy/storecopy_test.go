package storecopy_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/flow/flowtype"
	"github.com/flowlite/flowlite/internal/pgtest"
	"github.com/flowlite/flowlite/internal/store"
	"github.com/flowlite/flowlite/internal/store/pgstore"
	"github.com/flowlite/flowlite/internal/store/sqlitestore"
	"github.com/flowlite/flowlite/internal/store/storecopy"
)

var double = flow.Step[int, int]{
	Name: "double",
	Run:  func(_ context.Context, n int) (int, error) { return 2 * n, nil },
}

var reserve = flow.Step[int, int]{
	Name:       "reserve",
	Run:        func(_ context.Context, n int) (int, error) { return n + 1, nil },
	Compensate: func(context.Context, int, int) error { return nil },
}

var reserveStuck = flow.Step[int, int]{
	Name: "reserve_stuck",
	Run:  func(_ context.Context, n int) (int, error) { return n + 1, nil },
	Compensate: func(context.Context, int, int) error {
		return errors.New("release refused")
	},
	CompensateRetry: &flow.RetryPolicy{MaxAttempts: 1},
}

var charge = flow.Step[int, int]{
	Name: "charge",
	Run: func(context.Context, int) (int, error) {
		return 0, flow.Permanent(errors.New("card declined"))
	},
}

var okWF = flow.Workflow[int, int]{Name: "ok", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	return flow.Do(wc, double, n)
}}

var sagaWF = flow.Workflow[int, int]{Name: "saga", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	if _, err := flow.Do(wc, reserve, n); err != nil {
		return 0, err
	}
	return flow.Do(wc, charge, n)
}}

var stuckWF = flow.Workflow[int, int]{Name: "stuck", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	if _, err := flow.Do(wc, reserveStuck, n); err != nil {
		return 0, err
	}
	return flow.Do(wc, charge, n)
}}

var waitWF = flow.Workflow[int, int]{Name: "wait", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	m, err := flow.Receive[int](wc, "go", time.Hour)
	if err != nil {
		return 0, err
	}
	return flow.Do(wc, double, n+m)
}}

var sleepWF = flow.Workflow[int, int]{Name: "sleep", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	if err := flow.Sleep(wc, time.Hour); err != nil {
		return 0, err
	}
	return n, nil
}}

// parentWF waits for a child that waits for a signal.
var parentWF = flow.Workflow[int, int]{Name: "parent", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	return flow.Call(wc, waitWF, n, &flow.ChildOptions{RunID: "child-of-parent"})
}}

// The steps below count their executions in execs. Those marked to stall
// block while stall is set, until their engine is closed: source takes its
// file while they are in flight, as a process killed mid-step leaves it.
var (
	execs tally
	stall atomic.Bool
)

// tally counts executions by step (compensations as "undo <step>").
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tally) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n = nil
}

func (c *tally) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *tally) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// enter counts an execution of key and, when stalls and stall is set,
// blocks until ctx ends.
func enter(ctx context.Context, key string, stalls bool) error {
	execs.mu.Lock()
	if execs.n == nil {
		execs.n = map[string]int{}
	}
	execs.n[key]++
	execs.mu.Unlock()
	if stalls && stall.Load() {
		<-ctx.Done()
		return context.Cause(ctx)
	}
	return nil
}

// pack checkpoints before the copy; ship is in flight when it is taken.
var pack = flow.Step[int, int]{Name: "pack", Run: func(ctx context.Context, n int) (int, error) {
	return n + 1, enter(ctx, "pack", false)
}}

var ship = flow.Step[int, int]{Name: "ship", Run: func(ctx context.Context, n int) (int, error) {
	return n * 10, enter(ctx, "ship", true)
}}

// resumeWF is left running, in ship, by an engine that vanished.
var resumeWF = flow.Workflow[int, int]{Name: "resume", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	p, err := flow.Do(wc, pack, n)
	if err != nil {
		return 0, err
	}
	return flow.Do(wc, ship, p)
}}

// book, hold and pay roll back: pay fails for good, hold's compensation
// (run first) completes before the copy, book's is in flight when it is
// taken.
var book = flow.Step[int, int]{
	Name: "book",
	Run:  func(ctx context.Context, n int) (int, error) { return n + 1, enter(ctx, "book", false) },
	Compensate: func(ctx context.Context, _, _ int) error {
		return enter(ctx, "undo book", true)
	},
}

var hold = flow.Step[int, int]{
	Name: "hold",
	Run:  func(ctx context.Context, n int) (int, error) { return n + 2, enter(ctx, "hold", false) },
	Compensate: func(ctx context.Context, _, _ int) error {
		return enter(ctx, "undo hold", false)
	},
}

var pay = flow.Step[int, int]{Name: "pay", Run: func(ctx context.Context, n int) (int, error) {
	if err := enter(ctx, "pay", false); err != nil {
		return 0, err
	}
	return 0, flow.Permanent(errors.New("payment refused"))
}}

// rollbackWF is left compensating, in book's compensation, by an engine
// that vanished.
var rollbackWF = flow.Workflow[int, int]{Name: "rollback", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	if _, err := flow.Do(wc, book, n); err != nil {
		return 0, err
	}
	if _, err := flow.Do(wc, hold, n); err != nil {
		return 0, err
	}
	return flow.Do(wc, pay, n)
}}

// lock is compensated when the run that waits after it is cancelled.
var lock = flow.Step[int, int]{
	Name: "lock",
	Run:  func(ctx context.Context, n int) (int, error) { return n, enter(ctx, "lock", false) },
	Compensate: func(ctx context.Context, _, _ int) error {
		return enter(ctx, "undo lock", false)
	},
}

// cancelWF is cancelled while it waits, after lock completed.
var cancelWF = flow.Workflow[int, int]{Name: "cancel", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	if _, err := flow.Do(wc, lock, n); err != nil {
		return 0, err
	}
	return flow.Receive[int](wc, "go", time.Hour)
}}

// emit writes n tokens to the open stream "tokens" and a line to "log",
// from a step's body (buffered writes, recorded with the step's attempt).
var emit = flow.Step[int, int]{Name: "emit", Run: func(ctx context.Context, n int) (int, error) {
	for i := range n {
		if err := flow.WriteStreamCtx(ctx, "tokens", fmt.Sprintf("t%d", i)); err != nil {
			return 0, err
		}
	}
	return n, flow.WriteStreamCtx(ctx, "log", "emitted")
}}

// streamWF leaves a closed stream ("log", written by the body and a step)
// and an open one ("tokens") behind while it waits for "more"; then it
// appends to "tokens" again, which on the copy's target must take the
// position after the copied messages.
var streamWF = flow.Workflow[int, int]{Name: "streams", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
	if _, err := flow.WriteStream(wc, "log", "begin"); err != nil {
		return 0, err
	}
	if _, err := flow.Do(wc, emit, n); err != nil {
		return 0, err
	}
	if _, err := flow.WriteStream(wc, "log", "end"); err != nil {
		return 0, err
	}
	if err := flow.CloseStream(wc, "log"); err != nil {
		return 0, err
	}
	m, err := flow.Receive[int](wc, "more", time.Hour)
	if err != nil {
		return 0, err
	}
	if _, err := flow.WriteStream(wc, "tokens", fmt.Sprintf("after-%d", m)); err != nil {
		return 0, err
	}
	return n + m, nil
}}

func register(e *flow.Engine) {
	flow.Register(e, streamWF)
	flow.Register(e, resumeWF)
	flow.Register(e, rollbackWF)
	flow.Register(e, cancelWF)
	flow.Register(e, parentWF)
	flow.Register(e, okWF)
	flow.Register(e, sagaWF)
	flow.Register(e, stuckWF)
	flow.Register(e, waitWF)
	flow.Register(e, sleepWF)
}

func config() *flow.Config {
	return &flow.Config{
		Queues:       map[string]flow.QueueConfig{flow.DefaultQueue: {}, "held": {}},
		PollInterval: 20 * time.Millisecond,
	}
}

func awaitStatus(t *testing.T, e *flow.Engine, id string, want flow.RunStatus) flow.RunInfo {
	t.Helper()
	return awaitRun(t, e, id, "status "+string(want), func(info flow.RunInfo) bool { return info.Status == want })
}

// awaitSteps polls until the run's step records satisfy ok.
func awaitSteps(t *testing.T, e *flow.Engine, id, what string, ok func(map[string]flow.StepRecord) bool) {
	t.Helper()
	awaitRun(t, e, id, what, func(info flow.RunInfo) bool {
		steps := map[string]flow.StepRecord{}
		for _, s := range info.Steps {
			steps[s.Name] = s
		}
		return ok(steps)
	})
}

// awaitRun polls the run until ok holds, for at most 20s, and returns it.
// A run not recorded yet (a child its parent's execution is to start) is
// waited for too.
func awaitRun(t *testing.T, e *flow.Engine, id, what string, ok func(flow.RunInfo) bool) flow.RunInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.Inspect(context.Background(), id)
		switch {
		case errors.Is(err, flow.ErrRunNotFound) && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond)
			continue
		case err != nil:
			t.Fatalf("inspect %s: %v", id, err)
		}
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s (%s): %s never came: status %s, steps %+v", id, info.Workflow, what, info.Status, info.Steps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func historyKinds(t *testing.T, e *flow.Engine, id string) []string {
	t.Helper()
	events, err := e.History(context.Background(), id)
	if err != nil {
		t.Fatalf("history %s: %v", id, err)
	}
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Kind+"/"+ev.Step)
	}
	return kinds
}

// source builds a SQLite database with runs in every state and returns its
// path and the IDs of its runs by name.
func source(t *testing.T) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := config()
	cfg.WorkerID = vanished
	e, err := flowsqlite.Open(ctx, filepath.Join(dir, "engine.db"), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	execs.reset()
	register(e)
	if err := e.PauseQueue(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	if err := flow.Schedule(ctx, e, "nightly", "0 3 * * *", okWF, 7, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	start := func(name string, wf flow.Workflow[int, int], n int, queue string) {
		r, err := flow.Start(ctx, e, wf, n, &flow.StartOptions{Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = r.ID()
	}
	start("completed", okWF, 21, "")
	start("failed", sagaWF, 1, "")
	start("suspended", stuckWF, 1, "")
	start("waiting", waitWF, 10, "")
	start("sleeping", sleepWF, 1, "")
	// A pending run with start options: a timeout and context values.
	pending, err := flow.Start(flow.WithValue(ctx, "tenant", "acme"), e, okWF, 3, &flow.StartOptions{Queue: "held", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ids["pending"] = pending.ID()
	// A debounced run, merged once: the copy carries its key's record.
	debounce := &flow.Debounce{Key: "k", Window: time.Hour}
	for n := 4; n <= 5; n++ {
		debounced, err := flow.Start(ctx, e, okWF, n, &flow.StartOptions{Queue: "held", Debounce: debounce})
		if err != nil {
			t.Fatal(err)
		}
		ids["debounced"] = debounced.ID()
	}
	start("parent", parentWF, 1, "")
	ids["child"] = "child-of-parent"
	start("streams", streamWF, 4, "")
	awaitStatus(t, e, ids["completed"], flow.StatusCompleted)
	awaitStatus(t, e, ids["failed"], flow.StatusFailed)
	awaitStatus(t, e, ids["suspended"], flow.StatusSuspended)
	awaitStatus(t, e, ids["waiting"], flow.StatusWaiting)
	awaitStatus(t, e, ids["sleeping"], flow.StatusWaiting)
	awaitStatus(t, e, ids["child"], flow.StatusWaiting)
	awaitStatus(t, e, ids["parent"], flow.StatusWaiting)
	awaitStatus(t, e, ids["streams"], flow.StatusWaiting)
	// A signal nobody waits for yet stays unconsumed.
	if _, err := flow.Signal(ctx, e, ids["sleeping"], "later", 1, nil); err != nil {
		t.Fatal(err)
	}
	requeued, err := e.Requeue(ctx, ids["failed"])
	if err != nil {
		t.Fatal(err)
	}
	ids["requeued"] = requeued
	awaitStatus(t, e, requeued, flow.StatusFailed)
	// A stored workflow definition (flow/flowdef) goes along.
	if _, err := e.PutDefinition(ctx, copiedDefinition); err != nil {
		t.Fatal(err)
	}
	// A run cancelled while it waits, after a step whose compensation the
	// cancellation ran.
	start("cancelled", cancelWF, 5, "")
	awaitStatus(t, e, ids["cancelled"], flow.StatusWaiting)
	if err := e.Cancel(ctx, ids["cancelled"]); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, ids["cancelled"], flow.StatusCancelled)

	// A running and a compensating run whose engine vanishes mid-step: their
	// bodies stall, and the source is the database as it stands meanwhile
	// (Backup reads one snapshot of it), which is what the file holds when
	// the engine's process is killed at that moment: both runs leased by
	// it, their leases unexpired, its report saying it is alive. Only then
	// is the engine closed, on its own file.
	stall.Store(true)
	defer stall.Store(false)
	start("running", resumeWF, 4, "")
	start("compensating", rollbackWF, 1, "")
	awaitSteps(t, e, ids["running"], "pack checkpointed, ship in flight", func(s map[string]flow.StepRecord) bool {
		return s["pack"].Status == "completed" && s["ship"].Status == "running" && execs.get("ship") == 1
	})
	awaitSteps(t, e, ids["compensating"], "hold compensated, book's compensation in flight", func(s map[string]flow.StepRecord) bool {
		return s["hold"].Compensation == "completed" && s["book"].Compensation == "running" && execs.get("undo book") == 1
	})
	awaitStatus(t, e, ids["running"], flow.StatusRunning)
	awaitStatus(t, e, ids["compensating"], flow.StatusCompensating)
	path := filepath.Join(dir, "src.db")
	if err := e.Backup(ctx, path); err != nil {
		t.Fatal(err)
	}
	e.Close()
	return path, ids
}

// vanished is the worker ID of the engine source leaves its runs leased by.
const vanished = "vanished-engine"

var copiedDefinition = flow.StoredDefinition{
	Name: "etl", Version: 3, Hash: "h-etl-3", Body: []byte("name: etl\nversion: 3\n"), File: "etl.yaml",
}

func TestCopyToPostgres(t *testing.T) {
	if os.Getenv("FLOWLITE_PG_TEST") == "" && !pgtest.Postgres() {
		t.Skip("set FLOWLITE_PG_TEST=1 to run against PostgreSQL")
	}
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	path, ids := source(t)
	before := execs.snapshot()
	if want := map[string]int{
		"lock": 1, "undo lock": 1, "pack": 1, "ship": 1,
		"book": 1, "hold": 1, "pay": 1, "undo hold": 1, "undo book": 1,
	}; !reflect.DeepEqual(before, want) {
		t.Fatalf("executions on sqlite: %v, want %v", before, want)
	}

	// What the runs look like on SQLite.
	sq, err := flowsqlite.OpenReadOnly(ctx, path, config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]flow.RunInfo{}
	wantKinds := map[string][]string{}
	for name, id := range ids {
		if want[name], err = sq.Inspect(ctx, id); err != nil {
			t.Fatal(err)
		}
		wantKinds[name] = historyKinds(t, sq, id)
	}
	sq.Close()

	src, err := sqlitestore.OpenReadOnly(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	// The vanished engine's runs hold its lease on SQLite, and its report
	// says it is alive: the copy refuses the file until the report is stale.
	leased := map[string]store.Run{}
	for _, name := range []string{"running", "compensating"} {
		r, err := src.Reader().RunGet(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		if r.LeaseOwner != vanished || r.LeaseExpiresAt <= r.UpdatedAt || r.Fence < 1 {
			t.Fatalf("%s on sqlite: lease %q until %d (updated %d), fence %d; want the vanished engine's live lease",
				name, r.LeaseOwner, r.LeaseExpiresAt, r.UpdatedAt, r.Fence)
		}
		leased[name] = r
	}
	reports, err := src.Reader().EngineReportList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var liveUntil int64
	for _, r := range reports {
		if r.Owner == vanished && r.StoppedAt == 0 {
			liveUntil = r.LiveUntil
		}
	}
	if liveUntil == 0 {
		t.Fatalf("no live report of the vanished engine: %+v", reports)
	}
	if _, err := storecopy.Copy(ctx, src, dst, storecopy.Options{}); !errors.Is(err, storecopy.ErrLiveEngine) {
		t.Fatalf("copy while the vanished engine's report is fresh: %v, want ErrLiveEngine", err)
	}
	stale := storecopy.Options{Now: func() time.Time { return time.UnixMilli(liveUntil + 1) }}
	_, srcCounts, err := src.CopyOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A copy whose check fails writes nothing.
	snap, _, err := src.CopyOut(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused by the test")
	if _, err := dst.CopyIn(ctx, snap, func(store.CopyCounts) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("copy with a failing check: %v", err)
	}
	if _, err := dst.CopyIn(ctx, nil, func(got store.CopyCounts) error {
		if got != (store.CopyCounts{}) {
			t.Errorf("schema after a rolled back copy: %+v", got)
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("schema after a rolled back copy: %v", err)
	}

	counts, err := storecopy.Copy(ctx, src, dst, stale)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if counts != srcCounts {
		t.Fatalf("copied %+v, source holds %+v", counts, srcCounts)
	}
	if counts.Runs != 14 || counts.Schedules != 1 || counts.Queues != 1 || counts.Workflows != 10 || counts.Signals < 1 || counts.Definitions != 1 || counts.Debounces != 1 ||
		counts.Streams != 2 || counts.StreamChunks != 4 { // 7 messages: 3 body writes, and a step's 1 and 4
		t.Fatalf("unexpected counts %+v", counts)
	}

	// A second copy into the same schema is refused and changes nothing.
	if _, err := storecopy.Copy(ctx, src, dst, stale); !errors.Is(err, pgstore.ErrCopyTargetNotEmpty) {
		t.Fatalf("second copy: %v, want ErrTargetNotEmpty", err)
	}
	again, err := dst.CopyIn(ctx, nil, nil)
	if !errors.Is(err, pgstore.ErrCopyTargetNotEmpty) || again != (store.CopyCounts{}) {
		t.Fatalf("copy into a filled schema: %+v, %v", again, err)
	}

	// The copy hands the leased runs out afresh: no lease, the fence and
	// first start kept, running back to pending, compensating as it was.
	for name, status := range map[string]flowtype.RunStatus{"running": flowtype.StatusPending, "compensating": flowtype.StatusCompensating} {
		r, err := dst.Reader().RunGet(ctx, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != status || r.LeaseOwner != "" || r.LeaseExpiresAt != 0 || r.Fence != leased[name].Fence || r.StartedAt != leased[name].StartedAt {
			t.Errorf("%s on postgres: status %s, lease %q until %d, fence %d, started %d; want %s, no lease, fence %d, started %d",
				name, r.Status, r.LeaseOwner, r.LeaseExpiresAt, r.Fence, r.StartedAt, status, leased[name].Fence, leased[name].StartedAt)
		}
	}

	// Every stream row (length, closing time) and message (position,
	// value, time, writer) is on PostgreSQL as it was on SQLite.
	wantStreams, wantMessages := streamRows(t, src.Reader(), ids["streams"])
	if len(wantStreams) != 2 || wantStreams[0].Name != "log" || wantStreams[0].ClosedAt == 0 || wantStreams[1].ClosedAt != 0 || len(wantMessages) != 7 {
		t.Fatalf("streams on sqlite: %+v with %d messages, want log closed and tokens open, 7 messages", wantStreams, len(wantMessages))
	}
	gotStreams, gotMessages := streamRows(t, dst.Reader(), ids["streams"])
	if !reflect.DeepEqual(gotStreams, wantStreams) {
		t.Errorf("streams on postgres: %+v, sqlite %+v", gotStreams, wantStreams)
	}
	if !reflect.DeepEqual(gotMessages, wantMessages) {
		t.Errorf("stream messages on postgres:\n%+v\nsqlite:\n%+v", gotMessages, wantMessages)
	}

	pg, err := flowpg.Open(ctx, dsn, config(), &flowpg.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	register(pg)
	def, err := pg.GetDefinition(ctx, copiedDefinition.Name, copiedDefinition.Version)
	if err != nil || def.Hash != copiedDefinition.Hash || string(def.Body) != string(copiedDefinition.Body) || def.File != copiedDefinition.File {
		t.Errorf("definition on postgres: %+v, %v", def, err)
	}
	for name, id := range ids {
		got, err := pg.Inspect(ctx, id)
		if err != nil {
			t.Fatalf("%s on postgres: %v", name, err)
		}
		w := want[name]
		if name == "running" {
			w.Status = flow.StatusPending // its lease released by the copy
		}
		if got.Status != w.Status || string(got.Output) != string(w.Output) || got.Error != w.Error ||
			got.Queue != w.Queue || got.ParentID != w.ParentID || got.RequeuedAs != w.RequeuedAs || got.RequeuedFrom != w.RequeuedFrom ||
			!got.CreatedAt.Equal(w.CreatedAt) || got.Timeout != w.Timeout || got.Detached != w.Detached || !maps.Equal(got.Values, w.Values) {
			t.Errorf("%s: postgres %+v, sqlite %+v", name, got, w)
		}
		if !reflect.DeepEqual(got.Steps, w.Steps) {
			t.Errorf("%s steps: postgres %+v, sqlite %+v", name, got.Steps, w.Steps)
		}
		if k := historyKinds(t, pg, id); !reflect.DeepEqual(k, wantKinds[name]) {
			t.Errorf("%s history: postgres %v, sqlite %v", name, k, wantKinds[name])
		}
	}
	if p := want["pending"]; p.Timeout != time.Minute || p.Values["tenant"] != "acme" {
		t.Errorf("pending run on sqlite: timeout %s, values %v; the start options the copy should carry", p.Timeout, p.Values)
	}
	if want["failed"].RequeuedAs != ids["requeued"] {
		t.Errorf("dead letter requeue link: %q, want %q", want["failed"].RequeuedAs, ids["requeued"])
	}
	dead, err := pg.DeadLetters(ctx, flow.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != ids["requeued"] {
		t.Errorf("dead letters on postgres: %+v", dead)
	}

	// The waiting run resumes on PostgreSQL when signalled; the run in the
	// paused queue stays pending.
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer pg.Stop(ctx)
	if _, err := flow.Signal(ctx, pg, ids["waiting"], "go", 5, nil); err != nil {
		t.Fatal(err)
	}
	done := awaitStatus(t, pg, ids["waiting"], flow.StatusCompleted)
	if string(done.Output) != "30" {
		t.Errorf("resumed run output %s, want 30", done.Output)
	}
	// So does the child a parent waits for, and then the parent.
	if _, err := flow.Signal(ctx, pg, ids["child"], "go", 2, nil); err != nil {
		t.Fatal(err)
	}
	if p := awaitStatus(t, pg, ids["parent"], flow.StatusCompleted); string(p.Output) != "6" {
		t.Errorf("parent output %s, want 6", p.Output)
	}
	if want["child"].ParentID != ids["parent"] {
		t.Errorf("child's parent on sqlite: %q", want["child"].ParentID)
	}
	// The stream run goes on where it stood: emit, checkpointed on SQLite,
	// does not write its tokens again, the next message takes the position
	// after the copied ones, and the closed stream stays closed.
	if _, err := flow.Signal(ctx, pg, ids["streams"], "more", 3, nil); err != nil {
		t.Fatal(err)
	}
	if r := awaitStatus(t, pg, ids["streams"], flow.StatusCompleted); string(r.Output) != "7" {
		t.Errorf("stream run output %s, want 7", r.Output)
	}
	tokens, err := flow.StreamMessages[string](ctx, pg, ids["streams"], "tokens", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, m := range tokens {
		if m.Position != int64(i) {
			t.Errorf("tokens on postgres: message %q at position %d, want %d", m.Value, m.Position, i)
		}
		got = append(got, m.Value)
	}
	if want := "t0 t1 t2 t3 after-3"; strings.Join(got, " ") != want {
		t.Errorf("tokens on postgres: %q, want %q", strings.Join(got, " "), want)
	}
	if log, err := flow.StreamMessages[string](ctx, pg, ids["streams"], "log", 0); err != nil || len(log) != 3 {
		t.Errorf("log on postgres: %+v, %v; want the 3 copied messages", log, err)
	}
	if ss, err := flow.Streams(ctx, pg, ids["streams"]); err != nil || len(ss) != 2 ||
		ss[0] != (flow.StreamInfo{Name: "log", Length: 3, Closed: true}) || ss[1] != (flow.StreamInfo{Name: "tokens", Length: 5, Closed: false}) {
		t.Errorf("streams on postgres after the run went on: %+v, %v", ss, err)
	}
	time.Sleep(100 * time.Millisecond)
	if info, err := pg.Inspect(ctx, ids["pending"]); err != nil || info.Status != flow.StatusPending {
		t.Errorf("run in the paused queue: %v, %v", info.Status, err)
	}

	// The runs of the vanished engine are taken over. The running run
	// completes, its history going on from where it stood.
	if r := awaitStatus(t, pg, ids["running"], flow.StatusCompleted); string(r.Output) != "50" {
		t.Errorf("running run output %s, want 50", r.Output)
	}
	// The compensating run finishes rolling back: every completed step is
	// compensated, once.
	rb := awaitStatus(t, pg, ids["compensating"], flow.StatusFailed)
	if !strings.Contains(rb.Error, "payment refused") {
		t.Errorf("rolled back run's error %q", rb.Error)
	}
	for _, st := range rb.Steps {
		if (st.Name == "book" || st.Name == "hold") && st.Compensation != "completed" {
			t.Errorf("rolled back run: step %s compensation %s (%s)", st.Name, st.Compensation, st.CompensationError)
		}
	}
	for name, once := range map[string][]string{
		"running":      {flow.EventStepCompleted + "/pack", flow.EventStepCompleted + "/ship", flow.EventRunCompleted + "/"},
		"compensating": {flow.EventCompensationCompleted + "/hold", flow.EventCompensationCompleted + "/book", flow.EventRunFailed + "/"},
	} {
		k := historyKinds(t, pg, ids[name])
		if len(k) < len(wantKinds[name]) || !reflect.DeepEqual(k[:len(wantKinds[name])], wantKinds[name]) {
			t.Errorf("%s history on postgres does not go on from sqlite's:\n%v\n%v", name, k, wantKinds[name])
		}
		for _, kind := range once {
			if n := countOf(k, kind); n != 1 {
				t.Errorf("%s history: %d × %s, want 1: %v", name, n, kind, k)
			}
		}
	}
	// On PostgreSQL only what was in flight ran again: ship and book's
	// compensation. Not pack, checkpointed before the copy, nor hold's
	// compensation, completed before it, nor anything of the cancelled run.
	ran := map[string]int{}
	for key, n := range execs.snapshot() {
		if d := n - before[key]; d != 0 {
			ran[key] = d
		}
	}
	if want := map[string]int{"ship": 1, "undo book": 1}; !reflect.DeepEqual(ran, want) {
		t.Errorf("executions on postgres: %v, want %v", ran, want)
	}
	// The cancelled run stays as it was.
	c, err := pg.Inspect(ctx, ids["cancelled"])
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != flow.StatusCancelled || !reflect.DeepEqual(c.Steps, want["cancelled"].Steps) || !c.FinishedAt.Equal(want["cancelled"].FinishedAt) {
		t.Errorf("cancelled run on postgres: %+v, sqlite %+v", c, want["cancelled"])
	}
	if k := historyKinds(t, pg, ids["cancelled"]); !reflect.DeepEqual(k, wantKinds["cancelled"]) {
		t.Errorf("cancelled run's history on postgres: %v, sqlite %v", k, wantKinds["cancelled"])
	}
}

// streamRows returns the stream rows of run id and all their messages, as
// the store holds them.
func streamRows(t *testing.T, r store.Reader, id string) ([]store.Stream, []store.StreamMessage) {
	t.Helper()
	ctx := context.Background()
	ss, err := r.StreamList(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []store.StreamMessage
	for _, s := range ss {
		m, err := r.StreamRead(ctx, id, s.Name, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m...)
	}
	return ss, msgs
}

func countOf(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}

// TestCopyRefusesLiveEngine needs no PostgreSQL: the check comes first.
func TestCopyRefusesLiveEngine(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "live.db")
	e, err := flowsqlite.Open(ctx, path, config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	register(e)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	src, err := sqlitestore.OpenReadOnly(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = storecopy.Copy(ctx, src, nil, storecopy.Options{})
		if errors.Is(err, storecopy.ErrLiveEngine) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.Is(err, storecopy.ErrLiveEngine) {
		t.Fatalf("copy with a live engine: %v, want ErrLiveEngine", err)
	}
}
