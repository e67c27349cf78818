package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/monoprocess"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
)

// go-workflows runs as its own benchmark tool (bench/ in its repository)
// sets it up on SQLite: the SQLite backend (WAL, one connection, busy timeout
// 5 s) wrapped in the monoprocess backend, which wakes the worker
// in-process when a task appears instead of waiting for the 200 ms poll,
// with the worker's default options.

func gwNoop(context.Context, int) (int, error) { return 0, nil }

func gwThreeSteps(ctx workflow.Context, n int) (int, error) {
	for range 3 {
		var err error
		if n, err = workflow.ExecuteActivity[int](ctx, workflow.DefaultActivityOptions, gwNoop, n).Get(ctx); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// gwLatency holds the latency scenario's activity, whose start is timed:
// it receives the producer's clock.
type gwLatency struct{ lat *latencies }

func (g *gwLatency) FirstStep(_ context.Context, t int64) (int, error) {
	g.lat.add(sinceMS(t))
	return 0, nil
}

// gwLatencyWorkflow calls FirstStep. The nil receiver only names the
// activity; the worker runs the one registered.
func gwLatencyWorkflow(ctx workflow.Context, t int64) (int, error) {
	var g *gwLatency
	return workflow.ExecuteActivity[int](ctx, workflow.DefaultActivityOptions, g.FirstStep, t).Get(ctx)
}

// goWorkflows runs the workflows and latency scenarios of go-workflows in
// this process.
func goWorkflows(ctx context.Context, p params) (result, error) {
	path := filepath.Join(p.Dir, "goworkflows.db")
	// NewSqliteBackend prefixes "file:"; the pragma makes the durability
	// explicit (it is SQLite's default too) so that it matches the others.
	be := monoprocess.NewMonoprocessBackend(sqlite.NewSqliteBackend(path+"?_pragma=synchronous(FULL)",
		sqlite.WithBackendOptions(backend.WithLogger(slog.New(slog.DiscardHandler)))))
	defer be.Close()
	opts := worker.DefaultOptions
	w := worker.New(be, &opts)
	if err := w.RegisterWorkflow(gwThreeSteps); err != nil {
		return result{}, fmt.Errorf("register: %w", err)
	}
	if err := w.RegisterActivity(gwNoop); err != nil {
		return result{}, fmt.Errorf("register: %w", err)
	}
	var lat latencies
	if err := w.RegisterWorkflow(gwLatencyWorkflow); err != nil {
		return result{}, fmt.Errorf("register: %w", err)
	}
	if err := w.RegisterActivity(&gwLatency{lat: &lat}); err != nil {
		return result{}, fmt.Errorf("register: %w", err)
	}
	c := client.New(be)

	// Finished instances, read over a connection of its own (WAL: it does
	// not block the backend's writer).
	ro, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return result{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer ro.Close()
	finished := func() (int, error) {
		var n int
		err := ro.QueryRowContext(ctx, "SELECT count(*) FROM instances WHERE completed_at IS NOT NULL").Scan(&n)
		return n, err
	}

	wctx, stopWorker := context.WithCancel(ctx)
	defer func() {
		stopWorker()
		_ = w.WaitForCompletion()
	}()
	switch p.Scenario {
	case "workflows":
		for i := range p.N {
			if _, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprint("wf-", i)}, gwThreeSteps, i); err != nil {
				return result{}, fmt.Errorf("create instance: %w", err)
			}
		}
		start := time.Now()
		if err := w.Start(wctx); err != nil {
			return result{}, fmt.Errorf("start worker: %w", err)
		}
		end, err := waitFor(ctx, 20*time.Millisecond, atLeast(finished, p.N))
		if err != nil {
			return result{}, err
		}
		n, err := finished()
		return result{Value: float64(p.N) / end.Sub(start).Seconds(), Done: n}, err
	case "latency":
		if err := w.Start(wctx); err != nil {
			return result{}, fmt.Errorf("start worker: %w", err)
		}
		if err := pace(ctx, p.N, latencyRate, func(i int) error {
			_, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprint("lat-", i)},
				gwLatencyWorkflow, time.Now().UnixNano())
			return err
		}); err != nil {
			return result{}, fmt.Errorf("create instance: %w", err)
		}
		if _, err := waitFor(ctx, 5*time.Millisecond, func() (bool, error) { return lat.len() >= p.N, nil }); err != nil {
			return result{}, err
		}
		return latencyResult(lat.all()), nil
	}
	return result{}, fmt.Errorf("unknown scenario %s", p.Scenario)
}
