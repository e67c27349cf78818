package flowpg_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowpg"
)

// TestHistoryPartitionsKeepWhatRetentionKeeps runs the cleaner of an engine
// whose history is partitioned (spans of 2 s, retention a second)
// beside a job that runs on: its partition cannot go, so the jobs that
// finished beside it stay past their retention, for up to two spans, and
// then go row by row; the running job keeps its history, and once it
// finishes and its retention passes, the partition goes with it.
func TestHistoryPartitionsKeepWhatRetentionKeeps(t *testing.T) {
	dsn, schema := schema(t)
	ctx := t.Context()
	const span, retention = 2 * time.Second, time.Second
	release := make(chan struct{})
	long := flow.Job[int]{Name: "long", Handler: func(ctx context.Context, n int) error {
		if n == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	e, err := flowpg.Open(ctx, dsn, &flow.Config{
		Queues:        map[string]flow.QueueConfig{flow.DefaultQueue: {Concurrency: 8}},
		PollInterval:  20 * time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
		CleanInterval: -1, // Clean below is the cleaner
		Retention:     flow.Retention{Completed: retention},
	}, &flowpg.Options{Schema: schema, HistoryPartitions: span})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	flow.RegisterJob(e, long)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e.Stop(ctx)
	db, err := sql.Open(flowpg.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, fmt.Sprintf(q, schema), args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Everything below starts just after a partition begins, so that the
	// jobs share the running job's partition.
	time.Sleep(time.Until(time.Now().Truncate(span).Add(span + 50*time.Millisecond)))
	runner, err := flow.Enqueue(ctx, e, long, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var done []*flow.Run[struct{}]
	for i := 1; i <= 20; i++ {
		r, err := flow.Enqueue(ctx, e, long, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, r)
	}
	for _, r := range done {
		if _, err := r.Result(ctx); err != nil {
			t.Fatal(err)
		}
	}
	finished := time.Now()

	// Past their retention, inside the grace: kept, as their partition is.
	time.Sleep(retention + span/2)
	if _, err := e.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	if left := count("SELECT count(*) FROM %s.runs WHERE status = 'completed'"); left != len(done) && time.Since(finished) < retention+2*span {
		t.Fatalf("%d of %d jobs left %v after they finished, within retention and grace", left, len(done), time.Since(finished))
	}

	// Past the grace: deleted one by one; the running job and its history
	// stay.
	deadline := time.Now().Add(15 * time.Second)
	for count("SELECT count(*) FROM %s.runs WHERE status = 'completed'") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("jobs finished %v ago still there", time.Since(finished))
		}
		time.Sleep(200 * time.Millisecond)
		if _, err := e.Clean(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if time.Since(finished) < retention+2*span {
		t.Fatalf("jobs deleted %v after they finished, within retention and grace", time.Since(finished))
	}
	history, err := e.History(ctx, runner.ID())
	if err != nil || len(history) == 0 {
		t.Fatalf("the running job's history: %v, %v", history, err)
	}

	// Once it finished and its retention passed, its partition goes, and
	// it with it.
	close(release)
	if _, err := runner.Result(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := e.Inspect(ctx, runner.ID()); errors.Is(err, flow.ErrRunNotFound) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("the job that ran on is still there")
		}
		time.Sleep(200 * time.Millisecond)
		if _, err := e.Clean(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := count("SELECT count(*) FROM %s.events WHERE run_id = $1", runner.ID()); n != 0 {
		t.Fatalf("%d events of the deleted job left", n)
	}
}
