package flow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/internal/clock"
	"golang.org/x/sync/errgroup"
)

// Inspect reads a run and its steps from one snapshot. A run
// whose only step fails its first attempt goes, in committed states, from
// pending and due now with no step, to running with the step begun, to
// pending and due in ten minutes with the step retrying. Reading the run
// and then its steps apart could join the first state with the last: a
// run pending and due now whose step already failed (23 of 300 tries at
// dedb742). Readers spin on each run while it moves through its states
// and check that what they see is one of those states.
func TestInspectIsOneSnapshot(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	clk := clock.NewManual(epoch)
	path := dbPath(t)
	e := openEngine(t, path, manualConfig(clk))
	// Runs are started through an engine that is not started, so that
	// they are committed pending and claimed apart (a started engine with
	// a free slot claims a run in the transaction that starts it).
	starter := openEngine(t, path, manualConfig(clk))
	backoff := 10 * time.Minute
	failOnce := flow.Step[int, int]{
		Name:  "fail-once",
		Retry: &flow.RetryPolicy{MaxAttempts: 2, InitialInterval: backoff, MaxInterval: backoff, Jitter: -1},
		Run: func(context.Context, int) (int, error) {
			return 0, errors.New("not yet")
		},
	}
	wf := flow.Workflow[int, int]{Name: "retry-later", Run: func(wc flow.Context, n int) (int, error) {
		return flow.Do(wc, failOnce, n)
	}}
	flow.Register(e, wf)
	flow.Register(starter, wf)
	startEngine(t, e)

	// consistent says why info is no state the run was in, or "".
	consistent := func(info flow.RunInfo) string {
		switch {
		case info.Status == flow.StatusPending && !info.RunAt.After(epoch):
			if len(info.Steps) > 0 {
				return fmt.Sprintf("pending and due now, with step %s (%s, %d attempt(s))", info.Steps[0].Name, info.Steps[0].Status, info.Steps[0].Attempts)
			}
		case info.Status == flow.StatusPending:
			if !info.RunAt.Equal(epoch.Add(backoff)) || len(info.Steps) != 1 || info.Steps[0].Status != "retrying" {
				return fmt.Sprintf("pending, due at +%s, with %d step(s)", info.RunAt.Sub(epoch), len(info.Steps))
			}
		case info.Status != flow.StatusRunning:
			return "in state " + string(info.Status)
		}
		return ""
	}
	settled := func(info flow.RunInfo) bool {
		return info.Status == flow.StatusPending && info.RunAt.After(epoch)
	}
	for i := range 5 {
		run, err := flow.Start(ctx, starter, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		var g errgroup.Group
		for range 2 {
			g.Go(func() error {
				for {
					info, err := e.Inspect(ctx, run.ID())
					if err != nil {
						return err
					}
					if why := consistent(info); why != "" {
						return fmt.Errorf("run %d: Inspect shows the run %s", i, why)
					}
					if settled(info) {
						return nil
					}
				}
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// The documented views (docs/operations.md, SQL views) give the figures the runs
// recorded: pending runs by queue, step durations (count, average, p95,
// max, computed here from the steps Inspect returns) and failure rates.
func TestSQLViews(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openEngine(t, path, nil)
	slow := flow.Step[int, int]{Name: "slow", Run: func(_ context.Context, n int) (int, error) {
		time.Sleep(time.Duration(n%7) * time.Millisecond)
		return n, nil
	}}
	var mu sync.Mutex
	tries := map[int]int{}
	flaky := flow.Step[int, int]{Name: "flaky", Retry: &fastRetry, Run: func(_ context.Context, n int) (int, error) {
		mu.Lock()
		tries[n]++
		try := tries[n]
		mu.Unlock()
		if n%3 == 0 {
			return 0, flow.Permanent(errors.New("refused"))
		}
		if n%4 == 1 && try == 1 {
			return 0, errors.New("try again")
		}
		return n, nil
	}}
	wf := flow.Workflow[int, int]{Name: "viewed", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.Do(wc, slow, n); err != nil {
			return 0, err
		}
		if err := flow.Sleep(wc, time.Millisecond); err != nil { // a wait: not in step_durations
			return 0, err
		}
		return flow.Do(wc, flaky, n)
	}}
	flow.Register(e, wf)
	startEngine(t, e)

	const runs = 24
	for i := range runs {
		run, err := flow.Start(ctx, e, wf, i, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = run.Result(ctx)
	}
	// Pending work in a queue no engine works: two due now, one delayed,
	// and a run of the default queue cancelled while delayed.
	var due []time.Time
	for i, delay := range []time.Duration{0, 0, time.Hour} {
		run, err := flow.Start(ctx, e, wf, 100+i, &flow.StartOptions{Queue: "unworked", Delay: delay})
		if err != nil {
			t.Fatal(err)
		}
		if delay == 0 {
			info, err := e.Inspect(ctx, run.ID())
			if err != nil {
				t.Fatal(err)
			}
			due = append(due, info.RunAt)
		}
	}
	cancelled, err := flow.Start(ctx, e, wf, 200, &flow.StartOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Cancel(ctx, cancelled.ID()); err != nil {
		t.Fatal(err)
	}

	// What the runs recorded.
	infos, err := e.ListRuns(ctx, flow.RunFilter{Workflow: "viewed", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	durations := map[string][]int64{}
	statuses := map[flow.RunStatus]int64{}
	var stepFailures, retried int64
	for _, r := range infos {
		statuses[r.Status]++
		info, err := e.Inspect(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range info.Steps {
			if s.Status == "completed" && (s.Name == "slow" || s.Name == "flaky") {
				durations[s.Name] = append(durations[s.Name], s.FinishedAt.Sub(s.StartedAt).Milliseconds())
			}
			if s.Status == "failed" {
				stepFailures++
			}
			if s.Attempts > 1 {
				retried++
			}
		}
	}
	if statuses[flow.StatusFailed] == 0 || retried == 0 || statuses[flow.StatusCancelled] != 1 {
		t.Fatalf("the runs did not cover failures, retries and a cancellation: %v, %d retried", statuses, retried)
	}

	// The SQL views are user-facing API read with SQL: only a query shows them.
	db, view := tableDB(t, path)

	// pending_by_queue
	var queue string
	var paused bool
	var pending, dueN, running, waiting, compensating int64
	var oldestDue, age sql.NullInt64
	err = db.QueryRowContext(ctx, `SELECT queue, paused, pending, due, running, waiting, compensating, oldest_due_at, oldest_due_age_ms
		FROM `+view("pending_by_queue")+` WHERE queue = 'unworked'`).
		Scan(&queue, &paused, &pending, &dueN, &running, &waiting, &compensating, &oldestDue, &age)
	if err != nil {
		t.Fatal(err)
	}
	if paused || pending != 3 || dueN != 2 || running+waiting+compensating != 0 ||
		oldestDue.Int64 != slices.MinFunc(due, time.Time.Compare).UnixMilli() || !age.Valid || age.Int64 < 0 {
		t.Errorf("pending_by_queue unworked: paused %v, pending %d, due %d, running %d, waiting %d, compensating %d, oldest due %v (want %v), age %v",
			paused, pending, dueN, running, waiting, compensating, oldestDue, slices.MinFunc(due, time.Time.Compare).UnixMilli(), age)
	}
	var others int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+view("pending_by_queue")+` WHERE queue <> 'unworked'`).Scan(&others); err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("pending_by_queue lists %d other queues; every other run finished", others)
	}

	// step_durations
	rows, err := db.QueryContext(ctx, `SELECT step, completed, avg_ms, p95_ms, max_ms FROM `+view("step_durations")+` WHERE workflow = 'viewed' ORDER BY step`)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for rows.Next() {
		var step string
		var n, avg, p95, maxMs int64
		if err := rows.Scan(&step, &n, &avg, &p95, &maxMs); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, step)
		d := slices.Clone(durations[step])
		slices.Sort(d)
		var sum int64
		for _, v := range d {
			sum += v
		}
		wantAvg := int64(math.Round(float64(sum) / float64(len(d))))
		wantP95 := d[int(math.Ceil(0.95*float64(len(d))))-1] // nearest rank
		if n != int64(len(d)) || avg != wantAvg || p95 != wantP95 || maxMs != d[len(d)-1] {
			t.Errorf("step_durations %s: %d, avg %d, p95 %d, max %d; recorded %d, avg %d, p95 %d, max %d (%v)",
				step, n, avg, p95, maxMs, len(d), wantAvg, wantP95, d[len(d)-1], d)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps, []string{"flaky", "slow"}) {
		t.Errorf("step_durations has steps %v, want flaky and slow (no waits)", steps)
	}

	// failure_rates
	var finished, completed, failed, cancelledN, suspended, stepFailed, retriedN int64
	var rate float64
	err = db.QueryRowContext(ctx, `SELECT finished, completed, failed, cancelled, suspended, failure_rate, step_failures, retried_steps
		FROM `+view("failure_rates")+` WHERE workflow = 'viewed'`).
		Scan(&finished, &completed, &failed, &cancelledN, &suspended, &rate, &stepFailed, &retriedN)
	if err != nil {
		t.Fatal(err)
	}
	wantFinished := statuses[flow.StatusCompleted] + statuses[flow.StatusFailed] + statuses[flow.StatusCancelled]
	wantRate := math.Round(float64(statuses[flow.StatusFailed])/float64(wantFinished)*1e4) / 1e4
	if finished != wantFinished || completed != statuses[flow.StatusCompleted] || failed != statuses[flow.StatusFailed] ||
		cancelledN != 1 || suspended != 0 || rate != wantRate || stepFailed != stepFailures || retriedN != retried {
		t.Errorf("failure_rates: finished %d, completed %d, failed %d, cancelled %d, suspended %d, rate %v, step failures %d, retried %d; recorded %v, rate %v, %d step failures, %d retried",
			finished, completed, failed, cancelledN, suspended, rate, stepFailed, retriedN, statuses, wantRate, stepFailures, retried)
	}
}
