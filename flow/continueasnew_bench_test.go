package flow_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
	"github.com/flowlite/flowlite/internal/pgtest"
)

// pokeLoop is a sleep/react loop that continues as new every `every`
// iterations (a step each). Once an execution recorded its iterations it
// calls step "parking", whose body reports on parking, and waits for
// "poke"; the resume that receives it replays the execution's records and
// calls step "resumed", whose body reports on resumed (each once per
// execution: a replay returns their records). It then waits for "next"
// and continues as new, until total iterations are done.
func pokeLoop(every, total int, parking, resumed chan<- int) flow.Workflow[loopState, int] {
	tick := flow.Step[int, int]{Name: "tick", Run: func(_ context.Context, n int) (int, error) { return n + 1, nil }}
	report := func(name string, to chan<- int) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name, Run: func(_ context.Context, n int) (int, error) {
			to <- n
			return n, nil
		}}
	}
	park, mark := report("parking", parking), report("resumed", resumed)
	return flow.Workflow[loopState, int]{Name: "poke_loop", Run: func(wc flow.Context, s loopState) (int, error) {
		for range every {
			n, err := flow.Do(wc, tick, s.Count)
			if err != nil {
				return 0, err
			}
			s.Count = n
		}
		if _, err := flow.Do(wc, park, flow.Execution(wc)); err != nil {
			return 0, err
		}
		if _, err := flow.Receive[int](wc, "poke", 0); err != nil {
			return 0, err
		}
		if _, err := flow.Do(wc, mark, flow.Execution(wc)); err != nil {
			return 0, err
		}
		if s.Count >= total {
			return s.Count, nil
		}
		if _, err := flow.Receive[int](wc, "next", 0); err != nil {
			return 0, err
		}
		return 0, flow.ContinueAsNew(wc, s)
	}}
}

// driveLoop runs a pokeLoop of total iterations, every per execution, on
// e, and calls atResume with each execution's number and the time its
// resume took (the poke's signal to the "resumed" step: the claim, the
// load of the execution's records and the replay over them).
func driveLoop(tb testing.TB, e *flow.Engine, runID string, every, total int, atResume func(execution int, took time.Duration)) {
	ctx := context.Background()
	parking, resumed := make(chan int, 1), make(chan int, 1)
	wf := pokeLoop(every, total, parking, resumed)
	flow.Register(e, wf)
	if err := e.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	run, err := flow.Start(ctx, e, wf, loopState{}, &flow.StartOptions{RunID: runID})
	if err != nil {
		tb.Fatal(err)
	}
	waitFor := func(step string, occurrences int) {
		for {
			info, err := e.Inspect(ctx, runID)
			if err != nil {
				tb.Fatal(err)
			}
			for _, s := range info.Steps {
				if s.Name == step && s.Status == "waiting" {
					return
				}
			}
			if info.Status.Finished() {
				tb.Fatalf("run ended while waiting for %s: %s %s", step, info.Status, info.Error)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for execution := 1; execution <= total/every; execution++ {
		// Told when the execution is about to wait, the driver polls only
		// for the wait's record, not through the execution's iterations.
		if got := <-parking; got != execution {
			tb.Fatalf("execution %d parking, want %d", got, execution)
		}
		waitFor("flow.receive:poke", 1)
		start := time.Now()
		if _, err := flow.Signal(ctx, e, runID, "poke", execution, nil); err != nil {
			tb.Fatal(err)
		}
		if got := <-resumed; got != execution {
			tb.Fatalf("resumed execution %d, want %d", got, execution)
		}
		atResume(execution, time.Since(start))
		if execution < total/every {
			waitFor("flow.receive:next", 1)
			if _, err := flow.Signal(ctx, e, runID, "next", execution, nil); err != nil {
				tb.Fatal(err)
			}
		}
	}
	out, err := run.Result(ctx)
	if err != nil || out != total {
		tb.Fatalf("Result = %d, %v; want %d", out, err, total)
	}
}

// A loop of 2,000 iterations that continues as new every 100 resumes
// every execution over its own records only: at each resume the run holds
// at most 100 records plus the execution's four others (two steps, two
// waits), however many iterations came before. (BenchmarkContinueAsNewResume times it at
// 1,000 per execution.)
func TestContinueAsNewResumeReplaysOnlyTheCurrentExecution(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 steps")
	}
	t.Parallel()
	e := openEngine(t, dbPath(t), testConfig())
	const every = 100
	driveLoop(t, e, "poked", every, 20*every, func(execution int, _ time.Duration) {
		info, err := e.Inspect(context.Background(), "poked")
		if err != nil {
			t.Fatal(err)
		}
		if info.Execution != execution || len(info.Steps) > every+4 {
			t.Fatalf("resume of execution %d: run in execution %d with %d records, want at most %d",
				execution, info.Execution, len(info.Steps), every+4)
		}
	})
}

// BenchmarkContinueAsNewResume drives a sleep/react loop of 1,000,000
// iterations (FLOWLITE_CAN_ITERATIONS to change it) that continues as new
// every 1,000, and reports the time to resume (claim, load, replay) its
// first executions and its last ones, and their ratio: about 1, since a
// resume reads and replays only its execution's records. A run that long
// takes minutes, in which the load of a shared machine changes: so right
// after the last execution, a fresh run of the same loop on a fresh file
// is timed too, and end/fresh compares the long run's last resumes with
// resumes made at the same moment in a run that is just starting, on a
// fresh file (end/fresh) and in the long run's own file (end/same-file,
// which leaves out what a database that grew costs every run); and a run
// right before the long one, which start/before compares its first
// resumes with.
//
//	go test -run '^$' -bench ContinueAsNewResume -benchtime 1x ./flow
func BenchmarkContinueAsNewResume(b *testing.B) {
	const every = 1000
	total := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("FLOWLITE_CAN_ITERATIONS")); err == nil && v >= 10*every {
		total = v - v%every
	}
	const sample = 5 // executions averaged at each end
	for b.Loop() {
		before, _ := timeResumes(b, filepathFor(b), "before", every, 10*every, sample)
		long := filepathFor(b)
		first, last := timeResumes(b, long, "poked", every, total, sample)
		same, _ := timeResumes(b, long, "same-file", every, 10*every, sample)
		fresh, _ := timeResumes(b, filepathFor(b), "fresh", every, 10*every, sample)
		b.ReportMetric(float64(first.Microseconds())/sample, "µs/resume-start")
		b.ReportMetric(float64(last.Microseconds())/sample, "µs/resume-end")
		b.ReportMetric(float64(before.Microseconds())/sample, "µs/resume-fresh-before")
		b.ReportMetric(float64(same.Microseconds())/sample, "µs/resume-same-file")
		b.ReportMetric(float64(fresh.Microseconds())/sample, "µs/resume-fresh")
		b.ReportMetric(float64(last)/float64(first), "end/start")
		b.ReportMetric(float64(first)/float64(before), "start/before")
		b.ReportMetric(float64(last)/float64(same), "end/same-file")
		b.ReportMetric(float64(last)/float64(fresh), "end/fresh")
	}
}

// timeResumes drives a pokeLoop of total iterations, run runID, on an
// engine of its own on the file at path and returns the summed resume
// times of executions 2 to sample+1 (the first resume warms up) and of its
// last sample executions.
func timeResumes(b *testing.B, path, runID string, every, total, sample int) (first, last time.Duration) {
	// synchronous=NORMAL: a million iterations are a million commits of one
	// run, one at a time, and what is timed is a resume (the claim, the
	// load of the execution's records, the replay), which an fsync per
	// commit only slows down alike at both ends. With
	// FLOWLITE_TEST_BACKEND=postgres, a PostgreSQL schema of its own.
	var e *flow.Engine
	if pgtest.Postgres() {
		e = openEngine(b, path, testConfig())
	} else {
		e = openSQLiteEngine(b, path, testConfig(), &flowsqlite.Options{Synchronous: flowsqlite.SynchronousNormal})
	}
	defer e.Close()
	executions := total / every
	driveLoop(b, e, runID, every, total, func(execution int, took time.Duration) {
		switch {
		case execution > 1 && execution <= 1+sample:
			first += took
		case execution > executions-sample:
			last += took
		}
	})
	return first, last
}

// filepathFor returns a fresh database path for a benchmark.
func filepathFor(b *testing.B) string {
	return fmt.Sprintf("%s/bench.db", b.TempDir())
}
