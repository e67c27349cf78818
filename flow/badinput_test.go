package flow_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

var double = flow.Step[int, int]{
	Name: "double",
	Run:  func(_ context.Context, n int) (int, error) { return 2 * n, nil },
}

func doubler(name string, version int) flow.Workflow[int, int] {
	return flow.Workflow[int, int]{
		Name: name, Version: version,
		Run: func(wc flow.Context, n int) (int, error) { return flow.Do(wc, double, n) },
	}
}

func TestStartSameRunIDReturnsExistingRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)

	first, err := flow.Start(ctx, e, wf, 21, &flow.StartOptions{RunID: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := flow.Start(ctx, e, wf, 99, &flow.StartOptions{RunID: "order-1"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Existing() || !second.Existing() || second.ID() != "order-1" {
		t.Fatalf("existing = %v/%v, id %q; want false/true, order-1", first.Existing(), second.Existing(), second.ID())
	}
	other := doubler("other", 1)
	flow.Register(e, other)
	if _, err := flow.Start(ctx, e, other, 1, &flow.StartOptions{RunID: "order-1"}); !errors.Is(err, flow.ErrRunExists) {
		t.Fatalf("start with a taken ID of another workflow: err = %v, want ErrRunExists", err)
	}

	startEngine(t, e)
	got, err := second.Result(ctx)
	if err != nil || got != 42 {
		t.Fatalf("result = %d, %v; want 42 (the first input), nil", got, err)
	}
	if kinds := eventKinds(t, e, "order-1"); slices.Index(kinds, "run_started") != 0 || strings.Count(strings.Join(kinds, " "), "run_started") != 1 {
		t.Fatalf("history %v: want exactly one run_started, first", kinds)
	}
}

func TestStartUnregisteredWorkflowRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, doubler("doubler", 1))

	for _, wf := range []flow.Workflow[int, int]{doubler("nope", 1), doubler("doubler", 2)} {
		_, err := flow.Start(ctx, e, wf, 1, nil)
		if !errors.Is(err, flow.ErrUnknownWorkflow) || !strings.Contains(err.Error(), wf.Name) {
			t.Fatalf("start %s v%d: err = %v, want ErrUnknownWorkflow naming it", wf.Name, wf.Version, err)
		}
	}
	runs, err := e.ListRuns(ctx, flow.RunFilter{})
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs = %v, %v; want none", runs, err)
	}
}

// A run of a workflow (or version) that the working engine lacks waits: it
// is never claimed, failed or discarded, and it is reported.
func TestRunOfUnknownWorkflowWaitsUntilAnEngineHasIt(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)

	producer := openEngine(t, path, nil)
	v1 := doubler("doubler", 1)
	flow.Register(producer, v1)
	run, err := flow.Start(ctx, producer, v1, 5, nil)
	if err != nil {
		t.Fatal(err)
	}

	lacking := openEngine(t, path, nil)
	flow.Register(lacking, doubler("doubler", 2))
	flow.Register(lacking, doubler("unrelated", 1))
	startEngine(t, lacking)
	time.Sleep(100 * time.Millisecond) // ten poll intervals

	info, err := lacking.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != flow.StatusPending || len(info.Steps) != 0 {
		t.Fatalf("run is %s with %d steps; want pending and untouched", info.Status, len(info.Steps))
	}
	if kinds := eventKinds(t, lacking, run.ID()); !slices.Equal(kinds, []string{"run_started"}) {
		t.Fatalf("history = %v, want only run_started", kinds)
	}
	waiting, err := lacking.Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []flow.WaitingWorkflow{{Workflow: "doubler", Version: 1, Runs: 1}}
	if !slices.Equal(waiting, want) {
		t.Fatalf("waiting = %v, want %v", waiting, want)
	}

	startEngine(t, producer)
	if got, err := run.Result(ctx); err != nil || got != 10 {
		t.Fatalf("result = %d, %v; want 10", got, err)
	}
}

// A recorded step output that no longer decodes into the step's type (the
// type changed between deploys) suspends the run with an error naming run,
// step and type; nothing is compensated and nothing recorded changes.
func TestRecordedOutputOfAnotherTypeSuspendsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var compensated bool
	release := make(chan struct{})

	greet := flow.Step[string, string]{
		Name:       "greet",
		Run:        func(_ context.Context, s string) (string, error) { return "hello " + s, nil },
		Compensate: func(context.Context, string, string) error { compensated = true; return nil },
	}
	block := flow.Step[string, string]{
		Name: "block",
		Run: func(ctx context.Context, s string) (string, error) {
			select {
			case <-release:
				return s, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		},
	}
	v1 := flow.Workflow[string, string]{Name: "greeter", Run: func(wc flow.Context, s string) (string, error) {
		g, err := flow.Do(wc, greet, s)
		if err != nil {
			return "", err
		}
		return flow.Do(wc, block, g)
	}}
	e1 := openEngine(t, path, nil)
	flow.Register(e1, v1)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, v1, "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "greet to complete", func() bool {
		info, _ := e1.Inspect(ctx, run.ID())
		return len(info.Steps) == 2
	})
	if err := e1.Close(); err != nil { // interrupts block; the run is released
		t.Fatal(err)
	}
	close(release)

	type Greeting struct{ Text string }
	greetV2 := flow.Step[string, Greeting]{
		Name:       "greet",
		Run:        func(_ context.Context, s string) (Greeting, error) { return Greeting{"hi " + s}, nil },
		Compensate: func(context.Context, string, Greeting) error { compensated = true; return nil },
	}
	v1Changed := flow.Workflow[string, string]{Name: "greeter", Run: func(wc flow.Context, s string) (string, error) {
		g, err := flow.Do(wc, greetV2, s)
		return g.Text, err
	}}
	e2 := openEngine(t, path, nil)
	flow.Register(e2, v1Changed)
	before, err := e2.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	startEngine(t, e2)
	run2, err := flow.Lookup(ctx, e2, v1Changed, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	_, err = run2.Result(ctx)
	var suspended *flow.SuspendedError
	if !errors.As(err, &suspended) {
		t.Fatalf("result err = %v, want *SuspendedError", err)
	}
	for _, want := range []string{run.ID(), "greet", "flow_test.Greeting"} {
		if !strings.Contains(suspended.Reason, want) {
			t.Errorf("reason %q does not name %q", suspended.Reason, want)
		}
	}
	after, err := e2.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if compensated || after.Steps[0].Compensation != "none" || string(after.Steps[0].Output) != string(before.Steps[0].Output) {
		t.Fatalf("recorded step changed: compensated=%v, step %+v", compensated, after.Steps[0])
	}
}

// A stored input that is not valid JSON for the workflow's input type
// suspends the run; the stored bytes are left as they are.
func TestMalformedStoredInputSuspendsTheRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	e := openEngine(t, path, nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	run, err := flow.Start(ctx, e, wf, 1, &flow.StartOptions{RunID: "bad-input"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawDB(t, path).Exec(`UPDATE flowlite_runs SET input = CAST('{"oops' AS BLOB) WHERE id = 'bad-input'`); err != nil {
		t.Fatal(err)
	}
	startEngine(t, e)
	_, err = run.Result(ctx)
	if !errors.Is(err, flow.ErrSuspended) || !strings.Contains(err.Error(), "decode workflow input into int") {
		t.Fatalf("result err = %v, want suspended naming the input type", err)
	}
	info, err := e.Inspect(ctx, "bad-input")
	if err != nil {
		t.Fatal(err)
	}
	if string(info.Input) != `{"oops` || len(info.Steps) != 0 {
		t.Fatalf("stored input = %q, steps %d; want untouched", info.Input, len(info.Steps))
	}
}

func TestOpenRefusesFilesItCannotUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	notDB := dbPath(t)
	content := []byte("this is a text file, not a database\n" + strings.Repeat("x", 4096))
	if err := os.WriteFile(notDB, content, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := flowsqlite.Open(ctx, notDB, nil, nil)
	if !errors.Is(err, flow.ErrNotDatabase) || !strings.Contains(err.Error(), notDB) {
		t.Fatalf("open text file: err = %v, want ErrNotDatabase naming the path", err)
	}
	if got, _ := os.ReadFile(notDB); string(got) != string(content) {
		t.Fatal("the refused file was modified")
	}
	if _, err := flowsqlite.Open(ctx, t.TempDir(), nil, nil); !errors.Is(err, flow.ErrNotDatabase) {
		t.Fatalf("open a directory: err = %v, want ErrNotDatabase", err)
	}
	if _, err := flowsqlite.Open(ctx, dbPath(t), nil, &flowsqlite.Options{Synchronous: "OFF"}); err == nil {
		t.Fatal("open with synchronous OFF: want an error")
	}
}

func TestCancelFinishedOrUnknownRun(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	wf := doubler("doubler", 1)
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); err != nil {
		t.Fatal(err)
	}
	before := eventKinds(t, e, run.ID())
	if err := e.Cancel(ctx, run.ID()); !errors.Is(err, flow.ErrRunFinished) || !strings.Contains(err.Error(), "completed") {
		t.Fatalf("cancel completed run: err = %v, want ErrRunFinished saying completed", err)
	}
	if after := eventKinds(t, e, run.ID()); !slices.Equal(before, after) {
		t.Fatalf("history changed by a refused cancel: %v → %v", before, after)
	}
	if err := e.Cancel(ctx, "no-such-run"); !errors.Is(err, flow.ErrRunNotFound) {
		t.Fatalf("cancel unknown run: err = %v, want ErrRunNotFound", err)
	}
	if err := e.Resume(ctx, run.ID()); !errors.Is(err, flow.ErrConflict) {
		t.Fatalf("resume completed run: err = %v, want ErrConflict", err)
	}
}

// Calls on a closed engine say so, instead of the driver's words.
func TestClosedEngine(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e, err := flowsqlite.Open(ctx, dbPath(t), testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wf := doubler("closed", 1)
	flow.Register(e, wf)
	run, err := flow.Start(ctx, e, wf, 1, nil) // not started: stays pending
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(ctx); !errors.Is(err, flow.ErrClosed) {
		t.Errorf("Result after Close: %v, want ErrClosed", err)
	}
	if _, err := e.Inspect(ctx, run.ID()); !errors.Is(err, flow.ErrClosed) {
		t.Errorf("Inspect after Close: %v, want ErrClosed", err)
	}
	if _, err := flow.Start(ctx, e, wf, 2, nil); !errors.Is(err, flow.ErrClosed) {
		t.Errorf("Start after Close: %v, want ErrClosed", err)
	}
}
