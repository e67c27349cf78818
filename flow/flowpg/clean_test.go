package flowpg_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// Deleting finished runs takes everything that names them, in every table
// (one statement per table, by the runs table's delete trigger: migration
// 00012_runs_cascade.sql): steps, history, signals, streams and their
// chunks, execution numbers, unique holds and debounces; and a run whose
// parent was deleted loses its parent_id. The runs cover each: children,
// a signal, streams from the body and a step, a continue-as-new, a unique
// key and a debounced start.
func TestCleanLeavesNothingOfDeletedRuns(t *testing.T) {
	t.Parallel()
	dsn, s := schema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	e, err := flowpg.Open(ctx, dsn, &flow.Config{PollInterval: 20 * time.Millisecond, CleanInterval: -1,
		Retention: flow.Retention{Completed: time.Millisecond}}, &flowpg.Options{Schema: s, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tokens := flow.Step[int, int]{Name: "tokens", Run: func(ctx context.Context, n int) (int, error) {
		for i := range n {
			if err := flow.WriteStreamCtx(ctx, "tokens", i); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
	child := flow.Workflow[int, int]{Name: "clean_child", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, double, n)
	}}
	parent := flow.Workflow[int, int]{Name: "clean_parent", Version: 1, Run: func(wc flow.Context, n int) (int, error) {
		if n == 0 { // the first execution waits for a signal, streams and continues
			if _, err := flow.Receive[int](wc, "go", 0); err != nil {
				return 0, err
			}
			if _, err := flow.WriteStream(wc, "log", "begin"); err != nil {
				return 0, err
			}
			if _, err := flow.Do(wc, tokens, 3); err != nil {
				return 0, err
			}
			return 0, flow.ContinueAsNew(wc, 1)
		}
		c, err := flow.StartChild(wc, child, n, nil)
		if err != nil {
			return 0, err
		}
		return c.Result(wc)
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	var runs []*flow.Run[int]
	for i, opts := range []*flow.StartOptions{
		{UniqueKey: "only-one"},
		{Debounce: &flow.Debounce{Key: "burst", Window: time.Millisecond}},
		nil,
	} {
		r, err := flow.Start(ctx, e, parent, 0, opts)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		for {
			if _, err := flow.Signal(ctx, e, r.ID(), "go", 0, nil); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond) // the debounced run is not there to signal until its window ends
		}
		if out, err := r.Result(ctx); err != nil || out != 2 {
			t.Fatalf("run %s: %d, %v; want 2", r.ID(), out, err)
		}
	}
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(table, where string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM %s.%s WHERE %s", s, table, where)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tables := []string{"steps", "events", "signals", "streams", "stream_chunks", "executions", "unique_holds", "debounces"}
	before := map[string]int{}
	for _, table := range tables {
		before[table] = count(table, "true")
	}
	for _, table := range []string{"steps", "events", "signals", "streams", "stream_chunks", "executions"} {
		if before[table] == 0 {
			t.Errorf("the runs left no rows in %s to delete: the test covers nothing there", table)
		}
	}
	time.Sleep(5 * time.Millisecond) // past the retention
	if n, err := e.Clean(ctx); err != nil || n != 6 {
		t.Fatalf("clean: %d deleted, %v; want the 3 runs and their 3 children", n, err)
	}
	for _, table := range tables {
		if n := count(table, fmt.Sprintf("run_id NOT IN (SELECT id FROM %s.runs)", s)); n != 0 {
			t.Errorf("%s keeps %d rows of deleted runs (of %d before)", table, n, before[table])
		}
	}
	if n := count("runs", fmt.Sprintf("parent_id IS NOT NULL AND parent_id NOT IN (SELECT id FROM %s.runs)", s)); n != 0 {
		t.Errorf("%d runs name a deleted parent", n)
	}
}
