package flow_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// exportStep reports progress, tells the test it did, and waits for the
// test to let it finish: the test reads the progress while it runs.
func exportStep(reported chan<- struct{}, finish <-chan struct{}) flow.Step[int, int] {
	return flow.Step[int, int]{
		Name: "export",
		Run: func(ctx context.Context, rows int) (int, error) {
			for i := 1; i <= rows/2; i++ {
				if err := flow.SetProgress(ctx, flow.Progress{Done: int64(i), Total: int64(rows), Message: fmt.Sprintf("exported %d rows", i)}); err != nil {
					return 0, err
				}
			}
			close(reported)
			<-finish
			for i := rows/2 + 1; i <= rows; i++ {
				if err := flow.SetProgress(ctx, flow.Progress{Done: int64(i), Total: int64(rows), Message: "exported all rows"}); err != nil {
					return 0, err
				}
			}
			return rows, nil
		},
	}
}

// A step's progress is visible while it runs, its last value stays once
// the run completed, and a thousand calls leave a few history events.
func TestProgressIsVisibleWhileAStepRunsAndKeptAfter(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	reported, finish := make(chan struct{}), make(chan struct{})
	step := exportStep(reported, finish)
	wf := flow.Workflow[int, int]{
		Name: "progress_export",
		Run: func(wc flow.Context, rows int) (int, error) {
			if err := flow.SetProgress(wc, flow.Progress{Done: 1}); !errors.Is(err, flow.ErrNotInStep) {
				return 0, fmt.Errorf("SetProgress in the workflow body: err = %v, want ErrNotInStep", err)
			}
			return flow.Do(wc, step, rows)
		},
	}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-reported
	eventually(t, "the progress of the running step", func() bool {
		ps, err := flow.GetProgress(ctx, e, run.ID())
		if err != nil {
			t.Fatal(err)
		}
		return len(ps) == 1 && ps[0].Done == 500 && ps[0].Total == 1000 && ps[0].Step == "export" && ps[0].Attempt == 1
	})
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if p := info.Steps[0].Progress; info.Status != flow.StatusRunning || p == nil || p.Done != 500 || p.Message != "exported 500 rows" {
		t.Fatalf("Inspect while running: status %s, progress %+v; want running at 500", info.Status, p)
	}
	close(finish)
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	info, err = e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if p := info.Steps[0].Progress; p == nil || p.Done != 1000 || p.Message != "exported all rows" {
		t.Fatalf("Inspect after the run: progress %+v, want the last value 1000", p)
	}
	if pct, ok := info.Steps[0].Progress.Percent(); !ok || pct != 100 {
		t.Fatalf("Percent = %v, %v; want 100", pct, ok)
	}
	n := 0
	for _, k := range eventKinds(t, e, run.ID()) {
		if k == flow.EventStepProgress {
			n++
		}
	}
	if n < 2 || n > 10 {
		t.Fatalf("%d step_progress events for 1000 calls, want a few (at least one while running and the last)", n)
	}
	// The change feed carries the samples as any event.
	fed := 0
	for c, err := range e.Changes(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if c.RunID == run.ID() && c.Kind == flow.EventStepProgress {
			fed++
		}
	}
	if fed != n {
		t.Fatalf("the change feed has %d step_progress changes of the run, the history %d", fed, n)
	}
	// Time travel shows the progress as it stood after each event.
	events, err := e.History(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Kind != flow.EventStepProgress {
			continue
		}
		st, err := e.InspectAfter(ctx, run.ID(), ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		var want flow.Progress
		if err := json.Unmarshal([]byte(ev.Detail), &want); err != nil {
			t.Fatal(err)
		}
		if p := st.Run.Steps[0].Progress; p == nil || *p != want || st.Run.Status != flow.StatusRunning {
			t.Fatalf("InspectAfter the first progress event: %s, %+v; want running at %+v", st.Run.Status, p, want)
		}
		break
	}
}

// A job's handler reports progress, and a watcher sees it change and the
// run end.
func TestProgressOfAJobIsWatched(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	reported, finish := make(chan struct{}), make(chan struct{})
	job := flow.Job[int]{
		Name: "progress_job",
		Handler: func(ctx context.Context, n int) error {
			if err := flow.SetPercent(ctx, 40, "halfway there"); err != nil {
				return err
			}
			close(reported)
			<-finish
			return flow.SetPercent(ctx, 100, "done")
		},
	}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	run, err := flow.Enqueue(ctx, e, job, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-reported
	var seen []string
	err = flow.WatchProgress(ctx, e, run.ID(), func(status flow.RunStatus, ps []flow.StepProgress) error {
		if len(ps) == 1 {
			seen = append(seen, ps[0].String())
			if ps[0].Done == 40 {
				select {
				case <-finish:
				default:
					close(finish)
				}
			}
		}
		if status.Finished() && status != flow.StatusCompleted {
			return fmt.Errorf("run %s", status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 || seen[0] != "40% (40/100) halfway there" || seen[len(seen)-1] != "100% (100/100) done" {
		t.Fatalf("watched %q, want 40%% then 100%%", seen)
	}
}

// SetProgress outside a step is ErrNotInStep; bad values are refused.
func TestSetProgressOutsideAStep(t *testing.T) {
	t.Parallel()
	if err := flow.SetProgress(context.Background(), flow.Progress{Done: 1}); !errors.Is(err, flow.ErrNotInStep) {
		t.Fatalf("SetProgress outside a step: err = %v, want ErrNotInStep", err)
	}
	if err := flow.SetPercent(context.Background(), 140, ""); err == nil {
		t.Fatal("SetPercent(140): no error")
	}
}

// A RunTx step's last progress commits with its checkpoint.
func TestProgressOfATransactionalStep(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	step := flow.Step[int, int]{Name: "ledger", RunTx: func(ctx context.Context, _ *sql.Tx, n int) (int, error) {
		for i := 1; i <= n; i++ {
			if err := flow.SetPercent(ctx, float64(i*100/n), "booked"); err != nil {
				return 0, err
			}
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "progress_ledger", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, step, n)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 200, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := e.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if p := info.Steps[0].Progress; p == nil || p.Done != 100 || p.Total != 100 || p.Message != "booked" {
		t.Fatalf("progress of the RunTx step = %+v, want 100%% booked", p)
	}
}
