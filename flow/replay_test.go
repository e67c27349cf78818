package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flowlite/flowlite/flow"
)

// A deploy that changes a workflow's calls without a new Version must not
// run the new path over the old history (go-workflows' NonDeterminism,
// DBOS's TestWorkflowExecutionMismatch). Here v1 recorded step "reserve",
// and the new code calls "hold" in its place: the run is suspended with an
// error naming both calls, "hold" never runs, and the run completes once
// code that matches its history is back and an operator resumes it.
func TestReplayThatCallsAnotherStepIsSuspended(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	var mu sync.Mutex
	ran := map[string]int{}
	step := func(name string) flow.Step[int, int] {
		return flow.Step[int, int]{Name: name, Run: func(_ context.Context, n int) (int, error) {
			mu.Lock()
			ran[name]++
			mu.Unlock()
			return n + 1, nil
		}}
	}
	body := func(first string) func(flow.Context, int) (int, error) {
		return func(wc flow.Context, n int) (int, error) {
			v, err := flow.Do(wc, step(first), n)
			if err != nil {
				return 0, err
			}
			if _, err := flow.Receive[string](wc, "go", 0); err != nil {
				return 0, err
			}
			return flow.Do(wc, step("ship"), v)
		}
	}
	original := flow.Workflow[int, int]{Name: "order", Run: body("reserve")}
	changed := flow.Workflow[int, int]{Name: "order", Run: body("hold")}

	e1 := openEngine(t, path, nil)
	flow.Register(e1, original)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, original, 1, &flow.StartOptions{RunID: "nd-1"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits for its signal", func() bool {
		info, err := e1.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if err := e1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e1.Close()

	e2 := openEngine(t, path, nil)
	flow.Register(e2, changed)
	startEngine(t, e2)
	if _, err := flow.Signal(ctx, e2, run.ID(), "go", "now", nil); err != nil {
		t.Fatal(err)
	}
	handle, err := flow.Lookup(ctx, e2, changed, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	_, err = handle.Result(ctx)
	var suspended *flow.SuspendedError
	if !errors.As(err, &suspended) {
		t.Fatalf("Result = %v, want the run suspended", err)
	}
	for _, want := range []string{"call 1 of the workflow body", `step "reserve"`, `step "hold"`, "new Version"} {
		if !strings.Contains(suspended.Reason, want) {
			t.Errorf("reason %q does not say %q", suspended.Reason, want)
		}
	}
	mu.Lock()
	if ran["hold"] != 0 || ran["ship"] != 0 {
		t.Errorf("the diverged replay ran new steps: %v", ran)
	}
	mu.Unlock()
	info, err := e2.Inspect(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Steps {
		if s.Name == "hold" || s.Name == "ship" {
			t.Errorf("the diverged replay recorded step %s", s.Name)
		}
	}
	if err := e2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e2.Close()

	// The fix: code that matches the history. Resume finishes the run on it.
	e3 := openEngine(t, path, nil)
	flow.Register(e3, original)
	startEngine(t, e3)
	if err := e3.Resume(ctx, run.ID()); err != nil {
		t.Fatal(err)
	}
	handle, err = flow.Lookup(ctx, e3, original, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	if out, err := handle.Result(ctx); err != nil || out != 3 {
		t.Fatalf("after resume on matching code: %d, %v; want 3", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["reserve"] != 1 || ran["ship"] != 1 || ran["hold"] != 0 {
		t.Errorf("step bodies ran %v, want reserve and ship once each", ran)
	}
}

// A replay that returns without making a call the history recorded (a
// removed wait) diverges too, and says so.
func TestReplayThatSkipsARecordedCallIsSuspended(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	path := dbPath(t)
	noop := flow.Step[int, int]{Name: "noop", Run: func(_ context.Context, n int) (int, error) { return n, nil }}
	original := flow.Workflow[int, int]{Name: "wait", Run: func(wc flow.Context, n int) (int, error) {
		if _, err := flow.Receive[string](wc, "first", 0); err != nil {
			return 0, err
		}
		if _, err := flow.Receive[string](wc, "second", 0); err != nil {
			return 0, err
		}
		return flow.Do(wc, noop, n)
	}}
	// The new code no longer waits for "second" and returns at once.
	changed := flow.Workflow[int, int]{Name: "wait", Run: func(wc flow.Context, n int) (int, error) {
		_, err := flow.Receive[string](wc, "first", 0)
		return n, err
	}}

	e1 := openEngine(t, path, nil)
	flow.Register(e1, original)
	startEngine(t, e1)
	run, err := flow.Start(ctx, e1, original, 7, &flow.StartOptions{RunID: "nd-2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flow.Signal(ctx, e1, run.ID(), "first", "a", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits for its second signal", func() bool {
		evs, err := e1.History(ctx, run.ID())
		n := 0
		for _, ev := range evs {
			if ev.Kind == flow.EventSignalWaiting {
				n++
			}
		}
		return err == nil && n == 2
	})
	if err := e1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e1.Close()

	e2 := openEngine(t, path, nil)
	flow.Register(e2, changed)
	startEngine(t, e2)
	if _, err := flow.Signal(ctx, e2, run.ID(), "second", "b", nil); err != nil {
		t.Fatal(err)
	}
	handle, err := flow.Lookup(ctx, e2, changed, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	_, err = handle.Result(ctx)
	var suspended *flow.SuspendedError
	if !errors.As(err, &suspended) || !strings.Contains(suspended.Reason, `receive of signal "second"`) ||
		!strings.Contains(suspended.Reason, "now returns") {
		t.Fatalf("Result = %v, want a suspension naming the skipped receive", err)
	}
}

// A step error replays with the shape it had: its code (errors.Is against a
// *flow.Error sentinel), its details, and whether it was permanent. The body
// below branches on the code and then waits; when the run resumes after the
// signal, the replay must take the same branch, or the history check would
// stop it.
func TestStepErrorKeepsItsShapeOnReplay(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	errDeclined := &flow.Error{Code: "card_declined"}
	type declineDetails struct{ Last4 string }
	charge := flow.Step[int, int]{Name: "charge", Run: func(context.Context, int) (int, error) {
		return 0, flow.Permanent(fmt.Errorf("charge: %w", flow.NewError("card_declined", "card ending 4242 declined", declineDetails{"4242"})))
	}}
	plain := flow.Step[int, int]{Name: "plain", Retry: &flow.RetryPolicy{MaxAttempts: 1},
		Run: func(context.Context, int) (int, error) { return 0, errors.New("plain failure") }}
	notify := flow.Step[string, string]{Name: "notify", Run: func(_ context.Context, s string) (string, error) { return s, nil }}

	type observed struct {
		is, permanent bool
		details       string
		plainMsg      string
		plainCode     string
	}
	var mu sync.Mutex
	var seen []observed
	wf := flow.Workflow[int, string]{Name: "pay", Run: func(wc flow.Context, n int) (string, error) {
		_, err := flow.Do(wc, charge, n)
		var o observed
		o.is = errors.Is(err, errDeclined)
		var perm *flow.PermanentError
		o.permanent = errors.As(err, &perm)
		var fe *flow.Error
		if errors.As(err, &fe) {
			var d declineDetails
			if fe.DecodeDetails(&d) == nil {
				o.details = d.Last4
			}
		}
		_, perr := flow.Do(wc, plain, n)
		if errors.As(perr, &fe) {
			o.plainMsg, o.plainCode = fe.Message, fe.Code
		}
		mu.Lock()
		seen = append(seen, o)
		mu.Unlock()
		if !o.is {
			return "", err
		}
		if _, err := flow.Receive[string](wc, "ack", 0); err != nil {
			return "", err
		}
		return flow.Do(wc, notify, "declined "+o.details)
	}}
	flow.Register(e, wf)
	startEngine(t, e)
	run, err := flow.Start(ctx, e, wf, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run waits for its ack", func() bool {
		info, err := e.Inspect(ctx, run.ID())
		return err == nil && info.Status == flow.StatusWaiting
	})
	if _, err := flow.Signal(ctx, e, run.ID(), "ack", "ok", nil); err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(ctx)
	if err != nil || out != "declined 4242" {
		t.Fatalf("Result = %q, %v; want the declined branch", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("the body ran %d times, want a first execution and a replay", len(seen))
	}
	want := observed{is: true, permanent: true, details: "4242", plainMsg: "plain failure", plainCode: ""}
	for i, o := range seen {
		if o != want {
			t.Errorf("execution %d saw %+v, want %+v", i, o, want)
		}
	}
}

// Starting a child with a run ID that is taken fails the call with
// ErrRunExists, whether the holder is still running or finished, and a
// replay of the parent gets the same error back: the second input never
// runs, and the first child's output is not passed off as the second's.
func TestChildRunIDThatIsTakenFailsTheCall(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	e := openEngine(t, dbPath(t), nil)
	var mu sync.Mutex
	var inputs []int
	child := flow.Workflow[int, int]{Name: "child", Run: func(wc flow.Context, n int) (int, error) {
		mu.Lock()
		inputs = append(inputs, n)
		mu.Unlock()
		if n < 0 { // a child that keeps running until signalled
			if _, err := flow.Receive[string](wc, "done", 0); err != nil {
				return 0, err
			}
		}
		return n * 10, nil
	}}
	var replays []string
	parent := flow.Workflow[string, string]{Name: "parent", Run: func(wc flow.Context, mode string) (string, error) {
		first := 1
		if mode == "active" {
			first = -1
		}
		c1, err := flow.StartChild(wc, child, first, &flow.ChildOptions{RunID: "sub-" + mode})
		if err != nil {
			return "", err
		}
		if mode == "finished" {
			if _, err := c1.Result(wc); err != nil {
				return "", err
			}
		}
		_, err = flow.StartChild(wc, child, 2, &flow.ChildOptions{RunID: "sub-" + mode})
		outcome := fmt.Sprintf("exists=%v", errors.Is(err, flow.ErrRunExists))
		mu.Lock()
		replays = append(replays, mode+":"+outcome)
		mu.Unlock()
		if _, err := flow.Receive[string](wc, "finish", 0); err != nil {
			return "", err
		}
		return outcome, nil
	}}
	flow.Register(e, child)
	flow.Register(e, parent)
	startEngine(t, e)

	for _, mode := range []string{"active", "finished"} {
		run, err := flow.Start(ctx, e, parent, mode, &flow.StartOptions{RunID: "parent-" + mode})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the parent waits for finish", func() bool {
			evs, err := e.History(ctx, run.ID())
			if err != nil {
				return false
			}
			for _, ev := range evs {
				if ev.Kind == flow.EventSignalWaiting {
					return true
				}
			}
			return false
		})
		if _, err := flow.Signal(ctx, e, run.ID(), "finish", "", nil); err != nil {
			t.Fatal(err)
		}
		if out, err := run.Result(ctx); err != nil || out != "exists=true" {
			t.Fatalf("%s: parent = %q, %v; want the second start to fail with ErrRunExists", mode, out, err)
		}
	}
	if _, err := flow.Signal(ctx, e, "sub-active", "done", "", nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range inputs {
		if n == 2 {
			t.Errorf("the second child's input ran: inputs %v", inputs)
		}
	}
	for _, r := range replays {
		if !strings.HasSuffix(r, "exists=true") {
			t.Errorf("an execution of the parent saw %s; every one must see ErrRunExists", r)
		}
	}
	if len(replays) < 4 {
		t.Errorf("executions %v: want a first execution and a replay per parent", replays)
	}
}
