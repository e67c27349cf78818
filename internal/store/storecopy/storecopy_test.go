package storecopy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/pgtest"
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

func register(e *flow.Engine) {
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := e.Inspect(context.Background(), id)
		if err != nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		if info.Status == want {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s (%s): status %s, want %s", id, info.Workflow, info.Status, want)
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
	path := filepath.Join(t.TempDir(), "src.db")
	e, err := flowsqlite.Open(ctx, path, config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
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
	start("pending", okWF, 3, "held")
	start("parent", parentWF, 1, "")
	ids["child"] = "child-of-parent"
	awaitStatus(t, e, ids["completed"], flow.StatusCompleted)
	awaitStatus(t, e, ids["failed"], flow.StatusFailed)
	awaitStatus(t, e, ids["suspended"], flow.StatusSuspended)
	awaitStatus(t, e, ids["waiting"], flow.StatusWaiting)
	awaitStatus(t, e, ids["sleeping"], flow.StatusWaiting)
	awaitStatus(t, e, ids["child"], flow.StatusWaiting)
	awaitStatus(t, e, ids["parent"], flow.StatusWaiting)
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
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return path, ids
}

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
	if _, err := dst.CopyIn(ctx, snap, func(storecopy.Counts) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("copy with a failing check: %v", err)
	}
	if _, err := dst.CopyIn(ctx, nil, func(got storecopy.Counts) error {
		if got != (storecopy.Counts{}) {
			t.Errorf("schema after a rolled back copy: %+v", got)
		}
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("schema after a rolled back copy: %v", err)
	}

	counts, err := storecopy.Copy(ctx, src, dst, storecopy.Options{})
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	if counts != srcCounts {
		t.Fatalf("copied %+v, source holds %+v", counts, srcCounts)
	}
	if counts.Runs != 9 || counts.Schedules != 1 || counts.Queues != 1 || counts.Workflows != 6 || counts.Signals < 1 || counts.Definitions != 1 {
		t.Fatalf("unexpected counts %+v", counts)
	}

	// A second copy into the same schema is refused and changes nothing.
	if _, err := storecopy.Copy(ctx, src, dst, storecopy.Options{}); !errors.Is(err, storecopy.ErrTargetNotEmpty) {
		t.Fatalf("second copy: %v, want ErrTargetNotEmpty", err)
	}
	again, err := dst.CopyIn(ctx, nil, nil)
	if !errors.Is(err, storecopy.ErrTargetNotEmpty) || again != (storecopy.Counts{}) {
		t.Fatalf("copy into a filled schema: %+v, %v", again, err)
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
		if got.Status != w.Status || string(got.Output) != string(w.Output) || got.Error != w.Error ||
			got.Queue != w.Queue || got.ParentID != w.ParentID || got.RequeuedAs != w.RequeuedAs || got.RequeuedFrom != w.RequeuedFrom ||
			!got.CreatedAt.Equal(w.CreatedAt) {
			t.Errorf("%s: postgres %+v, sqlite %+v", name, got, w)
		}
		if !reflect.DeepEqual(got.Steps, w.Steps) {
			t.Errorf("%s steps: postgres %+v, sqlite %+v", name, got.Steps, w.Steps)
		}
		if k := historyKinds(t, pg, id); !reflect.DeepEqual(k, wantKinds[name]) {
			t.Errorf("%s history: postgres %v, sqlite %v", name, k, wantKinds[name])
		}
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
	time.Sleep(100 * time.Millisecond)
	if info, err := pg.Inspect(ctx, ids["pending"]); err != nil || info.Status != flow.StatusPending {
		t.Errorf("run in the paused queue: %v, %v", info.Status, err)
	}
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
