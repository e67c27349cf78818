package flow_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowlite/flowlite/flow"
	"github.com/flowlite/flowlite/flow/flowsqlite"
)

// echoText returns its input; big returns a string of n bytes.
var (
	echoText = flow.Workflow[string, string]{
		Name: "echo",
		Run:  func(_ flow.Context, s string) (string, error) { return s, nil },
	}
	bigStep = flow.Step[int, string]{
		Name: "big",
		Run:  func(_ context.Context, n int) (string, error) { return strings.Repeat("x", n), nil },
	}
)

// payloadErr fails the test unless err matches ErrPayloadTooLarge and its
// message names what was too large, its size and the limit.
func payloadErr(t *testing.T, call string, err error, what string, size, limit int) {
	t.Helper()
	if !errors.Is(err, flow.ErrPayloadTooLarge) {
		t.Errorf("%s: err = %v, want ErrPayloadTooLarge", call, err)
		return
	}
	for _, want := range []string{what, strconv.Itoa(size) + " bytes", "limit of " + strconv.Itoa(limit)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not contain %q", call, err, want)
		}
	}
}

// Every value the engine stores is bounded by Config.MaxPayloadBytes; a
// value over it is refused with a clear error and nothing is recorded, or,
// for outputs, the step or workflow fails with that error.
func TestPayloadsOverTheLimitAreRefused(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := sqlitePath(t)
	cfg := testConfig()
	cfg.MaxPayloadBytes = 1000
	e := openEngine(t, path, cfg)
	flow.Register(e, echoText)
	job := flow.Job[string]{Name: "store-text", Handler: func(context.Context, string) error { return nil }}
	flow.RegisterJob(e, job)

	big := strings.Repeat("a", 1200) // encodes to 1202 bytes with its quotes
	_, err := flow.Start(ctx, e, echoText, big, nil)
	payloadErr(t, "Start", err, "start echo", 1202, 1000)
	_, err = flow.Enqueue(ctx, e, job, big, nil)
	payloadErr(t, "Enqueue", err, "input", 1202, 1000)
	tx, err := rawDB(t, path).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = flow.StartTx(ctx, e, tx, echoText, big, nil)
	payloadErr(t, "StartTx", err, "input", 1202, 1000)
	_, err = flow.EnqueueTx(ctx, e, tx, job, big, nil)
	payloadErr(t, "EnqueueTx", err, "input", 1202, 1000)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	err = flow.Schedule(ctx, e, "nightly-echoText", "0 3 * * *", echoText, big, nil)
	payloadErr(t, "Schedule", err, "input", 1202, 1000)
	if runs, err := e.ListRuns(ctx, flow.RunFilter{}); err != nil || len(runs) != 0 {
		t.Fatalf("runs = %v, %v; want none recorded", runs, err)
	}
	if s, err := e.Schedules(ctx); err != nil || len(s) != 0 {
		t.Fatalf("schedules = %v, %v; want none recorded", s, err)
	}

	// A signal: refused, and the run's history and signals are unchanged.
	waiter := flow.Workflow[string, string]{
		Name: "waiter",
		Run: func(wc flow.Context, _ string) (string, error) {
			return flow.Receive[string](wc, "text", 0)
		},
	}
	flow.Register(e, waiter)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, waiter, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, e, run.ID(), flow.StatusWaiting)
	before := len(historyOf(t, e, run.ID()))
	sent, err := flow.Signal(ctx, e, run.ID(), "text", big, nil)
	payloadErr(t, "Signal", err, "signal text", 1202, 1000)
	if sent || len(historyOf(t, e, run.ID())) != before || len(storedSignals(t, e, run.ID())) != 0 {
		t.Fatalf("refused signal: sent %v, history %d → %d events, %d signals stored", sent, before, len(historyOf(t, e, run.ID())), len(storedSignals(t, e, run.ID())))
	}
	if _, err := flow.Signal(ctx, e, run.ID(), "text", "small", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := run.Result(ctx); err != nil || got != "small" {
		t.Fatalf("result = %q, %v", got, err)
	}

	// A step's output: the step fails for good (one attempt), and the
	// workflow sees a StepError matching ErrPayloadTooLarge.
	var stepErr error
	stepper := flow.Workflow[int, string]{
		Name: "stepper",
		Run: func(wc flow.Context, n int) (string, error) {
			out, err := flow.Do(wc, bigStep, n)
			if err != nil {
				stepErr = err
				return "step failed", nil
			}
			return out[:10], nil
		},
	}
	flow.Register(e, stepper)
	r2, err := flow.Start(ctx, e, stepper, 1200, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r2.Result(ctx); err != nil || got != "step failed" {
		t.Fatalf("result = %q, %v; want the step to fail", got, err)
	}
	var se *flow.StepError
	if !errors.As(stepErr, &se) || se.Attempts != 1 {
		t.Fatalf("step error = %v, want a *StepError after 1 attempt", stepErr)
	}
	payloadErr(t, "step output", stepErr, "output of step big", 1202, 1000)
	if info := inspect(t, e, r2.ID()); len(info.Steps) != 1 || info.Steps[0].Output != nil {
		t.Fatalf("steps %+v: want one failed step, no output stored", info.Steps)
	}

	// The workflow's output: the run fails with the error.
	grower := flow.Workflow[int, string]{
		Name: "grower",
		Run:  func(_ flow.Context, n int) (string, error) { return strings.Repeat("y", n), nil },
	}
	flow.Register(e, grower)
	r4, err := flow.Start(ctx, e, grower, 1200, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r4.Result(ctx)
	var rb *flow.RolledBackError
	if !errors.As(err, &rb) || !strings.Contains(rb.Cause, "output of workflow grower") || !strings.Contains(rb.Cause, "over the limit of 1000 bytes") {
		t.Fatalf("result err = %v; want a rolled back run naming the output and the limit", err)
	}
}

// The default limit refuses an input over it, like the 100 MB one the
// issue reports, before anything is written; a negative limit turns it
// off.
func TestDefaultPayloadLimit(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	flow.Register(e, echoText)
	huge := strings.Repeat("z", flow.DefaultMaxPayloadBytes) // two bytes over with the quotes
	_, err := flow.Start(ctx, e, echoText, huge, nil)
	payloadErr(t, "Start", err, "input", flow.DefaultMaxPayloadBytes+2, flow.DefaultMaxPayloadBytes)
	if runs, err := e.ListRuns(ctx, flow.RunFilter{}); err != nil || len(runs) != 0 {
		t.Errorf("after the refused Start: runs %+v, %v; want none recorded", runs, err)
	}

	cfg := testConfig()
	cfg.MaxPayloadBytes = -1
	unlimited := openEngine(t, dbPath(t), cfg)
	flow.Register(unlimited, echoText)
	if _, err := flow.Start(ctx, unlimited, echoText, huge, nil); err != nil {
		t.Fatalf("no limit: %v", err)
	}
}

// badNames break one naming rule each.
var badNames = []struct{ name, rule string }{
	{"", "is empty"},
	{"   ", "only white space"},
	{"\t\n", "only white space"},
	{"orders\nmail", "control or line-break character U+000A"},
	{"a\x00b", "control or line-break character U+0000"},
	{"bell\a", "U+0007"},
	{"sep\u2028x", "U+2028"},
	{"\xffbad", "not valid UTF-8"},
	{strings.Repeat("n", 201), "is 201 bytes long, over the limit of 200"},
	{strings.Repeat("n", 5000), "is 5000 bytes long"},
}

// nameErr fails the test unless err is a *NameError for kind and name,
// whose message quotes the name and states the rule.
func nameErr(t *testing.T, call string, err error, kind, name, rule string) {
	t.Helper()
	var ne *flow.NameError
	if !errors.Is(err, flow.ErrInvalidName) || !errors.As(err, &ne) || ne.Kind != kind || ne.Name != name {
		t.Errorf("%s %.20q: err = %v, want a %s NameError", call, name, err, kind)
		return
	}
	quoted := strconv.Quote(name)
	if len(name) > 400 {
		quoted = strconv.Quote(name[:40])
	}
	if !strings.Contains(err.Error(), "invalid "+kind+" name "+quoted) || !strings.Contains(err.Error(), rule) {
		t.Errorf("%s: error %.200q does not quote the name and say %q", call, err, rule)
	}
}

// Names are checked where they enter, each bad one is refused with an error
// naming it and the rule, and nothing is recorded.
func TestInvalidNamesAreRefused(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	e := openEngine(t, path, nil)
	flow.Register(e, echoText)
	handler := func(context.Context, string) error { return nil }
	job := flow.Job[string]{Name: "good-job", Handler: handler}
	flow.RegisterJob(e, job)
	startEngine(t, e)
	waiting, err := flow.Start(ctx, e, flow.Workflow[string, string]{Name: "echo"}, "", &flow.StartOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	eventsBefore := len(historyOf(t, e, waiting.ID()))

	for _, bad := range badNames {
		name, rule := bad.name, bad.rule
		err := flow.RegisterSafely(e, flow.Workflow[string, string]{Name: name, Run: echoText.Run})
		nameErr(t, "Register", err, "workflow", name, rule)
		err = flow.RegisterJobSafely(e, flow.Job[string]{Name: name, Handler: handler})
		nameErr(t, "RegisterJob", err, "job", name, rule)
		if name != "" { // an empty Job.Queue means the default queue
			err = flow.RegisterJobSafely(e, flow.Job[string]{Name: "job-2", Queue: name, Handler: handler})
			nameErr(t, "RegisterJob queue", err, "queue", name, rule)
			_, err = flow.Start(ctx, e, echoText, "x", &flow.StartOptions{Queue: name})
			nameErr(t, "Start queue", err, "queue", name, rule)
			_, err = flow.Enqueue(ctx, e, job, "x", &flow.EnqueueOptions{Queue: name})
			nameErr(t, "Enqueue queue", err, "queue", name, rule)
			err = flow.Schedule(ctx, e, "nightly", "0 3 * * *", echoText, "x", &flow.ScheduleOptions{Queue: name})
			nameErr(t, "Schedule queue", err, "queue", name, rule)
		}
		_, err = flow.Signal(ctx, e, waiting.ID(), name, "x", nil)
		nameErr(t, "Signal", err, "signal", name, rule)
		err = flow.Schedule(ctx, e, name, "0 3 * * *", echoText, "x", nil)
		nameErr(t, "Schedule", err, "schedule", name, rule)
		_, err = flowsqlite.Open(ctx, sqlitePath(t), &flow.Config{Queues: map[string]flow.QueueConfig{name: {}}}, nil)
		nameErr(t, "Open with Config.Queues", err, "queue", name, rule)
	}
	if runs, err := e.ListRuns(ctx, flow.RunFilter{}); err != nil || len(runs) != 1 {
		t.Fatalf("runs = %d, %v; want only the delayed one", len(runs), err)
	}
	if s, err := e.Schedules(ctx); err != nil || len(s) != 0 {
		t.Fatalf("schedules = %v, %v; want none", s, err)
	}
	if n := len(historyOf(t, e, waiting.ID())); n != eventsBefore || len(storedSignals(t, e, waiting.ID())) != 0 {
		t.Fatalf("refused signals changed the run: %d → %d events", eventsBefore, n)
	}

	// At the edges of the rules.
	for _, good := range []string{strings.Repeat("n", 200), "commandes-été", "a b", " padded ", "flow.child:x#1"} {
		if err := flow.RegisterSafely(e, flow.Workflow[string, string]{Name: good, Run: echoText.Run}); err != nil {
			t.Errorf("register %.30q: %v", good, err)
		}
	}
}

// A step name is checked at each call, since steps are not registered: an
// invalid one fails the call (the workflow may handle the error or return
// it, and then the run fails and is compensated); it does not suspend the
// run, and nothing is recorded for the call.
func TestInvalidStepNameFailsTheCall(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	for i, name := range []string{"", "two\nlines"} {
		wf := flow.Workflow[int, int]{
			Name: "bad-step-" + strconv.Itoa(i),
			Run: func(wc flow.Context, n int) (int, error) {
				if _, err := flow.Do(wc, double, n); err != nil {
					return 0, err
				}
				return flow.Do(wc, flow.Step[int, int]{Name: name, Run: double.Run}, n)
			},
		}
		flow.Register(e, wf)
		if i == 0 {
			startEngine(t, e)
		}
		run, err := flow.Start(ctx, e, wf, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = run.Result(ctx)
		var rb *flow.RolledBackError
		if !errors.As(err, &rb) || !strings.Contains(rb.Cause, "invalid step name "+strconv.Quote(name)) {
			t.Fatalf("step %q: result err = %v; want a rolled-back run naming the step name", name, err)
		}
		if info := inspect(t, e, run.ID()); len(info.Steps) != 1 || info.Steps[0].Name != "double" {
			t.Fatalf("step %q: recorded steps %+v; want only double", name, info.Steps)
		}
	}
}
